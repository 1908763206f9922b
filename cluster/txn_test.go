package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
)

// TestTxnOffsetsReplicated: offsets pending in a transaction reach every
// node, each node's data directory moves to the format of transactional
// offsets, the leader's stop keeps them pending on the new leader, and the
// marker written there commits them on every node, the restarted one too.
func TestTxnOffsetsReplicated(t *testing.T) {
	tc := newTestCluster(t, 1, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	at := []coordinator.OffsetCommit{{Topic: "t", Partition: 0, Offset: 7}}
	if err := tc.leaderFor(ctx, "g", func(n *cluster.Node) error {
		return n.Coordinator().TxnCommit(ctx, "g", 5, 0, coordinator.NoGeneration, at)
	}); err != nil {
		t.Fatal(err)
	}
	pendingOn := func(n *cluster.Node) int {
		p, err := n.Coordinator().PendingOffsets("g")
		if err != nil {
			return -1
		}
		return len(p)
	}
	awaitAll := func(what string, ok func(n *cluster.Node) bool) {
		t.Helper()
		for _, id := range tc.peers {
			for n := tc.node(id); n != nil && !ok(n); {
				select {
				case <-n.Progressed():
				case <-ctx.Done():
					t.Fatalf("node %d: %s not reached", id, what)
				}
			}
		}
	}
	awaitAll("pending offset", func(n *cluster.Node) bool { return pendingOn(n) == 1 })
	for _, id := range tc.peers {
		l, err := coordinator.ReadLayout(filepath.Join(tc.dir, fmt.Sprint(id)))
		if err != nil || l.Format != 3 {
			t.Errorf("node %d: format %d %v, want 3", id, l.Format, err)
		}
	}

	leader, err := tc.anyNode(0, 0).AwaitLeader(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	tc.stop(leader)
	if err := tc.leaderFor(ctx, "g", func(n *cluster.Node) error {
		if pendingOn(n) != 1 {
			return fmt.Errorf("node %d lost the pending offset", n.ID())
		}
		return n.Coordinator().EndTxn(ctx, "g", 5, 0, true)
	}); err != nil {
		t.Fatal(err)
	}
	tc.start(leader)
	awaitAll("the commit", func(n *cluster.Node) bool {
		o, ok, err := n.Coordinator().Fetch("g", "t", 0)
		return err == nil && ok && o.Offset == 7 && pendingOn(n) == 0
	})
}

// TestTxnCatchUpFromSnapshot: a node down while the others took a pending
// offset and compacted their logs past it receives the leader's snapshot,
// which holds the offset pending; the marker then commits it there too.
func TestTxnCatchUpFromSnapshot(t *testing.T) {
	tc := newTestCluster(t, 9, 3, 1, smallJournal)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.commitMany(ctx, 0, 10)
	lagging := tc.peers[2]
	tc.stop(lagging)
	at := []coordinator.OffsetCommit{{Topic: "t", Partition: 0, Offset: 3}}
	if err := tc.leaderFor(ctx, "txg", func(n *cluster.Node) error {
		return n.Coordinator().TxnCommit(ctx, "txg", 5, 1, coordinator.NoGeneration, at)
	}); err != nil {
		t.Fatal(err)
	}
	tc.compactLogs(ctx)
	n := tc.start(lagging)
	tc.awaitMany(ctx, n, 400)
	tc.requireSnapshot(lagging, 0)
	for {
		p, err := n.Coordinator().PendingOffsets("txg")
		if err == nil && len(p) == 1 && p[0].Offset.Offset == 3 && p[0].ProducerEpoch == 1 {
			break
		}
		select {
		case <-n.Progressed():
		case <-ctx.Done():
			t.Fatalf("the caught-up node holds %+v, %v pending", p, err)
		}
	}
	if l, err := coordinator.ReadLayout(filepath.Join(tc.dir, fmt.Sprint(lagging))); err != nil || l.Format != 3 {
		t.Errorf("caught-up node: format %d %v, want 3", l.Format, err)
	}
	if err := tc.leaderFor(ctx, "txg", func(n *cluster.Node) error {
		return n.Coordinator().EndTxn(ctx, "txg", 5, 1, true)
	}); err != nil {
		t.Fatal(err)
	}
	if err := awaitApplied(ctx, n, "txg", 3); err != nil {
		t.Fatal(err)
	}
}
