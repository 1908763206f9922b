package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offsetd/offsetd/internal/signal"
	"github.com/offsetd/offsetd/log"
)

// snapshotFiles lists partition 0's snapshot files.
func snapshotFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(SnapshotDir(dir, 0), "snap.*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func commitN(t testing.TB, c *Coordinator, groups, rounds int, base int64) {
	t.Helper()
	ctx := context.Background()
	for r := range rounds {
		for g := range groups {
			off := base + int64(r)
			if err := c.Commit(ctx, fmt.Sprintf("g%03d", g), []OffsetCommit{{Topic: "t", Partition: int32(g % 3), Offset: off, Metadata: "m"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func oneShardOptions() Options {
	o := testOptions()
	o.Partitions = 1
	o.SegmentSize = 4096
	o.SnapshotBytes = -1 // snapshots only when a test asks
	return o
}

// TestSnapshotThenTail writes, snapshots, writes more (deletes included),
// snapshots again, and checks that the log before the first snapshot is
// gone, at most two snapshots remain, and a reopen rebuilds the same state.
func TestSnapshotThenTail(t *testing.T) {
	dir := t.TempDir()
	opts := oneShardOptions()
	c := mustOpen(t, dir, opts)
	ctx := context.Background()
	commitN(t, c, 20, 10, 0)
	if err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	first := c.parts[0].lastSnapshot
	commitN(t, c, 20, 5, 100)
	if err := c.DeleteGroup(ctx, "g003"); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	commitN(t, c, 3, 1, 1000)
	if err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.d.journal.FirstIndex(); got <= first {
		t.Fatalf("log FirstIndex = %d, want past the first snapshot at %d", got, first)
	}
	if n := len(snapshotFiles(t, dir)); n != 2 {
		t.Fatalf("%d snapshot files, want 2 (newest and previous)", n)
	}
	want := dumpState(t, c)
	c.Close()
	c = mustOpen(t, dir, opts)
	defer c.Close()
	if got := dumpState(t, c); got != want {
		t.Fatalf("state after reopen differs:\n got %s\nwant %s", got, want)
	}
	if _, ok, _ := c.Group("g003"); ok {
		t.Fatal("a deleted group came back from the snapshot")
	}
	if c.parts[0].loadRecords > 10 {
		t.Fatalf("replayed %d log records after the snapshot, want only the short tail", c.parts[0].loadRecords)
	}
}

// dumpState renders every group's offsets and description, and every
// static topic, for comparing two stores.
func dumpState(t testing.TB, c *Coordinator) string {
	t.Helper()
	var b strings.Builder
	for _, g := range c.Groups() {
		offs, info, err := c.GroupOffsets(g)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s v%d gen%d last%d:", g, info.Version, info.Generation, info.LastCommit.UnixMilli())
		for _, o := range offs {
			fmt.Fprintf(&b, " %s/%d=%d@%d", o.Topic, o.Partition, o.Offset.Offset, o.CommitTime.UnixMilli())
		}
		b.WriteByte('\n')
	}
	for _, m := range c.StaticTopics() {
		fmt.Fprintf(&b, "static %s %s %d\n", m.Topic, m.Scope, m.Epoch)
	}
	for _, s := range c.Scopes() {
		fmt.Fprintf(&b, "scope %+v\n", s)
	}
	return b.String()
}

// TestSnapshotFallback damages the newest snapshot (cut short, then a bit
// flipped): Open falls back to the previous snapshot plus the longer log
// tail, with a warning. With both damaged it fails with ErrCorrupt.
func TestSnapshotFallback(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func([]byte) []byte
	}{
		{"cut", func(b []byte) []byte { return b[:len(b)/2] }},
		{"bit flip", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"empty", func([]byte) []byte { return nil }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := oneShardOptions()
			c := mustOpen(t, dir, opts)
			ctx := context.Background()
			if _, err := c.CreateStaticTopic(ctx, "st", "clusterA", 4, []string{"b1"}); err != nil {
				t.Fatal(err)
			}
			if err := c.SetGlobalRead(ctx, "clusterA", true); err != nil {
				t.Fatal(err)
			}
			// Enough commits to fill several 4 KiB segments, so that the
			// second snapshot drops whole segments from the log's front.
			commitN(t, c, 10, 30, 0)
			if err := c.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
			commitN(t, c, 10, 30, 100)
			if err := c.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
			commitN(t, c, 3, 1, 1000)
			want := dumpState(t, c)
			c.Close()

			snaps := snapshotFiles(t, dir) // oldest first
			if len(snaps) != 2 {
				t.Fatalf("snapshot files %v", snaps)
			}
			damageFile(t, snaps[1], damage.do)
			var logs bytes.Buffer
			opts.Logger = slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))
			c = mustOpen(t, dir, opts)
			if got := dumpState(t, c); got != want {
				t.Fatalf("state after fallback differs:\n got %s\nwant %s", got, want)
			}
			if c.d.journal.FirstIndex() == 1 {
				t.Fatal("the log was never truncated: the test proves nothing about a lost tail")
			}
			c.Close()
			if !strings.Contains(logs.String(), "falling back") {
				t.Fatalf("no warning about the fallback in:\n%s", logs.String())
			}

			damageFile(t, snaps[0], damage.do)
			_, err := Open(dir, opts)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "no usable snapshot") {
				t.Fatalf("Open with both snapshots damaged = %v, want ErrCorrupt", err)
			}
		})
	}
}

func damageFile(t *testing.T, path string, do func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, do(b), 0o640); err != nil {
		t.Fatal(err)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestTombstonesGoneAfterSnapshot deletes everything and checks that after
// two snapshots neither the snapshot nor the log holds the deleted data.
func TestTombstonesGoneAfterSnapshot(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, oneShardOptions())
	defer c.Close()
	ctx := context.Background()
	commitN(t, c, 200, 5, 0)
	for _, g := range c.Groups() {
		if err := c.DeleteGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	// Two snapshots, with a short-lived group between them so that the second
	// has something new to capture: then the log before the first one goes.
	for range 2 {
		if err := c.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		commitN(t, c, 1, 1, 0)
		if err := c.DeleteGroup(ctx, "g000"); err != nil {
			t.Fatal(err)
		}
	}
	// What is left: at most the segment holding the first snapshot's index
	// and the tail segment, two nearly empty snapshots, the meta file.
	if size := dirSize(t, dir); size > 3*4096 {
		t.Fatalf("data dir holds %d bytes after deleting everything and two snapshots", size)
	}
	rep, err := log.Inspect(JournalDir(dir), 0, nil)
	if err != nil || rep.Segments > 2 {
		t.Fatalf("log still holds %d segments (%v)", rep.Segments, err)
	}
}

// dirSize returns the bytes of the files under dir, but for the
// journal's sync ring, whose size is fixed.
func dirSize(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	// Snapshots and truncations may rename and remove files while it
	// walks: a file gone by the time it is read counts as gone.
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() != "RING" { // the journal's sync ring: a fixed size
			fi, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestChurnBoundsDisk overwrites a fixed set of keys many times with
// automatic snapshots: the data directory stays within a small multiple of
// the live state plus the active segments, however long the history.
//
// Snapshots run beside the commits. Every 500 commits the test waits for
// the running snapshot, so how far the log runs ahead of a slow snapshot
// is set by the test, not by the machine's load, and the directory is
// measured when no file in it is being renamed or removed.
func TestChurnBoundsDisk(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 1
	opts.SegmentSize = 16 << 10
	opts.SnapshotBytes = 32 << 10
	opts.SnapshotInterval = -1
	opts.UnsafeNoSync = true // the files are the same; only the test is faster
	c := mustOpen(t, dir, opts)
	defer c.Close()
	var sizes []int64
	var live int64
	for round := range 10 {
		for step := range 10 { // 5000 commits, about 250 KiB of log
			commitN(t, c, 50, 10, int64(round*1000+step*10))
			live = c.waitSnapshots(t)[0]
		}
		sizes = append(sizes, dirSize(t, dir))
	}
	bound := 2*live + 4*max(opts.SnapshotBytes, live) + 4*int64(opts.SegmentSize)
	t.Logf("disk after each round %v; last snapshot %d bytes; bound %d", sizes, live, bound)
	if testing.Verbose() {
		des, _ := os.ReadDir(filepath.Join(dir, "p0000"))
		for _, de := range des {
			fi, _ := de.Info()
			t.Log(de.Name(), fi.Size())
		}
	}
	if live == 0 {
		t.Fatal("no automatic snapshot was written")
	}
	for i, s := range sizes {
		if s > bound {
			t.Fatalf("after round %d the data dir holds %d bytes, over %d", i, s, bound)
		}
	}
}

// TestSnapshotWhileBatchesInFlight: a partition snapshots often while the
// next batches of its writers sync. A snapshot must cover only what its
// partition applied, never records of batches still in flight (which the
// journal may already hold): every acknowledged commit is there after a
// reopen.
func TestSnapshotWhileBatchesInFlight(t *testing.T) {
	opts := testOptions()
	opts.Partitions = 1
	opts.SnapshotBytes = 1 // the floor: a snapshot every 4 KiB appended
	opts.SnapshotInterval = -1
	dir := t.TempDir()
	c := mustOpen(t, dir, opts)
	const writers, each = 32, 60
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := c.Commit(t.Context(), "g", []OffsetCommit{{Topic: "t", Partition: int32(w), Offset: int64(i), Metadata: strings.Repeat("m", 64)}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	snapped := c.Stats()[0].SnapshotIndex
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if snapped == 0 {
		t.Fatal("no snapshot was taken under load")
	}
	c = mustOpen(t, dir, opts)
	defer c.Close()
	for w := range writers {
		if o, ok, err := c.Fetch("g", "t", int32(w)); err != nil || !ok || o.Offset != each-1 {
			t.Fatalf("partition %d after reopen: %+v %v %v, want offset %d", w, o, ok, err, each-1)
		}
	}
}

// TestSnapshotHeldByTheIntervalIsTakenAfterIt: a burst of commits makes a
// snapshot due by its bytes while SnapshotInterval holds it back, and no
// request follows the burst. The snapshot is taken once the interval ends
// all the same, so the journal of the burst does not stay until the next
// request.
func TestSnapshotHeldByTheIntervalIsTakenAfterIt(t *testing.T) {
	opts := timedSnapshotOptions(1, 300*time.Millisecond)
	finished := watchSnapshots(&opts)
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	commitN(t, c, 50, 5, 0) // the first snapshot, at once
	c.settleSnapshots(t, finished, 5*time.Second)
	if c.Stats()[0].SnapshotIndex == 0 {
		t.Fatal("no snapshot after the first commits")
	}
	start := time.Now()
	commitN(t, c, 50, 10, 100) // due again by its bytes, within the interval
	last := c.d.journal.LastIndex()
	if c.Stats()[0].SnapshotIndex >= last {
		t.Fatal("the burst's snapshot was taken before the interval ended")
	}
	c.settleSnapshots(t, finished, 5*time.Second)
	if got := c.Stats()[0].SnapshotIndex; got < last {
		t.Fatalf("with nothing left to wait for, the newest snapshot covers %d, not the journal's last index %d", got, last)
	}
	if took := time.Since(start); took < opts.SnapshotInterval/2 {
		t.Fatalf("the burst was snapshotted after %v, well within the interval", took)
	}
}

// TestRestartSnapshotsWhatItReplayed: a store reopened with a journal
// tail long enough to make a snapshot due takes that snapshot as it
// starts, with no request, so the next restart does not replay the tail
// again.
func TestRestartSnapshotsWhatItReplayed(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 1
	opts.UnsafeNoSync = true
	opts.SnapshotBytes = NoSnapshots
	c := mustOpen(t, dir, opts)
	commitN(t, c, 50, 10, 0)
	last := c.d.journal.LastIndex()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	opts.SnapshotBytes = 1
	finished := watchSnapshots(&opts)
	c = mustOpen(t, dir, opts)
	defer c.Close()
	if n := c.Stats()[0].LoadRecords; n < 500 {
		t.Fatalf("replayed %d records, want the 500 committed", n)
	}
	c.settleSnapshots(t, finished, 5*time.Second)
	if got := c.Stats()[0].SnapshotIndex; got < last {
		t.Fatalf("with nothing left to wait for, the newest snapshot covers %d, not the journal's last index %d", got, last)
	}
}

// TestStatsNameTheLoadedSnapshot: after a restart the partition's newest
// snapshot is the one it loaded, for Stats (and so for the metrics and
// the journal's budget) as for the snapshot trigger, not none until the
// next one is written.
func TestStatsNameTheLoadedSnapshot(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 1
	c := mustOpen(t, dir, opts)
	commitN(t, c, 50, 4, 0)
	if err := c.Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := c.Stats()[0]
	if before.SnapshotIndex == 0 || before.SnapshotBytes == 0 {
		t.Fatalf("no snapshot after Snapshot: %+v", before)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, dir, opts)
	defer c.Close()
	after := c.Stats()[0]
	if after.SnapshotIndex != before.SnapshotIndex || after.SnapshotBytes != before.SnapshotBytes {
		t.Fatalf("after the restart Stats names snapshot %d of %d bytes, want the one loaded: %d of %d bytes",
			after.SnapshotIndex, after.SnapshotBytes, before.SnapshotIndex, before.SnapshotBytes)
	}
}

// TestSnapshotStoppedByCloseSaysClosed: a snapshot that Close stops answers
// its callers with ErrClosed (which the server maps to 503), not with the
// loader's "stopped while loading", and leaves no snapshot file.
func TestSnapshotStoppedByCloseSaysClosed(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 1
	opts.SnapshotBytes = NoSnapshots
	c := mustOpen(t, dir, opts)
	defer c.Close()
	commitN(t, c, 10, 1, 0)
	stop := make(chan struct{})
	close(stop)
	p := c.parts[0]
	_, err := c.d.snapshots[0].Write(c.d.journal.LastIndex(), func(w io.Writer) error { return p.writeSnapshot(w, p.txns.copyAll(), stop) })
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("a stopped snapshot says %v, want ErrClosed", err)
	}
	if list, err := c.d.snapshots[0].List(); err != nil || len(list) != 0 {
		t.Fatalf("a stopped snapshot left snapshots %v (%v)", list, err)
	}
}

// TestFallbackThenSnapshotDropsTheDamagedOne: after Open fell back past a
// damaged newest snapshot, the next snapshot removes the damaged file with
// the older ones it no longer needs. Left there, it would lie between the
// newest and the good snapshot before it (or be the only older one, when
// the fallback was the whole journal) and pass, after one more restart,
// for the snapshot to fall back to: the journal behind the good one could
// then go.
func TestFallbackThenSnapshotDropsTheDamagedOne(t *testing.T) {
	for _, snaps := range []int{2, 1} { // 1: nothing older to fall back to but the journal
		t.Run(fmt.Sprintf("snapshots=%d", snaps), func(t *testing.T) {
			dir := t.TempDir()
			opts := oneShardOptions()
			c := mustOpen(t, dir, opts)
			ctx := context.Background()
			for base := range snaps {
				commitN(t, c, 10, 30, int64(base*100))
				if err := c.Snapshot(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			before := snapshotFiles(t, dir) // oldest first
			if len(before) != snaps {
				t.Fatalf("snapshot files %v", before)
			}
			damageFile(t, before[snaps-1], func(b []byte) []byte { return b[:len(b)/2] })

			c = mustOpen(t, dir, opts) // falls back
			good := c.Stats()[0].SnapshotIndex
			commitN(t, c, 10, 30, 200)
			if err := c.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
			want := dumpState(t, c)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			after := snapshotFiles(t, dir)
			if len(after) != snaps || snaps == 2 && after[0] != before[0] {
				t.Fatalf("snapshot files after the fallback and a new snapshot: %v, want the one loaded (if any, of %v) and the new one", after, before)
			}

			c = mustOpen(t, dir, opts)
			defer c.Close()
			if prev := c.parts[0].prevSnapshot; prev != good {
				t.Fatalf("the snapshot to fall back to is %d, want %d, the good one loaded before", prev, good)
			}
			if got := dumpState(t, c); got != want {
				t.Fatalf("state after the restart differs:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// partitionState renders everything a partition's snapshot holds: every
// group with its offsets, version and the index it was captured at, the
// static topics, the scopes read globally and the pending transactional
// offsets.
func partitionState(p *partition) string {
	var b strings.Builder
	groups := p.offsets.Groups(nil)
	slices.Sort(groups)
	for _, g := range groups {
		entries, info, at, _ := p.offsets.GroupAt(g, nil)
		fmt.Fprintf(&b, "%s %+v at %d: %+v\n", g, info, at, entries)
	}
	for _, m := range p.mappings.All(nil) {
		fmt.Fprintf(&b, "mapping %s %s %d\n", m.Topic, m.Scope, m.Epoch)
	}
	scopes := p.switches.Scopes(nil)
	slices.Sort(scopes)
	fmt.Fprintf(&b, "global read %v\n", scopes)
	txns := p.txns.copyAll()
	slices.SortFunc(txns, func(a, b txnSnapEntry) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	fmt.Fprintf(&b, "txns %+v\n", txns)
	return b.String()
}

// TestSnapshotIsAStateMachineSeam: a partition writes its snapshot's
// content to any io.Writer and restores it from any io.Reader; its host
// alone deals with files. The content a live partition writes to a plain
// buffer restores, in a partition that never saw a file, to the same
// state; one byte changed in it is refused as damage.
func TestSnapshotIsAStateMachineSeam(t *testing.T) {
	ctx := context.Background()
	opts := testOptions()
	opts.Partitions = 1
	opts.SnapshotBytes = NoSnapshots
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	commitN(t, c, 30, 3, 0)
	if err := c.DeleteGroup(ctx, "g007"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStaticTopic(ctx, "T", "clusterA", 4, []string{"b1", "b2"}); err != nil {
		t.Fatal(err)
	}
	if err := c.ForceSetGlobalRead(ctx, "clusterA", true); err != nil {
		t.Fatal(err)
	}
	if err := c.TxnCommit(ctx, "g001", 42, 3, -1, []OffsetCommit{{Topic: "t", Partition: 1, Offset: 99}}); err != nil {
		t.Fatal(err)
	}
	src := c.parts[0]
	index := c.d.journal.LastIndex()
	var content bytes.Buffer
	if err := src.writeSnapshot(&content, src.txns.copyAll(), nil); err != nil {
		t.Fatal(err)
	}

	restore := func(b []byte) (*partition, error) {
		p := newPartition(0, opts, signal.New())
		p.resetTables()
		return p, p.restoreSnapshot(index, bytes.NewReader(b))
	}
	dst, err := restore(content.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want, got := partitionState(src), partitionState(dst)
	if !strings.Contains(want, "g001") || !strings.Contains(want, "mapping T") || !strings.Contains(want, "42") {
		t.Fatalf("the source partition lacks what the test wrote:\n%s", want)
	}
	if got != want {
		t.Fatalf("restored partition differs:\n got %s\nwant %s", got, want)
	}

	for _, at := range []int{0, content.Len() / 2, content.Len() - 1} {
		bad := bytes.Clone(content.Bytes())
		bad[at] ^= 0x10
		if _, err := restore(bad); !errors.Is(err, log.ErrCorrupt) {
			t.Fatalf("content with byte %d of %d changed restored: %v", at, len(bad), err)
		}
	}
	if _, err := restore(content.Bytes()[:content.Len()-1]); !errors.Is(err, log.ErrCorrupt) {
		t.Fatalf("content cut short restored: %v", err)
	}
}
