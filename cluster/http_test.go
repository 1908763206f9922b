package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	// What reached its Raft listener: POSTs of messages, and streams.
	posts, streams *atomic.Int64
}

// startHTTPCluster starts size nodes that talk over HTTP on loopback;
// knows says whether a node is given another's address at start. It
// returns the running nodes and a function that stops one.
func startHTTPCluster(t *testing.T, size uint64, knows func(id, other uint64) bool) (map[uint64]*httpMember, map[uint64]string, func(id uint64)) {
	t.Helper()
	return startHTTPClusterOf(t, size, knows, func(uint64) bool { return false })
}

// startHTTPClusterOf is startHTTPCluster where the nodes that earlier says
// answer as a release before streams did: they take no stream, and their
// answers to POSTs do not offer one.
func startHTTPClusterOf(t *testing.T, size uint64, knows func(id, other uint64) bool, earlier func(id uint64) bool) (map[uint64]*httpMember, map[uint64]string, func(id uint64)) {
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
		posts, streams := new(atomic.Int64), new(atomic.Int64)
		old := earlier(id)
		h := cluster.Handler(n, "secret")
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if closed.Load() {
				http.Error(w, "closed by the test", http.StatusServiceUnavailable)
				return
			}
			switch r.URL.Path {
			case cluster.RaftPath:
				posts.Add(1)
			case cluster.StreamPath:
				streams.Add(1)
				if old {
					http.NotFound(w, r)
					return
				}
			}
			if old {
				w = noStreams{w}
			}
			r.Body = cutBody{r.Body, closed} // a stream open already hears nothing more either
			h.ServeHTTP(w, r)
		})}
		go srv.Serve(listeners[id])
		members[id] = &httpMember{node: n, transport: tr, server: srv, closed: closed, log: log, posts: posts, streams: streams}
	}
	return members, addrs, stop
}

// cutBody fails every read of a request body once closed is set.
type cutBody struct {
	io.ReadCloser
	closed *atomic.Bool
}

func (b cutBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.closed.Load() {
		return 0, errors.New("closed by the test")
	}
	return n, err
}

// noStreams answers as a release before streams did: without offering one.
type noStreams struct{ http.ResponseWriter }

func (w noStreams) WriteHeader(code int) {
	w.Header().Del("X-Offsetd-Streams")
	w.ResponseWriter.WriteHeader(code)
}

// TestHTTPStreams: nodes that take streams get their messages on one
// stream from each other node, not in POSTs, while a node of an earlier
// release (node 3) still gets POSTs, and every commit reaches all three.
func TestHTTPStreams(t *testing.T) {
	members, _, _ := startHTTPClusterOf(t, 3, func(_, _ uint64) bool { return true }, func(id uint64) bool { return id == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	offset := int64(0)
	commits := func(n int) {
		t.Helper()
		for range n {
			offset++
			for {
				leader, err := members[1].node.AwaitLeader(ctx, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				err = members[leader].node.Coordinator().Commit(ctx, "g", []coordinator.OffsetCommit{{Topic: "t", Offset: offset}})
				if err == nil {
					break
				}
				t.Logf("commit %d on node %d: %v; retrying", offset, leader, err)
			}
		}
	}
	// The senders start with POSTs, and stream once a peer's answer
	// offers it: wait for a round of commits that nodes 1 and 2 get on
	// streams alone.
	for {
		before := members[1].posts.Load() + members[2].posts.Load()
		commits(20)
		if members[1].posts.Load()+members[2].posts.Load() == before {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("nodes 1 and 2 still get POSTs: %v", ctx.Err())
		}
	}
	before := members[3].posts.Load()
	commits(20)
	for id, m := range members {
		if err := awaitApplied(ctx, m.node, "g", offset); err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
	}
	for _, id := range []uint64{1, 2} {
		if n := members[id].streams.Load(); n < 2 {
			t.Errorf("node %d took %d streams, want one from each other node", id, n)
		}
	}
	if n := members[3].streams.Load(); n != 0 {
		t.Errorf("node 3, of an earlier release, was offered %d streams", n)
	}
	if after := members[3].posts.Load(); after == before {
		t.Errorf("node 3, of an earlier release, got no POST during 20 commits")
	}
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
