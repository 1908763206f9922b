package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClusterPeerUnreachableAfterSIGKILL runs three real offsetd processes
// of one cluster and SIGKILLs one: within two election timeouts (Raft's
// default, 1-2 s, so 2 s), both others read it unreachable in
// offsetd_raft_peer_reachable and log it, once; started again, it reads
// reachable again, and they log that too.
func TestClusterPeerUnreachableAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three processes")
	}
	const twoElectionTimeouts = 2 * 10 * 100 * time.Millisecond // the default 10 ticks of 100 ms
	tmp := t.TempDir()
	bin := buildBinary(t, tmp)
	addrs := freeAddrs(t, 6)
	raft, api := addrs[:3], addrs[3:]
	peers := peersOf(raft)
	start := func(id int) *process {
		t.Helper()
		p := startProcess(t, bin, "serve", "-data", filepath.Join(tmp, fmt.Sprint(id)), "-listen", api[id-1], "-partitions", "2",
			"-kafka-listen=", "-node-id", fmt.Sprint(id), "-peers", strings.Join(peers, ","), "-raft-listen", raft[id-1])
		t.Cleanup(func() {
			p.cmd.Process.Kill()
			<-p.exited
		})
		return p
	}
	procs := map[int]*process{1: start(1), 2: start(2), 3: start(3)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const series = `offsetd_raft_peer_reachable{peer="3"}`
	for _, id := range []int{1, 2} {
		if _, err := awaitMetric(ctx, procs[id].url, series, 1); err != nil {
			t.Fatalf("node %d: %v\n%s", id, err, procs[id].stderr)
		}
	}
	const downLine, upLine = `msg="raft peer unreachable" peer=3`, `msg="raft peer reachable again" peer=3`
	downBefore := map[int]int{}
	for _, id := range []int{1, 2} {
		downBefore[id] = strings.Count(procs[id].stderr.String(), downLine)
	}

	if err := procs[3].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-procs[3].exited
	for _, id := range []int{1, 2} {
		at, err := awaitMetric(ctx, procs[id].url, series, 0)
		if err != nil {
			t.Fatalf("node %d after node 3's SIGKILL: %v", id, err)
		}
		took := at.Sub(killed)
		t.Logf("node %d read node 3 unreachable %v after its SIGKILL", id, took.Round(time.Millisecond))
		if took > twoElectionTimeouts {
			t.Errorf("node %d read node 3 unreachable %v after its SIGKILL, more than two election timeouts (%v)", id, took, twoElectionTimeouts)
		}
	}

	// cluster status, asked of node 1, shows node 3 unreachable.
	status := mustRun(t, 0, map[string]string{"OFFSETD_ADDR": procs[1].url}, "cluster", "status")
	if !regexp.MustCompile(`(?m)^3 +\S+ +no +`).MatchString(status) || !strings.Contains(status, "\nnode 3 did not answer: ") {
		t.Errorf("cluster status with node 3 killed:\n%s", status)
	}

	procs[3] = start(3)
	for _, id := range []int{1, 2} {
		if _, err := awaitMetric(ctx, procs[id].url, series, 1); err != nil {
			t.Fatalf("node %d after node 3 restarted: %v", id, err)
		}
		// The log follows the metric by a tick at most.
		for {
			logs := procs[id].stderr.String()
			if i := strings.LastIndex(logs, downLine); i >= 0 && strings.Contains(logs[i:], upLine) {
				if n := strings.Count(logs, downLine) - downBefore[id]; n != 1 {
					t.Errorf("node %d logged node 3 unreachable %d times after its SIGKILL, want once:\n%s", id, n, logs)
				}
				break
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				t.Fatalf("node %d did not log node 3 unreachable, then reachable again:\n%s", id, logs)
			}
		}
	}
}

// awaitMetric scrapes url's /metrics until series has value want, and
// returns when it first read it. A process's state, seen from outside:
// nothing to wait on but the scrape itself.
func awaitMetric(ctx context.Context, url, series string, want float64) (time.Time, error) {
	last := "absent"
	for {
		code, body, err := get(ctx, url+"/metrics")
		if err == nil && code == http.StatusOK {
			last = "absent"
			for line := range strings.Lines(body) {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
					last = v
					if f, err := strconv.ParseFloat(v, 64); err == nil && f == want {
						return time.Now(), nil
					}
				}
			}
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s stayed %s, want %v: %w", series, last, want, ctx.Err())
		}
	}
}

// get GETs url and returns its status and body.
func get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
