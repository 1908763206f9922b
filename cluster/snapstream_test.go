package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/cluster/clustertest"
	"github.com/offsetd/offsetd/coordinator"
)

// bulkParts and bulkMetadata make the offsets commitBulk commits: a
// partition's snapshot holding them is over a megabyte, more than one read
// of a streamed snapshot takes.
const (
	bulkParts    = 400
	bulkMetadata = 4000
)

// bulkCommits returns the commits of commitBulk, batch by batch: group
// "bulk", topic "b", partitions 0..bulkParts-1, each with bulkMetadata
// bytes of metadata that do not compress.
func bulkCommits() [][]coordinator.OffsetCommit {
	r := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var batches [][]coordinator.OffsetCommit
	for from := 0; from < bulkParts; from += 100 {
		var batch []coordinator.OffsetCommit
		for p := from; p < from+100; p++ {
			meta := make([]byte, bulkMetadata)
			for i := range meta {
				meta[i] = letters[r.IntN(len(letters))]
			}
			batch = append(batch, coordinator.OffsetCommit{Topic: "b", Partition: int32(p), Offset: int64(p), Metadata: string(meta)})
		}
		batches = append(batches, batch)
	}
	return batches
}

// commitBulk commits bulkCommits on the leader.
func (tc *testCluster) commitBulk(ctx context.Context) {
	tc.t.Helper()
	for _, batch := range bulkCommits() {
		err := tc.leaderFor(ctx, "bulk", func(n *cluster.Node) error { return n.Coordinator().Commit(ctx, "bulk", batch) })
		if err != nil {
			tc.t.Fatalf("bulk commit: %v", err)
		}
	}
}

// checkBulk fails the test unless node n's tables hold every offset of
// commitBulk, metadata included.
func checkBulk(t *testing.T, n *cluster.Node) {
	t.Helper()
	for _, batch := range bulkCommits() {
		for _, want := range batch {
			got, ok, err := n.Coordinator().Fetch("bulk", want.Topic, want.Partition)
			if err != nil || !ok || got.Offset != want.Offset || got.Metadata != want.Metadata {
				t.Fatalf("node %d: bulk partition %d: %d (metadata of %d bytes), %v, %v; want %d", n.ID(), want.Partition, got.Offset, len(got.Metadata), ok, err, want.Offset)
			}
		}
	}
}

// dirNames returns the names in dir, none if it does not exist.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// awaitNetwork waits, a tick of node n at a time, until the network's
// stats satisfy done.
func awaitNetwork(ctx context.Context, t *testing.T, tc *testCluster, n *cluster.Node, what string, done func(clustertest.NetworkStats) bool) {
	t.Helper()
	for !done(tc.nw.Stats()) {
		select {
		case <-n.Progressed():
		case <-ctx.Done():
			t.Fatalf("%s: never happened (%+v)", what, tc.nw.Stats())
		}
	}
}

// TestSnapshotStreamed: a lagging node catches up from a snapshot of more
// than a megabyte whose MsgSnap is a few bytes, the file streamed beside
// it in reads of part of it; transfers cut in the middle leave no file on
// it, and the leader sends the snapshot again until one arrives whole.
func TestSnapshotStreamed(t *testing.T) {
	tc := newTestCluster(t, 11, 3, 1, smallJournal)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.commitMany(ctx, 0, 10)
	lagging := tc.peers[2]
	tc.stop(lagging)
	tc.commitBulk(ctx)
	tc.compactLogs(ctx)

	dir := coordinator.SnapshotDir(filepath.Join(tc.dir, fmt.Sprint(lagging)), 0)
	before := dirNames(t, dir)
	tc.nw.SetFaults(clustertest.Faults{CutSnapshot: 1})
	n := tc.start(lagging)
	awaitNetwork(ctx, t, tc, n, "two snapshot transfers cut", func(st clustertest.NetworkStats) bool { return st.SnapshotsCut >= 2 })
	tc.nw.Isolate(lagging)
	awaitNetwork(ctx, t, tc, n, "no snapshot transfer under way", func(st clustertest.NetworkStats) bool { return st.SnapshotsStreaming == 0 })
	if after := dirNames(t, dir); !slices.Equal(after, before) {
		t.Fatalf("cut snapshot transfers left %v in node %d's snapshot directory, which held %v", after, lagging, before)
	}

	tc.nw.SetFaults(clustertest.Faults{})
	tc.nw.Heal()
	tc.awaitMany(ctx, n, 400)
	tc.requireSnapshot(lagging, 0)
	checkBulk(t, n)
	st := tc.nw.Stats()
	t.Logf("network: %+v", st)
	if st.Snapshots == 0 || st.LargestSnapshot < bulkParts*bulkMetadata {
		t.Fatalf("snapshots streamed whole: %d, the largest of %d bytes; want one of %d bytes at least", st.Snapshots, st.LargestSnapshot, bulkParts*bulkMetadata)
	}
	if st.LargestSnapshotMessage > 256 {
		t.Fatalf("a MsgSnap of %d bytes: its snapshot's Data holds more than a reference", st.LargestSnapshotMessage)
	}
	if int64(st.LargestSnapshotRead) >= st.LargestSnapshot {
		t.Fatalf("a read of %d bytes of a %d-byte snapshot: the file was read whole", st.LargestSnapshotRead, st.LargestSnapshot)
	}
}

// TestInlineSnapshotOfAnOlderRelease: a MsgSnap as a leader of an older
// release sends it, the whole file inside it, still catches a lagging node
// up.
func TestInlineSnapshotOfAnOlderRelease(t *testing.T) {
	tc := newTestCluster(t, 12, 3, 1, smallJournal)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.commitMany(ctx, 0, 10)
	lagging := tc.peers[2]
	tc.stop(lagging)
	tc.compactLogs(ctx)

	tc.nw.Isolate(lagging) // nothing streamed reaches it
	n := tc.start(lagging)
	leader, err := tc.anyNode(0, lagging).AwaitLeader(ctx, 0, lagging)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tc.node(leader).InlineSnapshot(ctx, 0, lagging)
	if err != nil {
		t.Fatal(err)
	}
	if size := len(m.Raft.GetSnapshot().GetData()); size < 256 {
		t.Fatalf("an inline snapshot of %d bytes: not the file", size)
	}
	b, err := cluster.AppendMessages(nil, []cluster.Message{m})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := cluster.DecodeMessages(b)
	if err != nil {
		t.Fatal(err)
	}
	n.Receive(msgs)
	tc.awaitMany(ctx, n, 400)
	tc.requireSnapshot(lagging, 0)
	if st := tc.nw.Stats(); st.Snapshots != 0 {
		t.Fatalf("%d snapshots streamed to an isolated node", st.Snapshots)
	}

	tc.nw.Heal()
	tc.commitMany(ctx, 400, 420)
	tc.awaitMany(ctx, n, 420)
}
