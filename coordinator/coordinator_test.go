package coordinator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCommitFetchOverwrite(t *testing.T) {
	c := mustOpen(t, t.TempDir(), testOptions())
	defer c.Close()
	ctx := context.Background()
	commit := func(off int64) {
		t.Helper()
		if err := c.Commit(ctx, "g", []OffsetCommit{{Topic: "t", Partition: 0, Offset: off, LeaderEpoch: 3, Metadata: "m"}}); err != nil {
			t.Fatal(err)
		}
	}
	commit(10)
	commit(20)
	commit(5) // a reset to an earlier offset holds: last write wins, not highest
	v, ok, err := c.Fetch("g", "t", 0)
	if err != nil || !ok || v.Offset != 5 || v.LeaderEpoch != 3 || v.Metadata != "m" {
		t.Fatalf("Fetch = %+v %v %v", v, ok, err)
	}
	if _, ok, _ := c.Fetch("g", "t", 1); ok {
		t.Fatal("Fetch of an uncommitted partition found a value")
	}
	if _, ok, _ := c.Fetch("other", "t", 0); ok {
		t.Fatal("groups share progress")
	}
}

func TestCommitTimeFromClock(t *testing.T) {
	opts := testOptions()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	opts.Now = func() time.Time { return at }
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	if err := c.Commit(context.Background(), "g", []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	v, _, _ := c.Fetch("g", "t", 0)
	if !v.CommitTime.Equal(at) {
		t.Fatalf("CommitTime = %v, want %v", v.CommitTime, at)
	}
	info, ok, _ := c.Group("g")
	if !ok || !info.LastCommit.Equal(at) || info.Offsets != 1 || info.Version == 0 {
		t.Fatalf("Group = %+v %v", info, ok)
	}
}

// TestBadInput checks that every kind of bad input fails with ErrInvalid and
// writes nothing.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	ctx := context.Background()
	long := strings.Repeat("x", MaxNameBytes+1)
	ok := []OffsetCommit{{Topic: "t", Partition: 0, Offset: 1, LeaderEpoch: -1}}
	tooMany := make([]OffsetCommit, MaxOffsetsPerCommit+1)
	for i := range tooMany {
		tooMany[i] = OffsetCommit{Topic: "t", Partition: int32(i)}
	}
	cases := []struct {
		name    string
		group   string
		gen     int32
		offsets []OffsetCommit
	}{
		{"empty group", "", -1, ok},
		{"long group", long, -1, ok},
		{"invalid utf-8 group", "g\xff", -1, ok},
		{"empty topic", "g", -1, []OffsetCommit{{Topic: "", Offset: 1}}},
		{"long topic", "g", -1, []OffsetCommit{{Topic: long, Offset: 1}}},
		{"negative partition", "g", -1, []OffsetCommit{{Topic: "t", Partition: -1, Offset: 1}}},
		{"offset below -1", "g", -1, []OffsetCommit{{Topic: "t", Offset: -2}}},
		{"leader epoch below -1", "g", -1, []OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -2}}},
		{"metadata over the limit", "g", -1, []OffsetCommit{{Topic: "t", Offset: 1, Metadata: strings.Repeat("m", 4097)}}},
		{"empty commit", "g", -1, nil},
		{"too many offsets", "g", -1, tooMany},
		{"one bad offset among good ones", "g", -1, append(append([]OffsetCommit{}, ok...), OffsetCommit{Topic: "t", Partition: -5})},
		{"generation below -1", "g", -2, ok},
	}
	for _, tc := range cases {
		_, err := c.CommitGeneration(ctx, tc.group, tc.gen, tc.offsets)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", tc.name, err)
		}
	}
	for _, err := range []error{
		c.DeleteGroup(ctx, ""),
		c.DeleteOffsets(ctx, "g", ""),
		c.DeleteOffsets(ctx, "g", "t", -1),
		func() error { _, _, err := c.Fetch("", "t", 0); return err }(),
		func() error { _, _, err := c.Fetch("g", "t", -1); return err }(),
		func() error { _, err := c.FetchGroup(long); return err }(),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("err = %v, want ErrInvalid", err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	if g := c.Groups(); len(g) != 0 {
		t.Fatalf("bad input left groups %v", g)
	}
	if last := c.d.journal.LastIndex(); last != 0 {
		t.Fatalf("the journal has %d records after bad input only", last)
	}
}

func TestDeletes(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	ctx := context.Background()
	if err := c.Commit(ctx, "g", []OffsetCommit{{Topic: "a", Partition: 0, Offset: 1}, {Topic: "a", Partition: 1, Offset: 2}, {Topic: "b", Partition: 0, Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteOffsets(ctx, "g", "a", 1, 7); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteOffsets(ctx, "g", "a", 7); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete of a missing partition = %v, want ErrNotFound", err)
	}
	if err := c.DeleteOffsets(ctx, "g", "b"); err != nil {
		t.Fatal(err)
	}
	got, _ := c.FetchGroup("g")
	if len(got) != 1 || got[0].Topic != "a" || got[0].Partition != 0 {
		t.Fatalf("after deletes FetchGroup = %v", got)
	}
	if err := c.DeleteGroup(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteGroup(ctx, "g"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second DeleteGroup = %v, want ErrNotFound", err)
	}
	c.Close()
	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	if g := c.Groups(); len(g) != 0 {
		t.Fatalf("deleted group came back after replay: %v", g)
	}
	// A deleted group can commit again.
	if err := c.Commit(ctx, "g", []OffsetCommit{{Topic: "a", Offset: 9}}); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := c.Fetch("g", "a", 0); !ok || v.Offset != 9 {
		t.Fatalf("recommit after delete: %v %v", v, ok)
	}
}

func TestGenerationFencing(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	ctx := context.Background()
	offs := func(o int64) []OffsetCommit { return []OffsetCommit{{Topic: "t", Offset: o}} }
	if _, err := c.CommitGeneration(ctx, "g", 5, offs(10)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CommitGeneration(ctx, "g", 4, offs(99)); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("stale generation = %v", err)
	}
	if _, err := c.CommitGeneration(ctx, "g", NoGeneration, offs(11)); err != nil {
		t.Fatalf("commit without generation: %v", err)
	}
	c.Close()
	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	if _, err := c.CommitGeneration(ctx, "g", 4, offs(99)); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("stale generation after reopen = %v", err)
	}
	v, err := c.CommitGeneration(ctx, "g", 6, offs(12))
	if err != nil {
		t.Fatal(err)
	}
	info, _, _ := c.Group("g")
	if info.Generation != 6 || info.Version != v {
		t.Fatalf("Group = %+v, want generation 6 version %d", info, v)
	}
}

func TestPartitionMismatch(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	c.Close()
	opts := testOptions()
	opts.Partitions = 8
	if _, err := Open(dir, opts); !errors.Is(err, ErrPartitionMismatch) {
		t.Fatalf("Open with another partition count = %v, want ErrPartitionMismatch", err)
	}
	if n, err := ReadPartitions(dir); err != nil || n != 16 {
		t.Fatalf("ReadPartitions = %d %v", n, err)
	}
}

func TestDirectoryLocked(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	defer c.Close()
	if _, err := Open(dir, testOptions()); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
}

func TestClosed(t *testing.T) {
	c := mustOpen(t, t.TempDir(), testOptions())
	c.Close()
	if err := c.Commit(context.Background(), "g", []OffsetCommit{{Topic: "t"}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close = %v", err)
	}
	if _, _, err := c.Fetch("g", "t", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Fetch after Close = %v", err)
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
}

// TestCorruptionRefusesToOpen flips a bit in an old frame of a partition's
// log: Open must fail with ErrCorrupt naming the partition, never serve a
// silently shorter state.
func TestCorruptionRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 1
	c := mustOpen(t, dir, opts)
	for i := range 20 {
		if err := c.Commit(context.Background(), "g", []OffsetCommit{{Topic: "t", Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	segs, _ := filepath.Glob(filepath.Join(JournalDir(dir), "0*"))
	if len(segs) == 0 {
		t.Fatal("no segment files")
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x10
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, opts)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "segment 0") {
		t.Fatalf("Open of a damaged journal = %v, want ErrCorrupt naming the segment", err)
	}
}

func TestLoadInBackground(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	if err := c.Commit(context.Background(), "g", []OffsetCommit{{Topic: "t", Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	opts := testOptions()
	opts.LoadInBackground = true
	c = mustOpen(t, dir, opts)
	defer c.Close()
	if _, _, err := c.Fetch("g", "t", 0); err != nil && !errors.Is(err, ErrLoading) {
		t.Fatalf("Fetch while loading = %v, want a value or ErrLoading", err)
	}
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !c.Ready() {
		t.Fatal("not Ready after WaitReady")
	}
	if v, ok, err := c.Fetch("g", "t", 0); err != nil || !ok || v.Offset != 3 {
		t.Fatalf("Fetch after load = %v %v %v", v, ok, err)
	}
}

// TestZeroOptionsMeanDefaults opens with the zero Options: every field takes
// its default, as DefaultOptions states it, and metadata up to the default
// limit is accepted.
func TestZeroOptionsMeanDefaults(t *testing.T) {
	var zero Options
	zero.Logger = testOptions().Logger
	c := mustOpen(t, t.TempDir(), zero)
	defer c.Close()
	d := DefaultOptions()
	got := c.opts
	if got.Partitions != d.Partitions || got.SegmentSize != d.SegmentSize || got.MaxMetadataBytes != d.MaxMetadataBytes ||
		got.SnapshotBytes != d.SnapshotBytes || got.Retention != d.Retention || got.RetentionCheckInterval != d.RetentionCheckInterval ||
		got.Now == nil || got.UnsafeNoSync || got.LoadInBackground {
		t.Fatalf("zero options became %+v, want the defaults %+v", got, d)
	}
	ctx := context.Background()
	if err := c.Commit(ctx, "g", []OffsetCommit{{Topic: "t", Metadata: strings.Repeat("m", d.MaxMetadataBytes)}}); err != nil {
		t.Fatalf("metadata at the default limit: %v", err)
	}
	if err := c.Commit(ctx, "g", []OffsetCommit{{Topic: "t", Metadata: strings.Repeat("m", d.MaxMetadataBytes+1)}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("metadata over the default limit = %v, want ErrInvalid", err)
	}
}

// TestNoMetadata switches metadata off explicitly: any non-empty string is
// refused, an empty one is not.
func TestNoMetadata(t *testing.T) {
	opts := testOptions()
	opts.MaxMetadataBytes = NoMetadata
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	ctx := context.Background()
	if err := c.Commit(ctx, "g", []OffsetCommit{{Topic: "t", Metadata: "m"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("metadata with NoMetadata = %v, want ErrInvalid", err)
	}
	if err := c.Commit(ctx, "g", []OffsetCommit{{Topic: "t"}}); err != nil {
		t.Fatalf("no metadata with NoMetadata: %v", err)
	}
}
