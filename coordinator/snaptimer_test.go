package coordinator

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkState checks every group committed by commitN(groups, rounds, base)
// holds its last offset.
func checkState(t *testing.T, c *Coordinator, groups int, want int64) {
	t.Helper()
	for g := range groups {
		o, ok, err := c.Fetch(fmt.Sprintf("g%03d", g), "t", int32(g%3))
		if err != nil || !ok || o.Offset != want {
			t.Fatalf("g%03d: %+v %v %v, want offset %d", g, o, ok, err, want)
		}
	}
}

// timedSnapshotOptions are test options whose partitions snapshot once
// they appended a few KiB (the floor), at most once per interval, without
// fsyncs (the files are the same; only the test is faster).
func timedSnapshotOptions(partitions int, interval time.Duration) Options {
	opts := testOptions()
	opts.Partitions = partitions
	opts.UnsafeNoSync = true
	opts.SnapshotBytes = 1
	opts.SnapshotInterval = interval
	return opts
}

// TestOpenCloseLoopWithReplayedTail reopens a store whose journal tail
// makes a snapshot due at once, and closes it at once, many times, with
// commits between some rounds: every Close is quick and returns no error,
// and the state survives.
func TestOpenCloseLoopWithReplayedTail(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 4
	opts.UnsafeNoSync = true
	opts.SegmentSize = 16 << 10
	opts.SnapshotBytes = NoSnapshots
	c := mustOpen(t, dir, opts)
	commitN(t, c, 200, 10, 0)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	opts.SnapshotBytes = 1
	last := int64(9)
	for i := range 40 {
		c := mustOpen(t, dir, opts)
		if i%5 == 4 {
			commitN(t, c, 200, 1, last+1)
			last++
		}
		if i%2 == 0 {
			c.waitSnapshots(t) // close after the snapshot the open began, or while it runs
		}
		if err := c.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", i, err)
		}
	}
	c = mustOpen(t, dir, opts)
	defer c.Close()
	checkState(t, c, 200, last)
	for i := range opts.Partitions {
		es, _ := os.ReadDir(SnapshotDir(dir, i))
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		if len(es) > 3 {
			t.Errorf("partition %d keeps %d files: %v", i, len(es), names)
		}
		t.Logf("partition %d: %v, stats %+v", i, names, c.Stats()[i].SnapshotIndex)
	}
	js, _ := os.ReadDir(JournalDir(dir))
	t.Logf("journal: %d files", len(js))
}

// TestBurstIdleCloseAroundTheTimer commits a burst that makes a snapshot
// due within the interval, then closes, in turn, at once (the timer is
// armed: Close stops it) and once the timer fired and its snapshot is
// done; then reopens and checks the state, and that a snapshot goroutine
// or timer left nothing broken.
func TestBurstIdleCloseAroundTheTimer(t *testing.T) {
	dir := t.TempDir()
	opts := timedSnapshotOptions(2, 40*time.Millisecond)
	finished := watchSnapshots(&opts)
	last := int64(-1)
	for i := range 30 {
		c := mustOpen(t, dir, opts)
		commitN(t, c, 60, 3, last+1)
		last += 3
		if i%2 == 1 {
			c.settleSnapshots(t, finished, 5*time.Second)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	c := mustOpen(t, dir, opts)
	defer c.Close()
	checkState(t, c, 60, last)
}

// TestSnapshotIntervalVariants: bursts with a tiny, a negative and the
// default interval, and with snapshots off, then Snapshot and Close
// racing commits; the journal keeps what a reopen needs.
func TestSnapshotIntervalVariants(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		bytes    int64
	}{
		{"tiny", time.Nanosecond, 1},
		{"ms", time.Millisecond, 1},
		{"negative", -1, 1},
		{"default", 0, 1},
		{"off", 5 * time.Millisecond, NoSnapshots},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions()
			opts.Partitions = 3
			opts.UnsafeNoSync = true
			opts.SegmentSize = 8 << 10
			opts.SnapshotBytes = tc.bytes
			opts.SnapshotInterval = tc.interval
			c := mustOpen(t, dir, opts)
			var wg sync.WaitGroup
			for w := range 3 {
				wg.Go(func() {
					for r := range 30 {
						for g := range 20 {
							name := fmt.Sprintf("g%03d", w*20+g)
							if err := c.Commit(context.Background(), name, []OffsetCommit{{Topic: "t", Partition: int32((w*20 + g) % 3), Offset: int64(r)}}); err != nil {
								t.Error(err)
								return
							}
						}
						if r%10 == 5 {
							if err := c.Snapshot(context.Background()); err != nil {
								t.Error(err)
							}
						}
					}
				})
			}
			wg.Wait()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c = mustOpen(t, dir, opts)
			defer c.Close()
			checkState(t, c, 60, 29)
		})
	}
}

// TestRestartWithASmallTailDoesNotRewriteABigState: the journal appended
// since a big snapshot is far below half its size (so no snapshot is due
// while the store runs); a restart must not find one due either, as it
// would if it forgot the loaded snapshot's size and rewrote the whole
// state at every open.
func TestRestartWithASmallTailDoesNotRewriteABigState(t *testing.T) {
	dir := t.TempDir()
	opts := timedSnapshotOptions(1, -1)
	c := mustOpen(t, dir, opts)
	ctx := context.Background()
	for g := range 4000 {
		if err := c.Commit(ctx, fmt.Sprintf("big%05d", g), []OffsetCommit{{Topic: "topic", Partition: 0, Offset: 1, Metadata: "some metadata"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	size, snap := c.Stats()[0].SnapshotBytes, c.Stats()[0].SnapshotIndex
	commitN(t, c, 100, 4, 0) // a few KiB: past the floor, far below size/2
	c.waitSnapshots(t)
	if got := c.Stats()[0].SnapshotIndex; got != snap {
		t.Fatalf("running: a snapshot was taken at %d after %d (size %d)", got, snap, size)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, dir, opts)
	defer c.Close()
	c.waitSnapshots(t) // the writer looked at snapshots as it started, and any it began is done
	t.Logf("snapshot %d bytes; replayed %d records, %d bytes", size, c.Stats()[0].LoadRecords, c.parts[0].loadBytes)
	if got := c.Stats()[0].SnapshotIndex; got != snap {
		t.Fatalf("restart: a snapshot of the whole state (%d bytes before) was taken at %d with a tail of %d records", size, got, c.Stats()[0].LoadRecords)
	}
}

// TestCloseDuringTrafficWithTimers closes a store while committers and
// Snapshot callers run, with an interval short enough that timers fire
// all through (for -race: snapTimer is touched by the partition's
// goroutine and by committers under the partition's lock), then reopens
// it.
func TestCloseDuringTrafficWithTimers(t *testing.T) {
	dir := t.TempDir()
	opts := timedSnapshotOptions(2, 3*time.Millisecond)
	for round := range 8 {
		c := mustOpen(t, dir, opts)
		// Close comes once the committers made a number of commits that
		// grows with the round.
		var acked atomic.Int64
		enough := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					err := c.Commit(context.Background(), fmt.Sprintf("w%d-%d", w, i%50), []OffsetCommit{{Topic: "t", Partition: int32(i % 5), Offset: int64(i), Metadata: "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm"}})
					if err != nil {
						return
					}
					if acked.Add(1) == int64(100*(round+1)) {
						close(enough)
					}
					if w == 0 && i%97 == 0 {
						if err := c.Snapshot(context.Background()); err != nil {
							return
						}
					}
				}
			})
		}
		<-enough
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	c := mustOpen(t, dir, opts)
	c.Close()
}
