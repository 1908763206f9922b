package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/log"
	"github.com/offsetd/offsetd/partitioner"
)

// smallJournal makes snapshots and segments small, so that a test's few
// hundred commits compact logs and drop journal segments.
func smallJournal(o *coordinator.Options) {
	o.SegmentSize = 4096
	o.SnapshotBytes = 4096 * int64(o.Partitions)
	o.SnapshotInterval = -1
}

// commitMany commits offsets from..to-1 to groups g<from>.. in turn.
func (tc *testCluster) commitMany(ctx context.Context, from, to int) {
	tc.t.Helper()
	for i := from; i < to; i++ {
		if err := tc.commit(ctx, fmt.Sprint("g", i%20), int64(i)); err != nil {
			tc.t.Fatalf("commit %d: %v", i, err)
		}
	}
}

// snapshot takes a snapshot of every partition on every running node.
func (tc *testCluster) snapshot(ctx context.Context) {
	tc.t.Helper()
	for _, id := range tc.peers {
		if n := tc.node(id); n != nil {
			if err := n.Coordinator().Snapshot(ctx); err != nil {
				tc.t.Fatalf("snapshot on node %d: %v", id, err)
			}
		}
	}
}

// journalStart returns the index in the name of node id's oldest journal
// segment: above 1 once the journal's front was dropped.
func (tc *testCluster) journalStart(id uint64) string {
	tc.t.Helper()
	ents, err := os.ReadDir(coordinator.JournalDir(filepath.Join(tc.dir, fmt.Sprint(id))))
	if err != nil {
		tc.t.Fatal(err)
	}
	for _, e := range ents {
		if len(e.Name()) == 20 {
			return e.Name()
		}
	}
	tc.t.Fatalf("node %d has no journal segment", id)
	return ""
}

// checkMany reads every group of commitMany(.., to) on the leader; to is
// a multiple of 20.
func (tc *testCluster) checkMany(ctx context.Context, to int) {
	tc.t.Helper()
	for g := range 20 {
		want := int64(to - 20 + g)
		got, err := tc.fetch(ctx, fmt.Sprint("g", g))
		if err != nil || got != want {
			tc.t.Fatalf("group g%d: %d, %v; want %d", g, got, err, want)
		}
	}
}

// compactLogs commits 400 offsets to 20 groups with two snapshots on the
// way, after which (with smallJournal) the groups' logs are compacted.
func (tc *testCluster) compactLogs(ctx context.Context) {
	tc.t.Helper()
	tc.commitMany(ctx, 0, 200)
	tc.snapshot(ctx)
	tc.commitMany(ctx, 200, 400)
	tc.snapshot(ctx)
}

// awaitMany waits until node n shows every group of commitMany(.., to);
// to is a multiple of 20.
func (tc *testCluster) awaitMany(ctx context.Context, n *cluster.Node, to int) {
	tc.t.Helper()
	for g := range 20 {
		if err := awaitApplied(ctx, n, fmt.Sprint("g", g), int64(to-20+g)); err != nil {
			tc.t.Fatal(err)
		}
	}
}

// requireSnapshot fails the test unless node id holds a snapshot of
// partition: a node that caught up when the others had compacted their
// logs must have received one.
func (tc *testCluster) requireSnapshot(id uint64, partition int) {
	tc.t.Helper()
	snaps, err := log.ListSnapshots(coordinator.SnapshotDir(filepath.Join(tc.dir, fmt.Sprint(id)), partition))
	if err != nil || len(snaps) == 0 {
		tc.t.Fatalf("node %d caught up without a snapshot of partition %d (%v, %v): the log was not compacted", id, partition, snaps, err)
	}
}

// TestCompaction: once a partition has two snapshots, its group's log is
// compacted to the older one, the journal drops the segments no group
// needs, the node removes the snapshot files older than that one (after
// three snapshots, no node holds more than two), and every node restarts
// from its snapshot and what is left.
func TestCompaction(t *testing.T) {
	tc := newTestCluster(t, 7, 3, 1, smallJournal)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.compactLogs(ctx)
	tc.commitMany(ctx, 400, 600)
	tc.snapshot(ctx)
	for _, id := range tc.peers {
		if start := tc.journalStart(id); start == "00000000000000000001" {
			t.Fatalf("node %d still has its whole journal after three snapshots", id)
		}
		snaps, err := log.ListSnapshots(coordinator.SnapshotDir(filepath.Join(tc.dir, fmt.Sprint(id)), 0))
		if err != nil || len(snaps) == 0 || len(snaps) > 2 {
			t.Fatalf("node %d holds snapshots %v (%v) after three; want the newest and the one before", id, snaps, err)
		}
	}
	for _, id := range tc.peers {
		tc.stop(id)
	}
	for _, id := range tc.peers {
		tc.start(id)
	}
	tc.checkMany(ctx, 600)
}

// TestCatchUpFromSnapshot: a node that was down while the others
// compacted their logs past everything it has is sent the leader's
// snapshot, and serves the same offsets once it leads.
func TestCatchUpFromSnapshot(t *testing.T) {
	tc := newTestCluster(t, 8, 3, 1, smallJournal)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.commitMany(ctx, 0, 10)
	lagging := tc.peers[2]
	tc.stop(lagging)
	tc.commitMany(ctx, 10, 200)
	tc.snapshot(ctx)
	tc.commitMany(ctx, 200, 400)
	tc.snapshot(ctx)

	n := tc.start(lagging)
	tc.awaitMany(ctx, n, 400)
	tc.requireSnapshot(lagging, 0)
	// Only the caught-up node and one other: it must hold everything.
	for _, id := range tc.peers {
		if id != lagging {
			tc.stop(id)
			break
		}
	}
	tc.checkMany(ctx, 400)
	tc.commitMany(ctx, 400, 420)
	tc.checkMany(ctx, 420)
}

// TestQuietPartitionDoesNotPinJournal: one busy group commits while every
// other partition holds a single early commit. The node's journal must not
// keep everything since that early commit: once it is over the budget,
// the node asks the quiet partitions to snapshot, their groups write their
// records anew at the journal's end, and the node drops the front.
func TestQuietPartitionDoesNotPinJournal(t *testing.T) {
	const parts = 8
	tc := newTestCluster(t, 9, 1, parts, func(o *coordinator.Options) {
		o.SegmentSize = 8 << 10
		o.SnapshotBytes = 64 << 10
		o.SnapshotInterval = -1 // every snapshot the traffic makes due
		o.UnsafeNoSync = true   // the files are the same; only the test is faster
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	n := tc.node(1)
	for p := range parts {
		if _, err := n.AwaitLeader(ctx, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	part, _ := partitioner.New(parts)
	busy := "busy"
	for p := range parts {
		if part.Group(busy) == p {
			continue
		}
		for i := 0; ; i++ {
			if g := fmt.Sprintf("quiet-%d", i); part.Group(g) == p {
				if err := tc.commit(ctx, g, 1); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
	}
	md := strings.Repeat("m", 200)
	for i := range 4000 {
		err := n.Coordinator().Commit(ctx, busy, []coordinator.OffsetCommit{{Topic: "t", Partition: int32(i % 8), Offset: int64(i), Metadata: md}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// About 1 MiB went through the journal (all of it stays when the quiet
	// partitions are not asked); the live state is a few KiB, so the
	// journal's budget is four times the snapshot floors: 256 KiB.
	dir := coordinator.JournalDir(filepath.Join(tc.dir, "1"))
	start, err := strconv.ParseUint(tc.journalStart(1), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	size := dirSize(t, dir)
	t.Logf("journal from index %d, %d bytes", start, size)
	if start < 1000 || size > 512<<10 {
		t.Fatalf("the journal starts at index %d and holds %d bytes: quiet partitions pin it", start, size)
	}
}

// dirSize returns the bytes of the files in dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		size += info.Size()
	}
	return size
}
