package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/cluster/clustertest"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/internal/offsetcheck"
	"github.com/offsetd/offsetd/partitioner"
)

// groupsOf returns n group names that hash to partition.
func groupsOf(t *testing.T, parts, partition, n int) []string {
	t.Helper()
	part, err := partitioner.New(parts)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := 0; len(out) < n; i++ {
		if g := fmt.Sprint("m", i); part.Group(g) == partition {
			out = append(out, g)
		}
	}
	return out
}

// describe says how each running node sees partition, for failures.
func (tc *testCluster) describe(partition int) string {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var b strings.Builder
	for _, id := range tc.peers {
		if n := tc.nodes[id]; n != nil {
			r, err := n.Replicas(partition)
			st := n.RaftStatus(partition)
			fmt.Fprintf(&b, "node %d: %+v %v %s\n", id, r, err, st)
		}
	}
	return b.String()
}

// awaitReplicas waits until node n has applied partition's configuration
// with exactly voters, and no learner nor joint change left.
func awaitReplicas(ctx context.Context, n *cluster.Node, partition int, voters ...uint64) error {
	for {
		wake := n.Progressed()
		r, err := n.Replicas(partition)
		if err != nil {
			return err
		}
		if slices.Equal(r.Voters, voters) && len(r.Learners) == 0 && len(r.Outgoing) == 0 {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("node %d: partition %d has %+v, want voters %v: %w", n.ID(), partition, r, voters, ctx.Err())
		}
	}
}

// TestMoveReplicaUnderLoad moves a partition's replica from its leader to
// a node that joins the cluster with an empty data directory, while
// writers commit and readers read without pause over a faulty network.
// The new node catches up from a snapshot; afterwards the old node holds
// no vote, every acknowledged commit is on the new replica set (read with
// the old node stopped, then with one of the new members stopped too),
// and the history is linearizable.
func TestMoveReplicaUnderLoad(t *testing.T) {
	const parts, moved = 2, 1
	tc := newTestCluster(t, 11, 3, parts, smallJournal)
	tc.nw.SetFaults(clustertest.Faults{Drop: 0.02, Duplicate: 0.02, MaxDelay: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	groups := groupsOf(t, parts, moved, 3)
	h := offsetcheck.New()
	stop := sync.OnceFunc(h.Load(groups, 2,
		func(_ int, g string, v int64) error { return tc.commit(ctx, g, v) },
		func(_ int, g string) (int64, error) { return tc.fetch(ctx, g) }))
	defer stop()
	if err := h.AwaitAcks(ctx, 50); err != nil {
		t.Fatal(err)
	}
	// Two snapshots: the groups' logs are compacted, so the new node can
	// only catch up from a snapshot.
	tc.snapshot(ctx)
	if err := h.AwaitAcks(ctx, 20); err != nil {
		t.Fatal(err)
	}
	tc.snapshot(ctx)

	from, err := tc.anyNode(0, 0).AwaitLeader(ctx, moved, 0)
	if err != nil {
		t.Fatal(err)
	}
	const to = 4
	newNode := tc.join(to)
	began, ackedBefore := time.Now(), h.Acked()
	if err := tc.changeReplicas(ctx, moved, cluster.ReplicaChange{Add: to, Remove: from}); err != nil {
		t.Fatalf("move partition %d from node %d to %d: %v", moved, from, to, err)
	}
	t.Logf("moved partition %d from its leader, node %d, to node %d in %v; %d commits acknowledged meanwhile",
		moved, from, to, time.Since(began).Round(time.Millisecond), h.Acked()-ackedBefore)
	var want []uint64
	for _, id := range []uint64{1, 2, 3, to} {
		if id != from {
			want = append(want, id)
		}
	}
	for _, id := range want {
		if err := awaitReplicas(ctx, tc.node(id), moved, want...); err != nil {
			t.Fatal(err)
		}
	}
	tc.requireSnapshot(to, moved)
	if err := h.AwaitAcks(ctx, 30); err != nil {
		t.Fatalf("after the move: %v", err)
	}

	// The old node goes: the partition is served by the new set alone.
	tc.stop(from)
	if err := h.AwaitAcks(ctx, 30); err != nil {
		t.Fatalf("after stopping node %d: %v", from, err)
	}
	checkAcked(ctx, t, tc, h, groups)
	for _, g := range groups {
		last, _, _ := h.LastAck(g)
		if err := awaitAtLeast(ctx, newNode, g, last); err != nil {
			t.Fatal(err)
		}
	}
	// It survives losing one of its new members too.
	tc.stop(to)
	if err := h.AwaitAcks(ctx, 30); err != nil {
		t.Fatalf("after stopping node %d too: %v", to, err)
	}
	stop()
	checkAcked(ctx, t, tc, h, groups)
	if err := h.Check(t.TempDir(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations (%d commits acknowledged); network: %+v", h.Len(), h.Acked(), tc.nw.Stats())
}

// TestAddRemoveNode adds a node to every partition, removes another from
// every partition, and restarts the cluster: each restart keeps the
// configuration, whether it lives in the log's entries only, after a
// snapshot taken past the change, or in a compacted log's snapshot.
func TestAddRemoveNode(t *testing.T) {
	const parts = 2
	tc := newTestCluster(t, 12, 3, parts, smallJournal)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.commitMany(ctx, 0, 40)

	tc.join(4)
	for p := range parts {
		if err := tc.changeReplicas(ctx, p, cluster.ReplicaChange{Add: 4}); err != nil {
			t.Fatalf("add node 4 to partition %d: %v", p, err)
		}
	}
	for p := range parts {
		if err := awaitReplicas(ctx, tc.node(4), p, 1, 2, 3, 4); err != nil {
			t.Fatal(err)
		}
	}
	tc.commitMany(ctx, 40, 60)
	for p := range parts {
		if err := tc.changeReplicas(ctx, p, cluster.ReplicaChange{Remove: 1}); err != nil {
			t.Fatalf("remove node 1 from partition %d: %v", p, err)
		}
	}
	tc.stop(1)
	tc.commitMany(ctx, 60, 80)
	tc.checkMany(ctx, 80)

	restart := func(step string, committed int) {
		t.Helper()
		for _, id := range []uint64{2, 3, 4} {
			tc.stop(id)
		}
		for _, id := range []uint64{2, 3, 4} {
			tc.start(id)
		}
		for _, id := range []uint64{2, 3, 4} {
			for p := range parts {
				if err := awaitReplicas(ctx, tc.node(id), p, 2, 3, 4); err != nil {
					t.Fatalf("%s: %v", step, err)
				}
			}
		}
		tc.checkMany(ctx, committed)
	}
	restart("restart, the change in the log", 80)
	// One snapshot past the change: the partitions restart from it, and
	// raft does not hand the change back.
	tc.snapshot(ctx)
	restart("restart after a snapshot past the change", 80)
	tc.commitMany(ctx, 80, 300)
	tc.snapshot(ctx)
	tc.commitMany(ctx, 300, 500)
	tc.snapshot(ctx)
	restart("restart after the log was compacted past the change", 500)
	tc.commitMany(ctx, 500, 520)
	tc.checkMany(ctx, 520)
}

// TestChangeOneAtATime: a change waiting for its new node refuses a
// second on the same partition; once interrupted, another change is still
// refused while the first one's learner is there; asked again, on a new
// leader after the old one stopped, it resumes and completes. An addition
// whose node never comes is abandoned by removing that node.
func TestChangeOneAtATime(t *testing.T) {
	const parts = 1
	tc := newTestCluster(t, 13, 3, parts)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.commitMany(ctx, 0, 20)
	leader := tc.awaitPreferred(ctx)(0) // the lead no longer moves by itself
	ln := tc.node(leader)

	for _, bad := range []cluster.ReplicaChange{{}, {Add: 2, Remove: 2}, {Remove: 5, Add: 6}} {
		if err := ln.ChangeReplicas(ctx, 0, bad); !errors.Is(err, cluster.ErrInvalid) {
			t.Errorf("ChangeReplicas(%+v): %v, want cluster.ErrInvalid", bad, err)
		}
	}

	// Node 4 is not started: its change waits for it to catch up.
	first, stopFirst := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() { firstDone <- ln.ChangeReplicas(first, 0, cluster.ReplicaChange{Add: 4}) }()
	// Once node 4 is a learner, the first change waits for it.
	for {
		wake := ln.Progressed()
		r, err := ln.Replicas(0)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(r.Learners, 4) {
			break
		}
		select {
		case <-wake:
		case err := <-firstDone:
			t.Fatalf("the change returned before node 4 was a learner: %v", err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	if err := ln.ChangeReplicas(ctx, 0, cluster.ReplicaChange{Add: 5}); !errors.Is(err, cluster.ErrChangePending) {
		t.Fatalf("a second change while one runs: %v, want cluster.ErrChangePending", err)
	}
	stopFirst()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the interrupted change: %v", err)
	}
	if err := ln.ChangeReplicas(ctx, 0, cluster.ReplicaChange{Remove: 3}); !errors.Is(err, cluster.ErrChangePending) {
		t.Fatalf("another change while node 4 is a learner: %v, want cluster.ErrChangePending", err)
	}

	// The leader goes; node 4 starts; the change, asked again, completes.
	tc.stop(leader)
	tc.join(4)
	if err := tc.changeReplicas(ctx, 0, cluster.ReplicaChange{Add: 4}); err != nil {
		t.Fatalf("resuming the change: %v", err)
	}
	if err := awaitReplicas(ctx, tc.node(4), 0, 1, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	// With four voters and one stopped, three of four still make a quorum.
	tc.commitMany(ctx, 20, 40)
	tc.checkMany(ctx, 40)

	// An addition abandoned: node 5 never starts, and removing it ends the
	// change its learner holds up.
	short, stopShort := context.WithTimeout(ctx, 50*testTick)
	err := tc.changeReplicas(short, 0, cluster.ReplicaChange{Add: 5})
	stopShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("adding node 5, which never starts: %v", err)
	}
	if err := tc.changeReplicas(ctx, 0, cluster.ReplicaChange{Remove: 2}); !errors.Is(err, cluster.ErrChangePending) {
		t.Fatalf("a change while node 5 is a learner: %v, want cluster.ErrChangePending", err)
	}
	if err := tc.changeReplicas(ctx, 0, cluster.ReplicaChange{Remove: 5}); err != nil {
		t.Fatalf("removing node 5: %v", err)
	}
	if err := awaitReplicas(ctx, tc.node(4), 0, 1, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	tc.commitMany(ctx, 40, 60)
	tc.checkMany(ctx, 60)
}

// TestLeaderDiesMidChange cuts the leader off at the moment it applies the
// joint configuration of a move, before it can commit the entry that
// leaves it: the other nodes elect a leader in the joint configuration
// (a quorum of the old voters and one of the new), which leaves it by
// itself; the change, asked again there, completes. No acknowledged commit
// is lost, and the history stays linearizable.
func TestLeaderDiesMidChange(t *testing.T) {
	const parts, moved = 1, 0
	tc := newTestCluster(t, 14, 3, parts)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	groups := groupsOf(t, parts, moved, 2)
	h := offsetcheck.New()
	stop := sync.OnceFunc(h.Load(groups, 2,
		func(_ int, g string, v int64) error { return tc.commit(ctx, g, v) },
		func(_ int, g string) (int64, error) { return tc.fetch(ctx, g) }))
	defer stop()
	if err := h.AwaitAcks(ctx, 20); err != nil {
		t.Fatal(err)
	}
	leader := tc.awaitPreferred(ctx)(moved) // the lead no longer moves by itself
	from := leader%3 + 1                    // a follower leaves
	const to = 4
	tc.join(to)
	ln := tc.node(leader)
	cut := make(chan struct{})
	cutOnce := sync.OnceFunc(func() {
		tc.nw.Isolate(leader)
		close(cut)
	})
	// The log line of a configuration change is written on the group's
	// goroutine as it applies it, before it can commit the next entry.
	stopWatch := tc.watchLog(leader, func(r slog.Record) {
		if out, ok := attr(r, "outgoing"); r.Message == "raft configuration changed" && ok && len(out.Any().([]uint64)) > 0 {
			cutOnce()
		}
	})

	first, stopFirst := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() { firstDone <- ln.ChangeReplicas(first, moved, cluster.ReplicaChange{Add: to, Remove: from}) }()
	select {
	case <-cut:
	case err := <-firstDone:
		t.Fatalf("the change on leader %d ended before its joint configuration: %v", leader, err)
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	stopFirst()
	<-firstDone
	stopWatch()

	// The others go on without the old leader, and finish the change.
	var others []uint64
	for _, id := range []uint64{1, 2, 3, to} {
		if id != leader {
			others = append(others, id)
		}
	}
	if err := h.AwaitAcks(ctx, 20); err != nil {
		t.Fatalf("after cutting leader %d off mid-change: %v; %s", leader, err, tc.describe(moved))
	}
	err := tc.leaderFor(ctx, "", func(n *cluster.Node) error {
		if n.ID() == leader {
			return &coordinator.NotLeaderError{Partition: moved} // cut off: ask another
		}
		return n.ChangeReplicas(ctx, moved, cluster.ReplicaChange{Add: to, Remove: from})
	})
	if err != nil {
		t.Fatalf("resuming the change after leader %d was cut off: %v", leader, err)
	}
	var want []uint64
	for _, id := range []uint64{1, 2, 3, to} {
		if id != from {
			want = append(want, id)
		}
	}
	for _, id := range others {
		if id == from {
			continue
		}
		if err := awaitReplicas(ctx, tc.node(id), moved, want...); err != nil {
			t.Fatal(err)
		}
	}
	tc.nw.Heal()
	if err := awaitReplicas(ctx, ln, moved, want...); err != nil {
		t.Fatal(err)
	}
	tc.stop(from)
	if err := h.AwaitAcks(ctx, 20); err != nil {
		t.Fatal(err)
	}
	stop()
	checkAcked(ctx, t, tc, h, groups)
	if err := h.Check(t.TempDir(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestJoinSticks: a joining node restarted before any leader added it,
// without Join, still waits to be added (it does not found a cluster of
// its own), and is then added as any other.
func TestJoinSticks(t *testing.T) {
	tc := newTestCluster(t, 15, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.commitMany(ctx, 0, 20)
	tc.join(4)
	tc.stop(4)
	tc.mu.Lock()
	tc.joined[4] = false
	tc.mu.Unlock()
	n := tc.start(4)
	commit, err := n.CommitIndex(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if commit != 0 {
		t.Fatalf("node 4, restarted without Join, bootstrapped a log committed to %d", commit)
	}
	if err := tc.changeReplicas(ctx, 0, cluster.ReplicaChange{Add: 4}); err != nil {
		t.Fatal(err)
	}
	if err := awaitReplicas(ctx, n, 0, 1, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	if err := awaitApplied(ctx, n, "g19", 19); err != nil {
		t.Fatal(err)
	}
}

// TestAddNodeFromSnapshot adds a node to a quiet partition whose log was
// compacted: it can only catch up from a snapshot, and raft sends a node
// only a snapshot whose configuration has it, which none taken before the
// node was added has. The change takes one, and the node catches up.
func TestAddNodeFromSnapshot(t *testing.T) {
	tc := newTestCluster(t, 16, 3, 1, smallJournal)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.compactLogs(ctx)
	sentBefore := uint64(0)
	for _, id := range tc.peers {
		sentBefore += tc.node(id).Stats().SnapshotsSent
	}
	sent := tc.collect("raft snapshot sent", tc.peers...)
	n := tc.join(4)
	received := tc.collect("raft snapshot received", 4)
	if err := tc.changeReplicas(ctx, 0, cluster.ReplicaChange{Add: 4}); err != nil {
		t.Fatal(err)
	}
	tc.requireSnapshot(4, 0)
	tc.awaitMany(ctx, n, 400)

	// What the node received, the leader sent, and both logged it.
	if err := received.await(ctx, 4, "a snapshot received", func(slog.Record) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if got := n.Stats().SnapshotsReceived; got != uint64(len(received.of(4))) || got == 0 {
		t.Errorf("node 4 counts %d snapshots received, and logged %d", got, len(received.of(4)))
	}
	if m := scrape(t, tc.serveHTTP(4)); m["offsetd_raft_snapshots_received_total"] != float64(len(received.of(4))) {
		t.Errorf("node 4: offsetd_raft_snapshots_received_total %v, with %d logged", m["offsetd_raft_snapshots_received_total"], len(received.of(4)))
	}
	var counted, logged, toNew uint64
	for _, id := range []uint64{1, 2, 3} {
		counted += tc.node(id).Stats().SnapshotsSent
		logged += uint64(len(sent.of(id)))
		for _, r := range sent.of(id) {
			if uintAttr(r, "to") == 4 {
				toNew++
			}
		}
	}
	if toNew == 0 || counted-sentBefore != logged {
		t.Errorf("the nodes count %d snapshots sent since node 4 joined, and logged %d (%d to node 4)", counted-sentBefore, logged, toNew)
	}
	var scraped float64
	for _, id := range []uint64{1, 2, 3} {
		scraped += scrape(t, tc.serveHTTP(id))["offsetd_raft_snapshots_sent_total"]
	}
	if scraped < float64(counted) { // a snapshot sent meanwhile may add to it
		t.Errorf("offsetd_raft_snapshots_sent_total sums to %v over the nodes, which counted %d before", scraped, counted)
	}
}
