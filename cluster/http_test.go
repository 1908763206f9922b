package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
)

// httpMember is a node of a test cluster over real HTTP on loopback.
type httpMember struct {
	node      *cluster.Node
	transport *cluster.HTTPTransport
	server    *http.Server
	closed    *atomic.Bool // set, the node's Raft listener answers 503 to everything
	log       *testLog
}

// startHTTPCluster starts size nodes that talk over HTTP on loopback;
// knows says whether a node is given another's address at start. It
// returns the running nodes and a function that stops one.
func startHTTPCluster(t *testing.T, size uint64, knows func(id, other uint64) bool) (map[uint64]*httpMember, map[uint64]string, func(id uint64)) {
	t.Helper()
	dir := t.TempDir()
	listeners := map[uint64]net.Listener{}
	addrs := map[uint64]string{}
	var peers []uint64
	for id := uint64(1); id <= size; id++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners[id], addrs[id] = l, l.Addr().String()
		peers = append(peers, id)
	}
	members := map[uint64]*httpMember{}
	stop := func(id uint64) {
		m := members[id]
		if m == nil {
			return
		}
		delete(members, id)
		m.server.Close()
		m.transport.Close()
		if err := m.node.Close(); err != nil {
			t.Errorf("close node %d: %v", id, err)
		}
	}
	t.Cleanup(func() {
		for id := range members {
			stop(id)
		}
	})
	for _, id := range peers {
		others := map[uint64]string{}
		for p, a := range addrs {
			if p != id && knows(id, p) {
				others[p] = a
			}
		}
		tr := cluster.NewHTTPTransport(cluster.HTTPOptions{ID: id, Peers: others, Advertise: fmt.Sprintf("client-%d:80", id), Address: addrs[id], Token: "secret", Logger: quiet})
		log := &testLog{}
		n, err := cluster.Open(filepath.Join(dir, fmt.Sprint(id)), coordinator.Options{Partitions: 2, Logger: quiet},
			cluster.Options{ID: id, Peers: peers, Transport: tr, TickInterval: testTick, Logger: slog.New(log)})
		if err != nil {
			t.Fatal(err)
		}
		closed := new(atomic.Bool)
		h := cluster.Handler(n, "secret")
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if closed.Load() {
				http.Error(w, "closed by the test", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})}
		go srv.Serve(listeners[id])
		members[id] = &httpMember{node: n, transport: tr, server: srv, closed: closed, log: log}
	}
	return members, addrs, stop
}

// TestHTTPTransport runs three nodes that talk over real HTTP on
// loopback: commits on the leader reach every node, a follower learns
// where the leader serves clients, and the cluster serves again once the
// leader's node is gone.
func TestHTTPTransport(t *testing.T) {
	members, addrs, stop := startHTTPCluster(t, 3, func(_, _ uint64) bool { return true })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	commit := func(offset int64) uint64 {
		t.Helper()
		var gone uint64
		for {
			var any *cluster.Node
			for _, m := range members {
				any = m.node
				break
			}
			leader, err := any.AwaitLeader(ctx, 0, gone)
			if err != nil {
				t.Fatal(err)
			}
			m := members[leader]
			if m == nil {
				gone = leader // stopped: wait for news of another
				continue
			}
			err = m.node.Coordinator().Commit(ctx, "g", []coordinator.OffsetCommit{{Topic: "t", Offset: offset}})
			if err == nil {
				return leader
			}
			t.Logf("commit %d on node %d: %v; retrying", offset, leader, err)
		}
	}
	resp, err := http.Post("http://"+addrs[1]+cluster.RaftPath, "application/octet-stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a message without the token: %s, want 401", resp.Status)
	}

	leader := commit(1)
	for id, m := range members {
		if err := awaitApplied(ctx, m.node, "g", 1); err != nil {
			t.Fatal(err)
		}
		if id == leader {
			continue
		}
		if addr, ok := m.node.Address(leader); !ok || addr != fmt.Sprintf("client-%d:80", leader) {
			t.Fatalf("node %d knows the leader's client address as %q (%v)", id, addr, ok)
		}
	}
	stop(leader)
	next := commit(2)
	if next == leader {
		t.Fatalf("node %d committed after it was stopped", leader)
	}
	for _, m := range members {
		if err := awaitApplied(ctx, m.node, "g", 2); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHTTPTransportLearnsPeers: a node started without another's address
// (one that joined later, while it ran with an older list of peers) learns
// it from that node's messages, and the two make a quorum once the third
// node stops.
func TestHTTPTransportLearnsPeers(t *testing.T) {
	members, _, stop := startHTTPCluster(t, 3, func(id, other uint64) bool { return !(id == 1 && other == 3) })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	stop(2)
	for {
		leader, err := members[1].node.AwaitLeader(ctx, 0, 0)
		if err != nil {
			t.Fatalf("nodes 1 and 3 elect no leader: %v", err)
		}
		if leader == 2 {
			// Node 1 still believes in the stopped node: wait for news.
			if _, err := members[1].node.AwaitLeader(ctx, 0, 2); err != nil {
				t.Fatal(err)
			}
			continue
		}
		err = members[leader].node.Coordinator().Commit(ctx, "g", []coordinator.OffsetCommit{{Topic: "t", Offset: 7}})
		if err == nil {
			break
		}
		t.Logf("commit on node %d: %v; retrying", leader, err)
	}
	for _, id := range []uint64{1, 3} {
		if err := awaitApplied(ctx, members[id].node, "g", 7); err != nil {
			t.Fatal(err)
		}
	}
}
