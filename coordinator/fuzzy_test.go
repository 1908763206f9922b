package coordinator

import (
	"context"
	"io"
	"testing"

	"github.com/offsetd/offsetd/log"
)

// TestFuzzySnapshotIsExact writes, by hand, the snapshot a background
// snapshot at index 1 would write if it read group G only after later
// records: G as of the last index, marked as captured there. Reopening over
// it must give exactly the live state, group generation and version
// included, whatever those later records did to G.
func TestFuzzySnapshotIsExact(t *testing.T) {
	ctx := context.Background()
	commit := func(t *testing.T, c *Coordinator, gen int32, parts ...int32) {
		t.Helper()
		var offs []OffsetCommit
		for _, p := range parts {
			offs = append(offs, OffsetCommit{Topic: "t", Partition: p, Offset: int64(10 + p)})
		}
		if _, err := c.CommitGeneration(ctx, "G", gen, offs); err != nil {
			t.Fatal(err)
		}
	}
	del := func(t *testing.T, c *Coordinator, parts ...int32) {
		t.Helper()
		if err := c.DeleteOffsets(ctx, "G", "t", parts...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		first func(*testing.T, *Coordinator) // record 1: the snapshot's index
		later func(*testing.T, *Coordinator)
	}{
		{"group emptied and re-created: generation",
			func(t *testing.T, c *Coordinator) { commit(t, c, 1, 1) },
			func(t *testing.T, c *Coordinator) { commit(t, c, 9, 2); del(t, c, 1, 2); commit(t, c, 2, 3) }},
		{"group emptied in replay only: generation kept",
			func(t *testing.T, c *Coordinator) { commit(t, c, 5, 1, 2) },
			func(t *testing.T, c *Coordinator) { del(t, c, 1); commit(t, c, -1, 1); del(t, c, 2) }},
		{"delete of a key the snapshot lacks: version",
			func(t *testing.T, c *Coordinator) { commit(t, c, -1, 1, 2) },
			func(t *testing.T, c *Coordinator) { commit(t, c, -1, 1); del(t, c, 2) }},
		{"whole group deleted and re-created",
			func(t *testing.T, c *Coordinator) { commit(t, c, 3, 1) },
			func(t *testing.T, c *Coordinator) {
				commit(t, c, 4, 2)
				if err := c.DeleteGroup(ctx, "G"); err != nil {
					t.Fatal(err)
				}
				commit(t, c, 1, 5)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := oneShardOptions()
			c := mustOpen(t, dir, opts)
			tc.first(t, c)
			tc.later(t, c)
			want := dumpState(t, c)

			p := c.parts[0]
			entries, info, at, ok := p.offsets.GroupAt("G", nil)
			if !ok || at <= 1 {
				t.Fatalf("GroupAt = %v at %d", ok, at)
			}
			_, err := c.d.snapshots[0].Write(1, func(w io.Writer) error {
				enc := log.NewSnapshotEncoder(w)
				if err := enc.Add(recSnapGroup, encodeSnapGroup(nil, "G", info, at, entries)); err != nil {
					return err
				}
				return enc.Finish()
			})
			if err != nil {
				t.Fatal(err)
			}
			c.Close()

			c = mustOpen(t, dir, opts)
			defer c.Close()
			if c.parts[0].lastSnapshot != 1 {
				t.Fatalf("loaded snapshot %d, want the hand-made one at 1", c.parts[0].lastSnapshot)
			}
			if got := dumpState(t, c); got != want {
				t.Fatalf("after reopen over the snapshot:\n got %s\nwant %s", got, want)
			}
		})
	}
}
