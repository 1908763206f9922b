package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/offsetd/offsetd/cluster"
)

// awaitLeaders waits until node n knows, for every partition, the leader
// want gives it.
func awaitLeaders(ctx context.Context, n *cluster.Node, parts int, want func(p int) uint64) error {
	for {
		changed := n.LeadersChanged()
		var wrong []string
		for p := range parts {
			if l := n.Leader(p); l != want(p) {
				wrong = append(wrong, fmt.Sprintf("partition %d led by %d, want %d", p, l, want(p)))
			}
		}
		if len(wrong) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("node %d: %v: %w", n.ID(), wrong, ctx.Err())
		}
	}
}

// awaitPreferred waits until every node knows each partition led by its
// preferred node, and returns which that is.
func (tc *testCluster) awaitPreferred(ctx context.Context) func(p int) uint64 {
	tc.t.Helper()
	preferred := func(p int) uint64 { return tc.peers[p%len(tc.peers)] }
	for _, id := range tc.peers {
		if err := awaitLeaders(ctx, tc.node(id), tc.parts, preferred); err != nil {
			tc.t.Fatal(err)
		}
	}
	return preferred
}

// TestLeadersSpread: whichever node wins each election, the lead of each
// partition moves to its preferred node, so that every node leads its
// share.
func TestLeadersSpread(t *testing.T) {
	const parts = 6
	tc := newTestCluster(t, 5, 3, parts)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.awaitPreferred(ctx)
	// And they serve from there.
	for i := range 12 {
		if err := tc.commit(ctx, fmt.Sprint("g", i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloseHandsOffLeadership: a node that closes hands the lead of its
// partitions to another node first, so that the others know the new
// leader as soon as Close returns, without an election timeout.
func TestCloseHandsOffLeadership(t *testing.T) {
	const parts = 3
	tc := newTestCluster(t, 6, 3, parts)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	preferred := tc.awaitPreferred(ctx)
	// Frozen clocks: the others can never time out and elect a leader by
	// themselves, only the hand-off can give them one.
	gone := preferred(0)
	for _, id := range tc.peers {
		if id != gone {
			tc.freeze(id, true)
		}
	}
	tc.stop(gone)
	wait, cancelWait := context.WithTimeout(ctx, 5*time.Second)
	defer cancelWait()
	for _, id := range tc.peers {
		if id == gone {
			continue
		}
		if _, err := tc.node(id).AwaitLeader(wait, 0, gone); err != nil {
			t.Fatalf("node %d learnt no new leader of partition 0 after node %d closed: %v", id, gone, err)
		}
		tc.freeze(id, false)
	}
	if err := tc.commit(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
}
