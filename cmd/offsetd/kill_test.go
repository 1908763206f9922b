package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/internal/offsetcheck"
	"github.com/offsetd/offsetd/partitioner"
)

// process is one offsetd serve of a cluster, a child process.
type process struct {
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	exited chan struct{} // closed when the process has exited
	err    error         // how it exited, once exited is closed
}

// lockedBuffer is a bytes.Buffer that a child's stderr may write while the
// test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startProcess starts bin with args, an offsetd serve command line, as a
// child process, and returns once it printed where it listens.
func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	p := &process{cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		cmd.Wait()
		t.Fatalf("%s printed nothing:\n%s", strings.Join(args, " "), p.stderr)
	}
	p.url, _ = parseListening(t, sc.Text())
	go func() {
		for sc.Scan() { // keep the pipe drained
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// TestClusterSIGKILL runs three real offsetd processes of one cluster on
// loopback, with writers and readers going through any node, and
// SIGKILLs the leader of the writers' partition again and again, starting
// it again each time on its data; then it pauses that leader past an
// election (SIGSTOP, SIGCONT), and last stops it gracefully (SIGTERM) and
// starts it again. After each failover every group shows its last
// acknowledged commit, and the history of commits and reads is
// linearizable. It logs how soon after each kill a commit of the killed
// leader's partition was acknowledged again.
func TestClusterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three processes")
	}
	tmp := t.TempDir()
	bin := buildBinary(t, tmp)
	addrs := freeAddrs(t, 6)
	raft, api := addrs[:3], addrs[3:]
	peers := peersOf(raft)
	var mu sync.Mutex
	procs := map[int]*process{}
	start := func(id int) {
		t.Helper()
		p := startProcess(t, bin, "serve", "-data", filepath.Join(tmp, fmt.Sprint(id)), "-listen", api[id-1], "-partitions", "4",
			"-kafka-listen=", "-node-id", fmt.Sprint(id), "-peers", strings.Join(peers, ","), "-raft-listen", raft[id-1])
		mu.Lock()
		procs[id] = p
		mu.Unlock()
	}
	// take removes node id from the running ones, so that new calls go to
	// the others, and returns it.
	take := func(id int) *process {
		mu.Lock()
		defer mu.Unlock()
		p := procs[id]
		delete(procs, id)
		return p
	}
	kill := func(id int) {
		t.Helper()
		p := take(id)
		select {
		case <-p.exited:
			t.Errorf("node %d exited before it was killed: %v; its stderr:\n%s", id, p.err, p.stderr)
			return
		default:
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		<-p.exited
	}
	t.Cleanup(func() {
		for id := range 3 {
			mu.Lock()
			p := procs[id+1]
			mu.Unlock()
			if p != nil {
				kill(id + 1)
			}
		}
	})
	t.Cleanup(func() { // before the nodes are killed
		if !t.Failed() {
			return
		}
		// Say what became of each node the test believes is running.
		mu.Lock()
		defer mu.Unlock()
		for id, p := range procs {
			select {
			case <-p.exited:
				t.Logf("node %d (%s) exited on its own: %v; its stderr:\n%s", id, p.url, p.err, p.stderr)
			default:
				t.Logf("node %d (%s) runs; its stderr:\n%s", id, p.url, p.stderr)
			}
		}
	})
	for id := 1; id <= 3; id++ {
		start(id)
	}
	clients := map[int]*client.Client{}
	for id := 1; id <= 3; id++ {
		// 400 retries 10ms apart outlast an election after a kill (one to
		// two seconds of Raft ticks), also for a call that a node sends on
		// to the leader just killed.
		c, err := client.New("http://"+api[id-1], client.Options{Retries: 400, MaxRetryWait: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		clients[id] = c
	}
	// pick returns the client of a running node, turning with n.
	pick := func(n int) *client.Client {
		mu.Lock()
		defer mu.Unlock()
		for i := range 3 {
			id := (n+i)%3 + 1
			if procs[id] != nil {
				return clients[id]
			}
		}
		return clients[1]
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	groups := []string{"a", "b", "c"}
	h := offsetcheck.New()
	stop := h.Load(groups, 1,
		func(n int, g string, v int64) error {
			_, err := pick(n).Commit(ctx, g, -1, []client.OffsetCommit{{Topic: "t", Offset: v, LeaderEpoch: -1}})
			return err
		},
		func(n int, g string) (int64, error) {
			o, err := pick(n).Offset(ctx, g, "t", 0)
			if errors.Is(err, client.ErrNotFound) {
				return -1, nil
			}
			return o.Offset, err
		})

	check := func() {
		t.Helper()
		for _, g := range groups {
			want, _, _ := h.LastAck(g)
			o, err := pick(0).Offset(ctx, g, "t", 0)
			if err != nil && !(errors.Is(err, client.ErrNotFound) && want < 0) {
				t.Fatalf("read %s: %v", g, err)
			}
			if err == nil && o.Offset < want {
				t.Fatalf("group %s: offset %d, but %d was acknowledged", g, o.Offset, want)
			}
		}
	}
	// The leader to stop: the preferred node of group a's partition, once
	// it leads (after a restart the lead moves back to it).
	part, _ := partitioner.New(4)
	target := part.Group(groups[0])%3 + 1
	awaitLead := func() {
		t.Helper()
		if err := h.AwaitAcks(ctx, 50); err != nil {
			t.Fatal(err)
		}
		for {
			info, err := pick(target).Coordinator(ctx, groups[0])
			if err != nil {
				t.Fatal(err)
			}
			if int(info.Leader) == target {
				return
			}
			if err := h.AwaitAcks(ctx, 1); err != nil { // let time pass
				t.Fatal(err)
			}
		}
	}
	// awaitServed waits until a commit of group a begun after call stamp
	// is acknowledged, and returns when.
	awaitServed := func(what string, stamp int64) time.Time {
		t.Helper()
		for {
			if err := h.AwaitAcks(ctx, 1); err != nil {
				t.Fatalf("after %s: %v", what, err)
			}
			if _, call, at := h.LastAck(groups[0]); call > stamp {
				return at
			}
		}
	}
	for round := range 3 {
		awaitLead()
		killed, stamp := time.Now(), h.Call()
		kill(target)
		at := awaitServed(fmt.Sprintf("killing leader %d", target), stamp)
		t.Logf("round %d: killed leader %d; a commit of group %s acknowledged %v later", round, target, groups[0], at.Sub(killed).Round(time.Millisecond))
		check()
		start(target)
	}

	// The leader paused past an election (SIGSTOP), then resumed: the
	// calls it held answer once it runs again, and they too must be
	// linearizable (a deposed leader serves no stale read, and loses no
	// commit it acknowledges).
	awaitLead()
	paused := take(target)
	stamp := h.Call()
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	<-time.After(3 * time.Second) // an election takes 1-2 s
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	procs[target] = paused
	mu.Unlock()
	awaitServed(fmt.Sprintf("pausing leader %d", target), stamp)
	check()

	// The leader stopped gracefully (SIGTERM): it hands its lead off and
	// exits cleanly, and starts again on its data.
	awaitLead()
	termed := take(target)
	stopped, stamp := time.Now(), h.Call()
	if err := termed.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-termed.exited
	if termed.err != nil {
		t.Fatalf("node %d after SIGTERM: %v; its stderr:\n%s", target, termed.err, termed.stderr)
	}
	at := awaitServed(fmt.Sprintf("stopping leader %d", target), stamp)
	t.Logf("stopped leader %d; a commit of group %s acknowledged %v later", target, groups[0], at.Sub(stopped).Round(time.Millisecond))
	// Not a speed target but the mechanism: a follower campaigns only after
	// an election timeout (10 ticks of 100ms, less the one it may have run
	// of since the last heartbeat), so an acknowledgement sooner than that
	// shows the lead was handed off.
	if took := at.Sub(stopped); took >= 900*time.Millisecond {
		t.Fatalf("a commit of group %s acknowledged %v after its leader's SIGTERM: the lead was not handed off (an election took its place)", groups[0], took)
	}
	check()
	start(target)
	if err := h.AwaitAcks(ctx, 50); err != nil {
		t.Fatal(err)
	}
	stop()
	check()
	if err := h.Check(t.TempDir(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations, %d commits acknowledged", h.Len(), h.Acked())
}
