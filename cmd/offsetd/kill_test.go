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

// TestClusterSIGKILL runs three real offsetd processes of one cluster on
// loopback, with writers and readers going through any node, and
// SIGKILLs the leader of the writers' partition again and again, starting
// it again each time on its data. After each failover every group shows
// its last acknowledged commit, and the history of commits and reads is
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
	var peers []string
	for i, a := range raft {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	var mu sync.Mutex
	procs := map[int]*process{}
	start := func(id int) {
		t.Helper()
		cmd := exec.Command(bin, "serve", "-data", filepath.Join(tmp, fmt.Sprint(id)), "-listen", api[id-1], "-partitions", "4",
			"-kafka-listen=", "-node-id", fmt.Sprint(id), "-peers", strings.Join(peers, ","), "-raft-listen", raft[id-1])
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
			t.Fatalf("node %d printed nothing:\n%s", id, p.stderr)
		}
		p.url, _ = parseListening(t, sc.Text())
		go func() {
			for sc.Scan() { // keep the pipe drained
			}
			p.err = cmd.Wait()
			close(p.exited)
		}()
		mu.Lock()
		procs[id] = p
		mu.Unlock()
	}
	kill := func(id int) {
		t.Helper()
		mu.Lock()
		p := procs[id]
		delete(procs, id)
		mu.Unlock()
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
	// The leader to kill: the preferred node of group a's partition, once
	// it leads (after a restart the lead moves back to it).
	part, _ := partitioner.New(4)
	target := part.Group(groups[0])%3 + 1
	for round := range 3 {
		if err := h.AwaitAcks(ctx, 50); err != nil {
			t.Fatal(err)
		}
		for {
			info, err := pick(target).Coordinator(ctx, groups[0])
			if err != nil {
				t.Fatal(err)
			}
			if int(info.Leader) == target {
				break
			}
			if err := h.AwaitAcks(ctx, 1); err != nil { // let time pass
				t.Fatal(err)
			}
		}
		killed, stamp := time.Now(), h.Call()
		kill(target)
		// Served again: a commit of the group, begun after the kill, is
		// acknowledged.
		for {
			if err := h.AwaitAcks(ctx, 1); err != nil {
				t.Fatalf("round %d: after killing leader %d: %v", round, target, err)
			}
			if _, call, at := h.LastAck(groups[0]); call > stamp {
				t.Logf("round %d: killed leader %d; a commit of group %s acknowledged %v later", round, target, groups[0], at.Sub(killed).Round(time.Millisecond))
				break
			}
		}
		check()
		start(target)
	}
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
