package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/log"
)

// What a snapshotProxy does with the connections it forwards.
const (
	proxyDown int32 = iota // closes each at once
	proxyCut               // cuts a snapshot POST halfway through its file
	proxyUp                // forwards everything
)

// proxyCutAfter is how much of a snapshot POST a cutting proxy forwards:
// about half of commitBulk's snapshot.
const proxyCutAfter = bulkParts * bulkMetadata / 2

// snapshotProxy forwards TCP connections on loopback to a node's Raft
// listener, as its mode says: one that it cuts is closed both ways, as by
// a network that fails in the middle of a transfer.
type snapshotProxy struct {
	l    net.Listener
	to   string
	mode atomic.Int32
	cuts atomic.Int32
	wg   sync.WaitGroup
}

func newSnapshotProxy(t *testing.T, to string) *snapshotProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &snapshotProxy{l: l, to: to}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(c)
			}()
		}
	}()
	return p
}

func (p *snapshotProxy) close() {
	p.l.Close()
	p.wg.Wait()
}

// forward copies c to the node and back, until either end closes it or
// the proxy cuts it.
func (p *snapshotProxy) forward(c net.Conn) {
	defer c.Close()
	if p.mode.Load() == proxyDown {
		return
	}
	up, err := net.Dial("tcp", p.to)
	if err != nil {
		return
	}
	defer up.Close()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		io.Copy(c, up)
		c.Close()
	}()
	buf := make([]byte, 64<<10)
	cutting, sent := false, 0 // a snapshot POST being cut, and how much of it was forwarded
	for {
		n, err := c.Read(buf)
		b := buf[:n]
		if !cutting && p.mode.Load() == proxyCut {
			if i := bytes.Index(b, []byte("POST "+cluster.SnapshotPath)); i >= 0 {
				cutting, sent = true, -i // counted from the request's start
			}
		}
		if cutting {
			if sent+len(b) > proxyCutAfter {
				up.Write(b[:proxyCutAfter-sent])
				p.cuts.Add(1)
				return
			}
			sent += len(b)
		}
		if _, werr := up.Write(b); werr != nil || err != nil || p.mode.Load() == proxyDown {
			return
		}
	}
}

// TestSnapshotStreamedOverHTTP: over real HTTP on loopback, a node cut off
// while the others compacted their logs catches up from a snapshot of more
// than a megabyte, streamed; transfers whose connection drops halfway leave
// no snapshot file on it, and the leader sends again until one arrives.
func TestSnapshotStreamedOverHTTP(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	peers := []uint64{1, 2, 3}
	listeners := map[uint64]net.Listener{}
	addrs := map[uint64]string{}
	for _, id := range peers {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners[id], addrs[id] = l, l.Addr().String()
	}
	proxy := newSnapshotProxy(t, addrs[3])
	defer proxy.close()
	addrs[3] = proxy.l.Addr().String() // the others reach node 3 through it
	copts := coordinator.Options{Partitions: 1, Logger: quiet}
	smallJournal(&copts)
	nodes := map[uint64]*cluster.Node{}
	for _, id := range peers {
		others := map[uint64]string{}
		for _, p := range peers {
			if p != id {
				others[p] = addrs[p]
			}
		}
		if id == 3 {
			others[1], others[2] = listeners[1].Addr().String(), listeners[2].Addr().String()
		}
		tr := cluster.NewHTTPTransport(cluster.HTTPOptions{ID: id, Peers: others, Address: addrs[id], Token: "secret", Logger: quiet})
		n, err := cluster.Open(filepath.Join(dir, fmt.Sprint(id)), copts,
			cluster.Options{ID: id, Peers: peers, Transport: tr, TickInterval: testTick, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: cluster.Handler(n, "secret")}
		go srv.Serve(listeners[id])
		nodes[id] = n
		defer func() {
			srv.Close()
			tr.Close()
			if err := n.Close(); err != nil {
				t.Errorf("close node %d: %v", id, err)
			}
		}()
	}

	resp, err := http.Post("http://"+listeners[1].Addr().String()+cluster.SnapshotPath, "application/octet-stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a snapshot without the token: %s, want 401", resp.Status)
	}

	// Node 3 hears nothing, and so never leads: node 1 knows the leader.
	commit := func(group string, offsets []coordinator.OffsetCommit) {
		t.Helper()
		for {
			leader, err := nodes[1].AwaitLeader(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			err = nodes[leader].Coordinator().Commit(ctx, group, offsets)
			if err == nil {
				return
			}
			t.Logf("commit on node %d: %v; retrying", leader, err)
		}
	}
	for _, batch := range bulkCommits() {
		commit("bulk", batch)
	}
	for round := range 2 {
		for i := range 20 {
			commit(fmt.Sprint("g", i), []coordinator.OffsetCommit{{Topic: "t", Offset: int64(round*20 + i)}})
		}
		for _, id := range []uint64{1, 2} {
			if err := nodes[id].Coordinator().Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	snapDir := coordinator.SnapshotDir(filepath.Join(dir, "3"), 0)
	proxy.mode.Store(proxyCut)
	for proxy.cuts.Load() < 2 {
		select {
		case <-nodes[3].Progressed():
		case <-ctx.Done():
			t.Fatalf("no snapshot transfer to node 3 was cut: %d", proxy.cuts.Load())
		}
	}
	if snaps, _ := log.ListSnapshots(snapDir); len(snaps) != 0 {
		t.Fatalf("snapshot transfers cut halfway left node 3 with snapshots %v", snaps)
	}
	proxy.mode.Store(proxyUp)
	if err := awaitApplied(ctx, nodes[3], "g19", 39); err != nil {
		t.Fatal(err)
	}
	checkBulk(t, nodes[3])
	if snaps, err := log.ListSnapshots(snapDir); err != nil || len(snaps) == 0 {
		t.Fatalf("node 3 caught up without a snapshot (%v, %v): the log was not compacted", snaps, err)
	}
}
