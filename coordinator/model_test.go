package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// modelKey is a key of the plain-map model the store is checked against.
type modelKey struct {
	group, topic string
	partition    int32
}

type modelValue struct {
	offset   int64
	epoch    int32
	metadata string
}

// TestModel runs random commits, deletes and reopens against a plain map and
// checks that the store and the map agree after every reopen and at the end.
func TestModel(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			runModel(t, seed, 1500, -1)
		})
	}
}

// TestModelSnapshots is TestModel with a snapshot every couple of kilobytes
// of log (a few dozen records) and some asked for at random, so reopens land
// before, during and after snapshots and truncations.
func TestModelSnapshots(t *testing.T) {
	for seed := uint64(11); seed <= 14; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			runModel(t, seed, 1500, 2048)
		})
	}
}

func runModel(t *testing.T, seed uint64, steps int, snapshotBytes int64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 1 + rng.IntN(8)
	opts.SegmentSize = 4096 // many segments
	opts.SnapshotBytes = snapshotBytes
	opts.SnapshotInterval = -1
	c := mustOpen(t, dir, opts)
	defer func() { c.Close() }()
	ctx := context.Background()
	model := map[modelKey]modelValue{}

	groups := []string{"g0", "g1", "g2", "g3", "g4", "g5"}
	topics := []string{"t0", "t1", "t2"}
	for step := range steps {
		g := groups[rng.IntN(len(groups))]
		switch r := rng.IntN(100); {
		case r < 70:
			n := 1 + rng.IntN(5)
			var offs []OffsetCommit
			for range n {
				o := OffsetCommit{
					Topic:       topics[rng.IntN(len(topics))],
					Partition:   int32(rng.IntN(4)),
					Offset:      rng.Int64N(1000) - 1, // resets to lower offsets included
					LeaderEpoch: int32(rng.IntN(3)) - 1,
				}
				if rng.IntN(4) == 0 {
					o.Metadata = fmt.Sprintf("m%d", step)
				}
				offs = append(offs, o)
			}
			if err := c.Commit(ctx, g, offs); err != nil {
				t.Fatalf("step %d: commit: %v", step, err)
			}
			for _, o := range offs {
				model[modelKey{g, o.Topic, o.Partition}] = modelValue{o.Offset, o.LeaderEpoch, o.Metadata}
			}
		case r < 80:
			topic := topics[rng.IntN(len(topics))]
			var parts []int32
			if rng.IntN(2) == 0 {
				parts = []int32{int32(rng.IntN(4)), int32(rng.IntN(4))}
			}
			err := c.DeleteOffsets(ctx, g, topic, parts...)
			deleted := 0
			for k := range model {
				if k.group == g && k.topic == topic && (len(parts) == 0 || slices.Contains(parts, k.partition)) {
					delete(model, k)
					deleted++
				}
			}
			if deleted == 0 && !errors.Is(err, ErrNotFound) {
				t.Fatalf("step %d: delete of nothing = %v, want ErrNotFound", step, err)
			}
			if deleted > 0 && err != nil {
				t.Fatalf("step %d: delete offsets: %v", step, err)
			}
		case r < 85:
			err := c.DeleteGroup(ctx, g)
			deleted := 0
			for k := range model {
				if k.group == g {
					delete(model, k)
					deleted++
				}
			}
			if (deleted == 0) != errors.Is(err, ErrNotFound) || (deleted > 0 && err != nil) {
				t.Fatalf("step %d: delete group with %d keys = %v", step, deleted, err)
			}
		case r < 87 && snapshotBytes > 0:
			if err := c.Snapshot(ctx); err != nil {
				t.Fatalf("step %d: snapshot: %v", step, err)
			}
		case r < 90:
			if err := c.Close(); err != nil {
				t.Fatalf("step %d: close: %v", step, err)
			}
			c = mustOpen(t, dir, opts)
			checkModel(t, c, model, groups, topics)
		default:
			checkModel(t, c, model, groups, topics)
		}
	}
	c.Close()
	c = mustOpen(t, dir, opts)
	checkModel(t, c, model, groups, topics)
}

func checkModel(t *testing.T, c *Coordinator, model map[modelKey]modelValue, groups, topics []string) {
	t.Helper()
	var wantGroups []string
	for _, g := range groups {
		var want []PartitionOffset
		for k, v := range model {
			if k.group == g {
				want = append(want, PartitionOffset{Topic: k.topic, Partition: k.partition, Offset: Offset{Offset: v.offset, LeaderEpoch: v.epoch, Metadata: v.metadata}})
			}
		}
		if len(want) > 0 {
			wantGroups = append(wantGroups, g)
		}
		slices.SortFunc(want, func(a, b PartitionOffset) int {
			if a.Topic != b.Topic {
				return cmpString(a.Topic, b.Topic)
			}
			return int(a.Partition - b.Partition)
		})
		got, err := c.FetchGroup(g)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			got[i].CommitTime = time.Time{} // the model does not keep clocks
		}
		if !slices.Equal(got, want) {
			t.Fatalf("group %s:\n got %v\nwant %v", g, got, want)
		}
		for _, topic := range topics {
			for part := range int32(4) {
				v, ok, err := c.Fetch(g, topic, part)
				mv, mok := model[modelKey{g, topic, part}]
				if err != nil || ok != mok || v.Offset != mv.offset || v.LeaderEpoch != mv.epoch || v.Metadata != mv.metadata {
					t.Fatalf("Fetch(%s,%s,%d) = %v %v %v, model %v %v", g, topic, part, v, ok, err, mv, mok)
				}
			}
		}
	}
	if got := c.Groups(); !slices.Equal(got, wantGroups) {
		t.Fatalf("Groups() = %v, want %v", got, wantGroups)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
