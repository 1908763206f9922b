package cluster_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/offsetd/offsetd/cluster/clustertest"
	"github.com/offsetd/offsetd/internal/offsetcheck"
	"github.com/offsetd/offsetd/partitioner"
)

var seedFlag = flag.Uint64("cluster.seed", 0, "run the failover tests with this fault seed only")

// TestFailover runs writers and readers against a 3-node cluster over a
// network that loses, duplicates and reorders messages, while the leader
// of the groups' partition is stopped and restarted, or cut off and let
// back, again and again. After every failover each group must show at
// least its last acknowledged commit, and the whole history of commits
// and fetches must be linearizable.
func TestFailover(t *testing.T) {
	seeds := []uint64{1, 2}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { testFailover(t, seed) })
	}
}

func testFailover(t *testing.T, seed uint64) {
	const parts = 2
	// Small segments and snapshots: logs are compacted, the journal's
	// front dropped, and restarted nodes caught up from snapshots, while
	// the leader fails over.
	tc := newTestCluster(t, seed, 3, parts, smallJournal)
	tc.nw.SetFaults(clustertest.Faults{Drop: 0.05, Duplicate: 0.05, MaxDelay: 2 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	groups := []string{"a", "b", "c"}
	h := offsetcheck.New()
	stop := h.Load(groups, 2,
		func(_ int, g string, v int64) error { return tc.commit(ctx, g, v) },
		func(_ int, g string) (int64, error) { return tc.fetch(ctx, g) })

	part, _ := partitioner.New(parts)
	watched := part.Group(groups[0])
	for round := range 4 {
		if err := h.AwaitAcks(ctx, 30); err != nil {
			t.Fatal(err)
		}
		leader, err := tc.anyNode(0, 0).AwaitLeader(ctx, watched, 0)
		if err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 {
			tc.stop(leader)
		} else {
			tc.nw.Isolate(leader)
		}
		// Served again: acknowledged operations after the old leader went.
		if err := h.AwaitAcks(ctx, 30); err != nil {
			t.Fatalf("round %d: after losing leader %d: %v", round, leader, err)
		}
		checkAcked(ctx, t, tc, h, groups)
		if round%2 == 0 {
			tc.start(leader)
		} else {
			tc.nw.Heal()
		}
	}
	if err := h.AwaitAcks(ctx, 30); err != nil {
		t.Fatal(err)
	}
	stop()
	checkAcked(ctx, t, tc, h, groups)

	if err := h.Check(t.TempDir(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	snapshots := 0
	for _, id := range tc.peers {
		for _, ps := range tc.node(id).Coordinator().Stats() {
			if ps.SnapshotIndex > 0 {
				snapshots++
			}
		}
	}
	if snapshots == 0 {
		t.Fatal("no partition took a snapshot: the test does not exercise compaction")
	}
	st := tc.nw.Stats()
	t.Logf("%d operations (%d commits acknowledged); network: %+v", h.Len(), h.Acked(), st)
	if st.Dropped == 0 || st.Duplicated == 0 || st.Delayed == 0 {
		t.Fatalf("the network injected no faults of some kind: %+v", st)
	}
}

// checkAcked reads every group on its leader: it must show at least the
// last offset its writer had acknowledged before the read.
func checkAcked(ctx context.Context, t *testing.T, tc *testCluster, h *offsetcheck.History, groups []string) {
	t.Helper()
	for _, g := range groups {
		want, _, _ := h.LastAck(g)
		got, err := tc.fetch(ctx, g)
		if err != nil {
			t.Fatalf("fetch %s: %v", g, err)
		}
		if got < want {
			t.Fatalf("group %s: offset %d, but %d was acknowledged", g, got, want)
		}
	}
}
