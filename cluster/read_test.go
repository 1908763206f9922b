package cluster_test

import (
	"context"
	"errors"
	"testing"

	"github.com/offsetd/offsetd/coordinator"
)

// TestDeposedLeaderServesNoStaleRead cuts the leader off and stops its
// clock, so that it still believes it leads, while the others elect a new
// leader and commit a newer offset. A read on the old leader must not
// succeed: ReadIndex needs a quorum to confirm its lead, which it cannot
// get. Serving reads from its own tables would return the older offset.
func TestDeposedLeaderServesNoStaleRead(t *testing.T) {
	tc := newTestCluster(t, 3, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := tc.commit(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	old, err := tc.anyNode(0, 0).AwaitLeader(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	stale := tc.node(old)
	tc.freeze(old, true)
	tc.nw.Isolate(old)

	// Commit 2 on the new leader (the lead may still move to a preferred
	// node among the others: retry until one takes it).
	other := tc.anyNode(0, old)
	for {
		leader, err := other.AwaitLeader(ctx, 0, old)
		if err != nil {
			t.Fatal(err)
		}
		err = tc.node(leader).Coordinator().Commit(ctx, "g", []coordinator.OffsetCommit{{Topic: "t", Offset: 2}})
		if err == nil {
			break
		}
		if !errors.Is(err, coordinator.ErrNotCommitted) && !errors.Is(err, coordinator.ErrNotLeader) {
			t.Fatalf("commit on the new leader %d: %v", leader, err)
		}
	}

	if l, self := stale.Coordinator().Leader("g"); !self {
		t.Fatalf("the cut-off node %d no longer believes it leads (leader %d): the test shows nothing", old, l)
	}
	read, cancelRead := context.WithTimeout(ctx, 100*testTick)
	err = stale.Coordinator().Barrier(read, "g")
	cancelRead()
	if err == nil {
		o, _, _ := stale.Coordinator().Fetch("g", "t", 0)
		t.Fatalf("the deposed leader served a read: offset %d, while 2 is committed", o.Offset)
	}

	tc.freeze(old, false)
	tc.nw.Heal()
	if got, err := tc.fetch(ctx, "g"); err != nil || got != 2 {
		t.Fatalf("fetch after healing: %d, %v; want 2", got, err)
	}
}

// TestReadOfLostLeadIsRefused asks a read index of a node that has lost
// its lead and hears nothing more (cut off, its clock stopped: what a
// leader that a change removes is too, for good). The coordinator asks
// only once Lead says this node leads, which lags the group by one Ready:
// the read must be refused at once, not dropped by raft and left
// unanswered until its deadline.
func TestReadOfLostLeadIsRefused(t *testing.T) {
	tc := newTestCluster(t, 5, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := tc.commit(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	old, err := tc.anyNode(0, 0).AwaitLeader(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := tc.node(old)
	tc.nw.Isolate(old)
	// It steps down once it misses its quorum for an election timeout.
	for {
		if _, self := n.Coordinator().Leader("g"); !self {
			break
		}
		select {
		case <-n.LeadersChanged():
		case <-ctx.Done():
			t.Fatalf("the cut-off leader %d never stepped down", old)
		}
	}
	tc.freeze(old, true)
	read, cancelRead := context.WithTimeout(ctx, 100*testTick)
	_, err = n.ReadIndex(read, 0)
	cancelRead()
	if !errors.Is(err, coordinator.ErrNotLeader) {
		t.Fatalf("a read index asked of node %d, which lost its lead: %v, want ErrNotLeader", old, err)
	}
	tc.freeze(old, false)
	tc.nw.Heal()
}
