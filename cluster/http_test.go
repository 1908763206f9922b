package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/offsetd/offsetd/coordinator"
)

// TestHTTPTransport runs three nodes that talk over real HTTP on
// loopback: commits on the leader reach every node, a follower learns
// where the leader serves clients, and the cluster serves again once the
// leader's node is gone.
func TestHTTPTransport(t *testing.T) {
	const size = 3
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
	type member struct {
		node      *Node
		transport *HTTPTransport
		server    *http.Server
	}
	members := map[uint64]*member{}
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
			if p != id {
				others[p] = a
			}
		}
		tr := NewHTTPTransport(HTTPOptions{ID: id, Peers: others, Advertise: fmt.Sprintf("client-%d:80", id), Token: "secret", Logger: quiet})
		n, err := Open(filepath.Join(dir, fmt.Sprint(id)), coordinator.Options{Partitions: 2, Logger: quiet},
			Options{ID: id, Peers: peers, Transport: tr, TickInterval: testTick, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: Handler(n, "secret")}
		go srv.Serve(listeners[id])
		members[id] = &member{node: n, transport: tr, server: srv}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	commit := func(offset int64) uint64 {
		t.Helper()
		var gone uint64
		for {
			var any *Node
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
	resp, err := http.Post("http://"+addrs[1]+RaftPath, "application/octet-stream", nil)
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
