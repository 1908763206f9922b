package coordinator

import (
	"context"
	"errors"
	"testing"

	"github.com/offsetd/offsetd/cache"
)

func TestDecodeTxnRecords(t *testing.T) {
	commit := encodeTxnCommit(nil, "g", 7, 3, 2, 1000, []OffsetCommit{{Topic: "t", Partition: 1, Offset: 42, LeaderEpoch: -1, Metadata: "m"}})
	r, err := DecodeRecord(recTxnCommit, commit)
	if err != nil || r.Type != "txn_commit" || r.Group != "g" || *r.ProducerID != 7 || *r.ProducerEpoch != 3 || *r.Generation != 2 ||
		len(r.Offsets) != 1 || *r.Offsets[0].Offset != 42 || r.Offsets[0].CommitTime != 1000 {
		t.Fatalf("txn commit = %+v %v", r, err)
	}
	end := encodeTxnEnd(nil, "g", 7, 4, true, []txnOffset{{topicPartition: topicPartition{Topic: "t", Partition: 1}, Offset: cache.Offset{Offset: 42, CommitTime: 1000}}})
	if r, err := DecodeRecord(recTxnEnd, end); err != nil || r.Type != "txn_end" || !*r.Committed || *r.ProducerEpoch != 4 || *r.Offsets[0].Offset != 42 {
		t.Fatalf("txn end = %+v %v", r, err)
	}
	if r, err := DecodeRecord(recSnapTxn, encodeSnapTxn(nil, "g", 7, 4, nil)); err != nil || r.Type != "snapshot_txn" || r.Committed != nil || len(r.Offsets) != 0 {
		t.Fatalf("snapshot txn = %+v %v", r, err)
	}
	snap := encodeSnapTxn(nil, "g", 7, 4, []txnOffset{{topicPartition: topicPartition{Topic: "t"}, Offset: cache.Offset{Offset: 3}, at: 12, superseded: true}})
	if r, err := DecodeRecord(recSnapTxn, snap); err != nil || len(r.Offsets) != 1 || r.Offsets[0].TxnCommit != 12 || !r.Offsets[0].Superseded {
		t.Fatalf("snapshot txn with an offset = %+v %v", r, err)
	}
	if _, err := DecodeRecord(recSnapTxn, append(snap[:len(snap)-1], 4)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("superseded flag 2: %v", err)
	}
	for n := range len(end) {
		if _, err := DecodeRecord(recTxnEnd, end[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("txn end cut to %d bytes: %v", n, err)
		}
	}
	// An abort that carries offsets, or a negative producer, is damage.
	abort := encodeTxnOffsets(nil, "g", 7, 4, 0, []txnOffset{{topicPartition: topicPartition{Topic: "t"}}})
	negative := encodeTxnCommit(nil, "g", -2, 0, -1, 0, []OffsetCommit{{Topic: "t"}})
	for typ, b := range map[byte][]byte{recTxnEnd: abort, recTxnCommit: negative} {
		if _, err := DecodeRecord(typ, b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("type %d: %v", typ, err)
		}
	}
}

// txnState is what a test reads of a group: its committed offset of t/0
// (-2: none) and its pending offsets.
func txnState(t *testing.T, c *Coordinator, group string) (int64, []PendingOffset) {
	t.Helper()
	committed := int64(-2)
	o, ok, err := c.Fetch(group, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		committed = o.Offset
	}
	pending, err := c.PendingOffsets(group)
	if err != nil {
		t.Fatal(err)
	}
	return committed, pending
}

func TestTxnCommitAndAbort(t *testing.T) {
	ctx := context.Background()
	c := mustOpen(t, t.TempDir(), testOptions())
	defer c.Close()
	at := func(off int64) []OffsetCommit { return []OffsetCommit{{Topic: "t", Offset: off, LeaderEpoch: -1}} }
	if err := c.Commit(ctx, "g", at(5)); err != nil {
		t.Fatal(err)
	}
	if err := c.TxnCommit(ctx, "g", 100, 0, NoGeneration, at(10)); err != nil {
		t.Fatal(err)
	}
	if got, pending := txnState(t, c, "g"); got != 5 || len(pending) != 1 || pending[0].Offset.Offset != 10 || pending[0].ProducerID != 100 {
		t.Fatalf("after txn commit: committed %d pending %+v", got, pending)
	}
	if gs, err := c.TxnGroups(100); err != nil || len(gs) != 1 || gs[0] != "g" {
		t.Fatalf("TxnGroups = %v %v", gs, err)
	}
	// A newer offset of the same transaction replaces the pending one.
	if err := c.TxnCommit(ctx, "g", 100, 0, NoGeneration, at(11)); err != nil {
		t.Fatal(err)
	}
	if err := c.EndTxn(ctx, "g", 100, 0, true); err != nil {
		t.Fatal(err)
	}
	if got, pending := txnState(t, c, "g"); got != 11 || len(pending) != 0 {
		t.Fatalf("after commit marker: committed %d pending %+v", got, pending)
	}
	// An abort drops; a marker with nothing pending writes nothing.
	if err := c.TxnCommit(ctx, "g", 100, 1, NoGeneration, at(20)); err != nil {
		t.Fatal(err)
	}
	if err := c.EndTxn(ctx, "g", 100, 1, false); err != nil {
		t.Fatal(err)
	}
	info, _, _ := c.Group("g")
	if err := c.EndTxn(ctx, "g", 100, 1, true); err != nil {
		t.Fatal(err)
	}
	if after, _, _ := c.Group("g"); after.Version != info.Version {
		t.Fatalf("a marker with nothing pending wrote: version %d → %d", info.Version, after.Version)
	}
	if got, pending := txnState(t, c, "g"); got != 11 || len(pending) != 0 {
		t.Fatalf("after abort: committed %d pending %+v", got, pending)
	}
	if gs, _ := c.TxnGroups(100); len(gs) != 0 {
		t.Fatalf("TxnGroups after the end = %v", gs)
	}
}

func TestTxnFencing(t *testing.T) {
	ctx := context.Background()
	c := mustOpen(t, t.TempDir(), testOptions())
	defer c.Close()
	at := []OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}}
	if err := c.TxnCommit(ctx, "g", 7, 3, NoGeneration, at); err != nil {
		t.Fatal(err)
	}
	version := func() uint64 { i, _, _ := c.Group("g"); return i.Version }
	before := version()
	if err := c.TxnCommit(ctx, "g", 7, 2, NoGeneration, at); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("older epoch: %v", err)
	}
	if err := c.EndTxn(ctx, "g", 7, 2, true); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("marker of an older epoch: %v", err)
	}
	// Another producer id is not fenced by this one.
	if err := c.TxnCommit(ctx, "g", 8, 0, NoGeneration, at); err != nil {
		t.Fatal(err)
	}
	// A marker of a newer epoch (as a transaction coordinator writes after
	// bumping it) ends the transaction.
	if err := c.EndTxn(ctx, "g", 7, 4, false); err != nil {
		t.Fatal(err)
	}
	if err := c.TxnCommit(ctx, "g", 7, 3, NoGeneration, at); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("zombie after its transaction ended: %v", err)
	}
	if _, pending := txnState(t, c, "g"); len(pending) != 1 || pending[0].ProducerID != 8 {
		t.Fatalf("pending %+v", pending)
	}
	if v := version(); v != before {
		t.Fatalf("refusals or an abort changed the group: version %d → %d", before, v)
	}
	// Generation fencing as for CommitGeneration.
	if _, err := c.CommitGeneration(ctx, "g", 5, at); err != nil {
		t.Fatal(err)
	}
	if err := c.TxnCommit(ctx, "g", 9, 0, 4, at); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("stale generation: %v", err)
	}
	for _, bad := range []struct {
		id    int64
		epoch int16
	}{{-1, 0}, {1, -1}} {
		if err := c.TxnCommit(ctx, "g", bad.id, bad.epoch, NoGeneration, at); !errors.Is(err, ErrInvalid) {
			t.Fatalf("producer %d epoch %d: %v", bad.id, bad.epoch, err)
		}
	}
	// Deleting the group forgets ended producers, not pending offsets.
	if err := c.DeleteGroup(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if err := c.TxnCommit(ctx, "g", 7, 0, NoGeneration, at); err != nil {
		t.Fatalf("after the group's deletion: %v", err)
	}
	if _, pending := txnState(t, c, "g"); len(pending) != 2 {
		t.Fatalf("pending after delete %+v", pending)
	}
}

// TestTxnRestart closes and reopens the coordinator with offsets pending,
// from the journal alone and from a snapshot taken while they were
// pending, with a marker before or after the snapshot.
func TestTxnRestart(t *testing.T) {
	ctx := context.Background()
	for _, snapshot := range []string{"none", "pending", "after end"} {
		t.Run(snapshot, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions()
			opts.Partitions = 2
			c := mustOpen(t, dir, opts)
			at := func(off int64) []OffsetCommit {
				return []OffsetCommit{{Topic: "t", Offset: off, LeaderEpoch: -1, Metadata: "x"}}
			}
			for _, g := range []string{"a", "b", "c"} {
				if err := c.Commit(ctx, g, at(1)); err != nil {
					t.Fatal(err)
				}
				if err := c.TxnCommit(ctx, g, 42, 1, NoGeneration, at(2)); err != nil {
					t.Fatal(err)
				}
			}
			// c's transaction ends before any snapshot; a's commit after it.
			if err := c.EndTxn(ctx, "c", 42, 1, true); err != nil {
				t.Fatal(err)
			}
			if snapshot != "none" {
				if snapshot == "after end" {
					if err := c.EndTxn(ctx, "a", 42, 2, true); err != nil {
						t.Fatal(err)
					}
				}
				if err := c.Snapshot(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c = mustOpen(t, dir, opts)
			want := map[string]struct {
				committed int64
				pending   int
			}{"a": {1, 1}, "b": {1, 1}, "c": {2, 0}}
			if snapshot == "after end" {
				want["a"] = struct {
					committed int64
					pending   int
				}{2, 0}
			}
			for g, w := range want {
				got, pending := txnState(t, c, g)
				if got != w.committed || len(pending) != w.pending {
					t.Fatalf("group %s after reopen: committed %d pending %+v, want %d and %d pending", g, got, pending, w.committed, w.pending)
				}
			}
			if err := c.TxnCommit(ctx, "b", 42, 0, NoGeneration, at(9)); !errors.Is(err, ErrProducerFenced) {
				t.Fatalf("epoch fencing after reopen: %v", err)
			}
			if err := c.EndTxn(ctx, "a", 42, 2, true); err != nil {
				t.Fatal(err)
			}
			if err := c.EndTxn(ctx, "b", 42, 2, false); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c = mustOpen(t, dir, opts)
			defer c.Close()
			for g, w := range map[string]int64{"a": 2, "b": 1, "c": 2} {
				if got, pending := txnState(t, c, g); got != w || len(pending) != 0 {
					t.Fatalf("group %s at last: committed %d pending %+v, want %d", g, got, pending, w)
				}
			}
			o, _, _ := c.Fetch("a", "t", 0)
			if o.Metadata != "x" {
				t.Fatalf("metadata %q", o.Metadata)
			}
		})
	}
}

// TestTxnFormat: a directory moves to formatTxn before its first
// transactional record, so that a release that does not know the records
// refuses it by its format; one without transactions stays at format 2.
// A directory whose records outran its meta file (a follower's crash) is
// moved at Open.
func TestTxnFormat(t *testing.T) {
	ctx := context.Background()
	format := func(dir string) int {
		t.Helper()
		m, _, err := readMeta(dir)
		if err != nil {
			t.Fatal(err)
		}
		return m.Format
	}
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	if err := c.Commit(ctx, "g", []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	if f := format(dir); f != dataFormat {
		t.Fatalf("format %d before any transaction, want %d", f, dataFormat)
	}
	if err := c.TxnCommit(ctx, "g", 1, 0, NoGeneration, []OffsetCommit{{Topic: "t", Offset: 2}}); err != nil {
		t.Fatal(err)
	}
	if f := format(dir); f != formatTxn {
		t.Fatalf("format %d after a transaction, want %d", f, formatTxn)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The meta file put back at format 2, as if the record came first.
	m, _, _ := readMeta(dir)
	m.Format = dataFormat
	if err := writeMeta(dir, m); err != nil {
		t.Fatal(err)
	}
	if rep, err := Check(dir, testOptions()); err != nil || rep.Format != dataFormat {
		t.Fatalf("Check: %+v %v", rep, err)
	}
	if f := format(dir); f != dataFormat {
		t.Fatalf("Check wrote the meta file: format %d", f)
	}
	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	if f := format(dir); f != formatTxn {
		t.Fatalf("format %d after Open found transactional records, want %d", f, formatTxn)
	}
	if _, pending := txnState(t, c, "g"); len(pending) != 1 {
		t.Fatalf("pending %+v", pending)
	}
}

// TestTxnKeepsLaterCommit: as in Kafka, the offset written last wins: a
// commit marker leaves a partition committed after its transaction's
// TxnCommit (plainly, or by another transaction written later) as it is,
// across a restart from a snapshot too; its other partitions it commits.
func TestTxnKeepsLaterCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	at := func(p int32, off int64) OffsetCommit {
		return OffsetCommit{Topic: "t", Partition: p, Offset: off, LeaderEpoch: -1}
	}
	fetch := func(p int32) int64 {
		t.Helper()
		o, ok, err := c.Fetch("g", "t", p)
		if err != nil || !ok {
			t.Fatalf("fetch t/%d: %v %v", p, ok, err)
		}
		return o.Offset
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A plain commit after the transaction's, with a restart between it
	// and the marker.
	must(c.TxnCommit(ctx, "g", 1, 0, NoGeneration, []OffsetCommit{at(0, 10), at(1, 11)}))
	must(c.Commit(ctx, "g", []OffsetCommit{at(0, 20)}))
	must(c.Snapshot(ctx))
	must(c.Close())
	c = mustOpen(t, dir, testOptions())
	defer func() { c.Close() }()
	if _, pending := txnState(t, c, "g"); len(pending) != 2 {
		t.Fatalf("pending after the restart: %+v", pending)
	}
	must(c.EndTxn(ctx, "g", 1, 0, true))
	if a, b := fetch(0), fetch(1); a != 20 || b != 11 {
		t.Fatalf("after the marker: t/0 %d (want the later commit, 20), t/1 %d (want 11)", a, b)
	}
	// Two transactions, producer 2's written first: the one written later
	// wins, whichever ends first; an aborted one supersedes nothing.
	for epoch, tc := range []struct {
		name        string
		first       int64 // the producer whose marker comes first
		commitThree bool  // producer 3's marker commits
		want        int64
	}{
		{"the earlier transaction ends last", 3, true, 40},
		{"the later transaction ends last", 2, true, 60},
		{"the later transaction aborts", 3, false, 70},
	} {
		e := int16(epoch)
		must(c.TxnCommit(ctx, "g", 2, e, NoGeneration, []OffsetCommit{at(0, 30+20*int64(epoch))}))
		must(c.TxnCommit(ctx, "g", 3, e, NoGeneration, []OffsetCommit{at(0, 40+20*int64(epoch))}))
		for _, producer := range []int64{tc.first, 5 - tc.first} {
			must(c.EndTxn(ctx, "g", producer, e, producer == 2 || tc.commitThree))
		}
		if got := fetch(0); got != tc.want {
			t.Fatalf("%s: t/0 %d, want %d", tc.name, got, tc.want)
		}
	}
	if _, pending := txnState(t, c, "g"); len(pending) != 0 {
		t.Fatalf("pending at the end: %+v", pending)
	}
}
