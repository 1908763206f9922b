package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/internal/signal"
	"github.com/offsetd/offsetd/log"
)

// batchCounter is a JournalObserver that counts journal batches.
type batchCounter struct {
	batches, records, shared atomic.Int64 // shared: batches of two partitions or more
	took                     atomic.Int64 // nanoseconds in appends and fsyncs
}

func (b *batchCounter) ObserveAppend(int, int, int, time.Duration, error) {}
func (b *batchCounter) ObserveLoad(int, int, time.Duration)               {}
func (b *batchCounter) ObserveJournalBatch(calls, partitions, records, bytes int, took time.Duration, err error) {
	b.batches.Add(1)
	b.records.Add(int64(records))
	b.took.Add(int64(took))
	if partitions > 1 {
		b.shared.Add(1)
	}
}

// TestGroupCommitAcrossPartitions: 64 committers in 64 groups, spread
// over 16 partitions, commit at once; every commit is durable and
// visible, and fsyncs are shared: fewer journal batches than commits, and
// batches that carry several partitions' commits.
func TestGroupCommitAcrossPartitions(t *testing.T) {
	opts := testOptions()
	counter := &batchCounter{}
	opts.Observer = counter
	dir := t.TempDir()
	c := mustOpen(t, dir, opts)
	const writers, each = 64, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := c.Commit(t.Context(), fmt.Sprintf("group-%d", w), []OffsetCommit{{Topic: "t", Offset: int64(i)}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := counter.records.Load(); n != writers*each {
		t.Fatalf("the journal made %d records durable, want %d", n, writers*each)
	}
	t.Logf("%d commits in %d journal batches, %d of them shared by partitions", writers*each, counter.batches.Load(), counter.shared.Load())
	if counter.batches.Load() >= writers*each || counter.shared.Load() == 0 {
		t.Fatalf("%d commits took %d journal batches, %d shared by several partitions: no group commit across partitions",
			writers*each, counter.batches.Load(), counter.shared.Load())
	}
	c.Close()
	c = mustOpen(t, dir, opts)
	defer c.Close()
	for w := range writers {
		if o, ok, err := c.Fetch(fmt.Sprintf("group-%d", w), "t", 0); err != nil || !ok || o.Offset != each-1 {
			t.Fatalf("group-%d after reopen: %v %v %v", w, o, ok, err)
		}
	}
}

// crashJournal makes dir's journal, closed cleanly, look as a crash that
// found everything synced leaves it: no clean-close marker, and nothing
// in the sync ring (whose copies of the last batches would otherwise
// restore what the tests cut).
func crashJournal(t *testing.T, dir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(JournalDir(dir), "CLEAN")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(JournalDir(dir), "RING"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, 64), 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// cutLastBatch removes the journal's last batch, as a cut torn tail or a
// machine crash without fsync would.
func cutLastBatch(t *testing.T, dir string) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(JournalDir(dir), "0*"))
	slices.Sort(segs)
	var last string
	for i := len(segs) - 1; i >= 0; i-- {
		if fi, err := os.Stat(segs[i]); err == nil && fi.Size() > 0 {
			last = segs[i]
			break
		}
	}
	var starts []int64
	if _, err := log.Inspect(JournalDir(dir), 0, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	for pos := int64(0); pos < int64(len(b)); {
		starts = append(starts, pos)
		n, w := uvarint(b[pos:])
		pos += int64(w) + int64(n)
	}
	if err := os.Truncate(last, starts[len(starts)-1]); err != nil {
		t.Fatal(err)
	}
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i, c := range b {
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, i + 1
		}
	}
	return 0, 0
}

// TestIndexesNeverReused reproduces the defect of reused indexes: commit,
// snapshot, close, lose the last batch (a torn tail cut, or a machine
// crash without fsync), reopen (the snapshot is ahead of the journal),
// commit another group, close, reopen. The state served before the last
// close comes back exactly: the snapshot ahead of the journal is never
// loaded later, and the new commit's index is above every index the
// snapshot covered.
func TestIndexesNeverReused(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 2
	opts.SnapshotBytes = -1
	ctx := context.Background()
	c := mustOpen(t, dir, opts)
	for i := range 3 {
		if err := c.Commit(ctx, "a", []OffsetCommit{{Topic: "t", Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Commit(ctx, "b", []OffsetCommit{{Topic: "t", Offset: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	covered := c.d.journal.LastIndex()
	c.Close()
	crashJournal(t, dir)
	cutLastBatch(t, dir) // b's commit: the snapshots cover it, the journal no longer does

	c = mustOpen(t, dir, opts)
	if _, ok, _ := c.Fetch("b", "t", 0); ok {
		t.Fatal("b's commit, cut from the journal, is served from a snapshot ahead of the journal")
	}
	v, err := c.CommitGeneration(ctx, "c", NoGeneration, []OffsetCommit{{Topic: "t", Offset: 9}})
	if err != nil {
		t.Fatal(err)
	}
	if v <= covered {
		t.Fatalf("a new commit got index %d, which the removed snapshots covered (up to %d)", v, covered)
	}
	want := dumpState(t, c)
	c.Close()
	c = mustOpen(t, dir, opts)
	defer c.Close()
	if got := dumpState(t, c); got != want {
		t.Fatalf("state after reopen:\n got %s\nwant %s", got, want)
	}
}

// TestCleanCloseDamageRefused: damage at the end of a journal that was
// closed cleanly is corruption (nothing was in flight), not a torn write:
// Open refuses, naming the segment, instead of rolling offsets back.
func TestCleanCloseDamageRefused(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	c := mustOpen(t, dir, opts)
	for i := range 5 {
		if err := c.Commit(context.Background(), "g", []OffsetCommit{{Topic: "t", Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	seg := filepath.Join(JournalDir(dir), "00000000000000000001")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-2] ^= 0x20 // in the last batch's checksum
	if err := os.WriteFile(seg, b, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, opts)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "00000000000000000001") || !strings.Contains(err.Error(), "closed cleanly") {
		t.Fatalf("Open of a cleanly closed journal with a damaged end = %v, want ErrCorrupt naming the segment", err)
	}
}

// TestQuietPartitionDoesNotPinJournal: one busy group commits while every
// other partition holds a single early commit. The journal must not keep
// everything since that early commit: the quiet partitions are asked to
// snapshot, and the journal's front moves on.
func TestQuietPartitionDoesNotPinJournal(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 8
	opts.SegmentSize = 8 << 10
	opts.SnapshotBytes = 64 << 10
	opts.SnapshotInterval = -1 // every snapshot the traffic makes due
	opts.UnsafeNoSync = true   // the files are the same; only the test is faster
	c := mustOpen(t, dir, opts)
	defer c.Close()
	ctx := context.Background()
	busy := "busy"
	for p := range opts.Partitions {
		for i := 0; ; i++ {
			g := fmt.Sprintf("quiet-%d", i)
			if c.part.Group(g) == p && c.part.Group(g) != c.part.Group(busy) {
				if err := c.Commit(ctx, g, []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
					t.Fatal(err)
				}
				break
			}
			if c.part.Group(busy) == p {
				break
			}
		}
	}
	md := strings.Repeat("m", 200)
	for i := range 5000 {
		if err := c.Commit(ctx, busy, []OffsetCommit{{Topic: "t", Partition: int32(i % 8), Offset: int64(i), Metadata: md}}); err != nil {
			t.Fatal(err)
		}
	}
	// About 1.2 MiB went through the journal; the live state is a few KiB,
	// so the journal's budget is four times the snapshot floors: 256 KiB.
	first := c.d.journal.FirstIndex()
	size := dirSize(t, JournalDir(dir))
	t.Logf("journal from index %d of %d, %d bytes", first, c.d.journal.LastIndex(), size)
	if first < 2500 || size > 512<<10 {
		t.Fatalf("the journal starts at index %d and holds %d bytes: quiet partitions pin it", first, size)
	}
}

// TestDiskFollowsLiveState overwrites 20,000 live offsets (1,000 groups of
// 20) 60 times, from 50 committers, as consumers do. Snapshots follow the
// live state, so the data directory stays within about four times the
// journal of one pass (without them it grows to 64x), and a restart reads
// at most three times what it reads after one pass (64x without), however
// long the history. The 60 passes take seconds here where a real store
// takes hours, so the test lifts the least time between snapshots
// (SnapshotInterval); sizes are the defaults. The commits are durable:
// snapshots sync their files in every mode, and commits that did not
// would outrun them as no store's do, leaving more journal behind them
// (4.0-5.9x, so measured).
func TestDiskFollowsLiveState(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Retention = KeepForever
	opts.SnapshotInterval = -1 // the test runs 60 passes in seconds
	c := mustOpen(t, dir, opts)
	ctx := context.Background()
	const committers = 50
	pass := func(n int) {
		var wg sync.WaitGroup
		for w := range committers {
			wg.Go(func() {
				offs := make([]OffsetCommit, 20)
				for g := w; g < 1000; g += committers {
					for p := range offs {
						offs[p] = OffsetCommit{Topic: "orders", Partition: int32(p), Offset: int64(n*1000 + g), LeaderEpoch: -1}
					}
					if err := c.Commit(ctx, fmt.Sprintf("group-%04d", g), offs); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	loaded := func() (bytes int64, took time.Duration) {
		c.Close()
		start := time.Now()
		c = mustOpen(t, dir, opts)
		took = time.Since(start)
		for _, s := range c.Stats() {
			bytes += s.LoadBytes
		}
		return bytes, took
	}
	pass(0)
	onePass := dirSize(t, JournalDir(dir))
	load1, took1 := loaded()
	var most int64
	for n := 1; n < 60; n++ {
		pass(n)
		most = max(most, dirSize(t, dir))
	}
	load60, took60 := loaded()
	defer c.Close()
	t.Logf("one pass: journal %d bytes, restart reads %d bytes in %v; over 60 passes the data directory held at most %d bytes (%.1fx), restart reads %d bytes (%.1fx) in %v",
		onePass, load1, took1, most, float64(most)/float64(onePass), load60, float64(load60)/float64(load1), took60)
	if most > 5*onePass { // 3.8-4.3x, at full speed and under -race
		t.Errorf("the data directory reached %d bytes, over 5x the %d of one pass", most, onePass)
	}
	if load60 > 3*load1 {
		t.Errorf("a restart after 60 passes reads %d bytes, over 3x the %d after one", load60, load1)
	}
	if o, ok, err := c.Fetch("group-0999", "orders", 19); err != nil || !ok || o.Offset != 59*1000+999 {
		t.Fatalf("after restart: %v %v %v", o, ok, err)
	}
}

// TestFailedBatchForgetsGenerations: when a batch fails, the generations
// it carried were never durable, so they no longer fence the group; the
// generations of the commits still in flight (the waiting batch among
// them) still do.
func TestFailedBatchForgetsGenerations(t *testing.T) {
	p := newPartition(0, testOptions(), signal.New())
	w := newLocalWriter(p, nil, nil)
	batchOf := func(group string, gen int32) *batch {
		r := &request{typ: recCommit, done: make(chan result, 1)}
		payload := encodeCommit(nil, group, gen, 1, []OffsetCommit{{Topic: "t", Offset: 1}})
		return &batch{reqs: []pendingEntry{{req: r}}, entries: []log.Entry{{Type: recCommit, Payload: payload}}, applied: make(chan struct{})}
	}
	failed := batchOf("g", 11)
	w.inflight = []*batch{batchOf("h", 5), batchOf("g", 3)}
	p.batchGen["g"], p.batchGen["h"] = 11, 5

	w.fail(failed, errors.New("disk full"))
	if res := <-failed.reqs[0].req.done; !errors.Is(res.err, ErrWriteFailed) {
		t.Fatalf("the failed batch's request got %v", res.err)
	}
	if g, h := p.batchGen["g"], p.batchGen["h"]; g != 3 || h != 5 {
		t.Fatalf("after the failure the generations are g=%d h=%d, want g=3 h=5 (in flight)", g, h)
	}
}
