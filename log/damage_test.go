package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// damageBase is a closed log whose last segment the damage tests spoil.
type damageBase struct {
	dir     string
	opts    Options
	records []record
	segs    []segmentFile
	tail    []byte // the last segment file
	starts  []int  // byte offset of each entry of the last segment, and its end
}

func newDamageBase(t *testing.T, segmentSize, n int) damageBase {
	t.Helper()
	b := damageBase{dir: t.TempDir(), opts: testOptions(t, segmentSize)}
	l := mustOpen(t, b.dir, b.opts)
	// Append until there are n entries and the last segment holds two.
	for len(b.records) < n || len(b.starts) < 3 {
		b.records = append(b.records, mustAppend(t, l, testEntries(len(b.records), 1))...)
		b.segs = segmentFiles(t, b.dir)
		tail := b.segs[len(b.segs)-1]
		var err error
		if b.tail, err = os.ReadFile(tail.path); err != nil {
			t.Fatal(err)
		}
		b.starts = []int{0}
		for i := tail.index; ; i++ {
			res, err := scanEntries(b.tail, tail.index, 0, 0, 0, 0, i, nil)
			if err != nil || res.bad != nil {
				t.Fatalf("base log: %v %v", err, res.bad)
			}
			if res.end == b.starts[len(b.starts)-1] {
				break
			}
			b.starts = append(b.starts, res.end)
		}
	}
	mustClose(t, l)
	crash(t, b.dir)
	return b
}

// lastEntry is the byte range of the last entry of the last segment.
func (b damageBase) lastEntry() (start, end int) {
	return b.starts[len(b.starts)-2], b.starts[len(b.starts)-1]
}

// TestDamagedTail spoils the end of the last segment the ways a crash can
// (cut anywhere in the last entry, zeros, garbage): Open cuts exactly the
// damaged bytes, logs them, loses no earlier entry, and the log takes new
// appends that survive another reopen.
func TestDamagedTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	type damage struct {
		name  string
		spoil func(tail []byte) []byte // returns the new content of the last segment
		keep  int                      // records that must survive
	}
	for _, layout := range []struct {
		name              string
		segmentSize, size int
	}{
		{"one segment", 1 << 20, 12},
		{"many segments", 100, 14},
	} {
		t.Run(layout.name, func(t *testing.T) {
			b := newDamageBase(t, layout.segmentSize, layout.size)
			n := len(b.records)
			start, end := b.lastEntry()
			prev := b.starts[len(b.starts)-3]
			var table []damage
			for k := range end - start {
				table = append(table, damage{fmt.Sprintf("cut last entry at byte %d", k),
					func(tail []byte) []byte { return tail[:start+k] }, n - 1})
			}
			for _, z := range []int{1, 7, 4096} {
				table = append(table, damage{fmt.Sprintf("append %d zeros", z),
					func(tail []byte) []byte { return append(tail, make([]byte, z)...) }, n})
			}
			for _, g := range []int{1, 2, 37, 5000} {
				junk := garbage(g)
				table = append(table, damage{fmt.Sprintf("append %d bytes of garbage", g),
					func(tail []byte) []byte { return append(tail, junk...) }, n})
			}
			junk := garbage(300)
			table = append(table,
				damage{"cut last entry then zeros", func(tail []byte) []byte {
					return append(tail[:start+3], make([]byte, 512)...)
				}, n - 1},
				damage{"cut last entry then garbage", func(tail []byte) []byte {
					return append(tail[:start+3], junk...)
				}, n - 1},
				damage{"last entry zeroed in place", func(tail []byte) []byte {
					clear(tail[start:end])
					return tail
				}, n - 1},
				damage{"bit flip in the last entry (cannot be told from a torn write)", func(tail []byte) []byte {
					tail[end-5] ^= 0x04
					return tail
				}, n - 1},
				damage{"cut in the middle of the entry before", func(tail []byte) []byte {
					return tail[:prev+4]
				}, n - 2},
				damage{"huge length then nothing", func(tail []byte) []byte {
					return append(tail, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2)
				}, n},
				damage{"length 5 then nothing", func(tail []byte) []byte {
					return append(tail, 5, 1, 1, 0, 0, 0)
				}, n},
			)
			for _, d := range table {
				t.Run(d.name, func(t *testing.T) {
					checkTornTail(t, b, d.spoil(bytes.Clone(b.tail)), d.keep)
				})
			}
		})
	}
}

func checkTornTail(t *testing.T, b damageBase, spoiled []byte, keep int) {
	dir := t.TempDir()
	copyDir(t, b.dir, dir)
	tail := filepath.Join(dir, b.segs[len(b.segs)-1].name())
	if err := os.WriteFile(tail, spoiled, 0o640); err != nil {
		t.Fatal(err)
	}
	good := b.starts[keep-(len(b.records)-(len(b.starts)-1))] // bytes of the last segment that survive
	torn := int64(len(spoiled) - good)

	rep, err := Inspect(dir, -1, nil)
	if err != nil || rep.LastIndex != uint64(keep) || rep.TornTailBytes != torn {
		t.Fatalf("Inspect = %+v, %v; want LastIndex %d and %d torn bytes", rep, err, keep, torn)
	}
	if after, _ := os.ReadFile(tail); !bytes.Equal(after, spoiled) {
		t.Fatal("Inspect changed the file")
	}

	opts := b.opts
	var logs *testLogger
	opts.Logger, logs = newTestLogger(t)
	l := mustOpen(t, dir, opts)
	warn := logs.find("log: cut the torn batch at the end of the last segment")
	if torn == 0 && warn != nil {
		t.Fatalf("nothing to cut, but logged %v", warn)
	}
	if torn > 0 && (warn == nil || warn["dropped_bytes"].Int64() != torn ||
		warn["last_whole_index"].Uint64() != uint64(keep) || warn["log"].String() != "journal") {
		t.Fatalf("cut %d bytes after index %d, logged %v", torn, keep, warn)
	}
	if l.LastIndex() != uint64(keep) {
		t.Fatalf("LastIndex = %d, want %d", l.LastIndex(), keep)
	}
	want := slices.Clone(b.records[:keep])
	checkRecords(t, "Replay after repair", replayAll(t, l, 1), want)
	want = append(want, mustAppend(t, l, testEntries(500, 3))...)
	mustClose(t, l)

	l = mustOpen(t, dir, opts)
	checkRecords(t, "Replay after appending and reopening", replayAll(t, l, 1), want)
	mustClose(t, l)
	if rep, err := Inspect(dir, -1, nil); err != nil || rep.TornTailBytes != 0 || rep.Records != len(want) {
		t.Fatalf("Inspect after repair = %+v, %v", rep, err)
	}
}

// TestCorruption damages entries that were acknowledged long ago, in
// the last segment (followed by good entries) or an older one: Open
// refuses with a CorruptError naming the journal, segment file and batch,
// and leaves every byte and name of the directory as it found them;
// Inspect names the same place.
func TestCorruption(t *testing.T) {
	one := newDamageBase(t, 1<<20, 12)
	many := newDamageBase(t, 100, 14)
	if len(many.segs) < 4 {
		t.Fatalf("want 4 or more segments, have %d", len(many.segs))
	}
	// entryAt returns the byte offset of the i-th entry (from 0) of seg.
	entryAt := func(t *testing.T, seg segmentFile, i int) int {
		data, err := os.ReadFile(seg.path)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := scanEntries(data, seg.index, 0, 0, 0, 0, seg.index+uint64(i)-1, nil)
		return res.end
	}
	edit := func(f func(b []byte) []byte) func(string) error {
		return func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(path, f(b), 0o640)
		}
	}
	tests := []struct {
		name   string
		base   damageBase
		seg    int // which segment file to damage
		entry  int // which of its entries (from 0)
		damage func(off int) func(string) error
		reason error
		next   bool // the error names the segment after the damaged one
	}{
		{"bit flip in a payload, older segment", many, 0, 1,
			func(off int) func(string) error { return edit(func(b []byte) []byte { b[off+5] ^= 0x20; return b }) },
			errFrameCRC, false},
		{"bit flip in a checksum, older segment", many, 1, 0,
			func(off int) func(string) error {
				return edit(func(b []byte) []byte { b[off+int(b[off])] ^= 0x01; return b })
			},
			errFrameCRC, false},
		{"bit flip in a length, older segment", many, 2, 0,
			func(off int) func(string) error { return edit(func(b []byte) []byte { b[off] ^= 0x02; return b }) },
			nil, false},
		{"older segment cut short", many, 1, 1,
			func(off int) func(string) error { return edit(func(b []byte) []byte { return b[:off+3] }) },
			errEntryPastEOF, false},
		{"garbage after an older segment", many, 0, 4,
			func(off int) func(string) error { return edit(func(b []byte) []byte { return append(b, 0, 0, 0) }) },
			errEntryShort, false},
		{"older segment emptied", many, 1, 0,
			func(off int) func(string) error { return edit(func(b []byte) []byte { return nil }) },
			errSegmentEmpty, false},
		{"older segment removed", many, 1, 0,
			func(off int) func(string) error { return os.Remove },
			errSegmentGap, true},
		{"bit flip in a payload, middle of the last segment", one, 0, 3,
			func(off int) func(string) error { return edit(func(b []byte) []byte { b[off+4] ^= 0x80; return b }) },
			errFrameCRC, false},
		{"bit flip in a length, middle of the last segment", one, 0, 5,
			func(off int) func(string) error { return edit(func(b []byte) []byte { b[off] ^= 0x08; return b }) },
			nil, false},
		{"zeros in the middle of the last segment", one, 0, 2,
			func(off int) func(string) error {
				return edit(func(b []byte) []byte { clear(b[off : off+int(b[off])+1]); return b })
			},
			errEntryShort, false},
		{"bit flip in the first entry of the last of many segments", many, -1, 0,
			func(off int) func(string) error { return edit(func(b []byte) []byte { b[off+3] ^= 0x01; return b }) },
			errFrameCRC, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, tt.base.dir, dir)
			segs := segmentFiles(t, dir)
			seg := segs[(tt.seg+len(segs))%len(segs)]
			off := entryAt(t, seg, tt.entry)
			if err := tt.damage(off)(seg.path); err != nil {
				t.Fatal(err)
			}
			index := seg.index + uint64(tt.entry)
			if tt.next {
				seg = segs[(tt.seg+len(segs))%len(segs)+1]
			}

			checkErr := func(what string, err error, partition int) {
				t.Helper()
				var ce *CorruptError
				if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
					t.Fatalf("%s: err = %v, want a CorruptError", what, err)
				}
				if ce.Partition != partition || ce.File != seg.name() || ce.Batch != index {
					t.Fatalf("%s: error at partition %d, segment %s, batch %d; want %d, %s, %d (%v)",
						what, ce.Partition, ce.File, ce.Batch, partition, seg.name(), index, err)
				}
				if tt.reason != nil && !errors.Is(err, tt.reason) {
					t.Fatalf("%s: err = %v, want reason %q", what, err, tt.reason)
				}
				msg := err.Error()
				for _, part := range []string{"journal", seg.name(), fmt.Sprintf("batch %d", index)} {
					if !strings.Contains(msg, part) {
						t.Fatalf("%s: message %q does not name %q", what, msg, part)
					}
				}
			}

			_, err := Inspect(dir, -1, nil)
			checkErr("Inspect", err, -1)

			before := hashDir(t, dir)
			_, err = Open(dir, tt.base.opts)
			checkErr("Open", err, -1) // the journal
			if after := hashDir(t, dir); after != before {
				t.Fatalf("a refused Open changed the directory:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestInterruptedTruncation leaves the files of a TruncateFront or
// TruncateBack that crashed half way, with a torn tail on top: Open
// finishes the truncation as wal would and repairs the segment that is
// really the last.
func TestInterruptedTruncation(t *testing.T) {
	base := newDamageBase(t, 100, 30)
	segs := base.segs
	if len(segs) < 5 {
		t.Fatalf("want 5 or more segments, have %d", len(segs))
	}
	// from returns the bytes of seg from its entry at index on.
	from := func(seg segmentFile, index uint64) []byte {
		data, err := os.ReadFile(seg.path)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := scanEntries(data, seg.index, 0, 0, 0, 0, index-1, nil)
		return data[res.end:]
	}
	upTo := func(seg segmentFile, index uint64) []byte {
		data, err := os.ReadFile(seg.path)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := scanEntries(data, seg.index, 0, 0, 0, 0, index, nil)
		return data[:res.end]
	}
	mid, tail := segs[1], segs[len(segs)-1]
	tests := []struct {
		name        string
		files       map[string][]byte // written into the copy
		tornTail    string            // the file garbage is appended to
		first, last uint64
		err         error
	}{
		{"front, START in an older segment, torn tail",
			map[string][]byte{segmentName(mid.index+1) + ".START": from(mid, mid.index+1)},
			tail.name(), mid.index + 1, uint64(len(base.records)), nil},
		{"front, START in the last segment, torn START",
			map[string][]byte{segmentName(tail.index+1) + ".START": from(tail, tail.index+1)},
			segmentName(tail.index+1) + ".START", tail.index + 1, uint64(len(base.records)), nil},
		{"front, only the .TEMP was written",
			map[string][]byte{segmentName(mid.index+1) + ".START.TEMP": from(mid, mid.index+1)[:7]},
			tail.name(), 1, uint64(len(base.records)), nil},
		{"back, END in an older segment, torn END",
			map[string][]byte{segmentName(mid.index) + ".END": upTo(mid, mid.index+1)},
			segmentName(mid.index) + ".END", 1, mid.index + 1, nil},
		{"START and END together",
			map[string][]byte{segmentName(mid.index+1) + ".START": nil, segmentName(tail.index) + ".END": nil},
			"", 0, 0, errTruncation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, base.dir, dir)
			for name, data := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o640); err != nil {
					t.Fatal(err)
				}
			}
			if tt.tornTail != "" {
				f, err := os.OpenFile(filepath.Join(dir, tt.tornTail), os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.Write([]byte{0x20, 1, 2, 3, 0, 0, 0})
				f.Close()
			}
			rep, err := Inspect(dir, -1, nil)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Inspect: err = %v, want %v", err, tt.err)
				}
				if _, err := Open(dir, base.opts); !errors.Is(err, tt.err) || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open: err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil || rep.FirstIndex != tt.first || rep.LastIndex != tt.last || rep.TornTailBytes != 7 || len(rep.Leftovers) != len(tt.files) {
				t.Fatalf("Inspect = %+v, %v; want indexes %d-%d, 7 torn bytes, leftovers %d", rep, err, tt.first, tt.last, len(tt.files))
			}
			l := mustOpen(t, dir, base.opts)
			if l.FirstIndex() != tt.first || l.LastIndex() != tt.last {
				t.Fatalf("FirstIndex %d LastIndex %d, want %d %d", l.FirstIndex(), l.LastIndex(), tt.first, tt.last)
			}
			want := slices.Clone(base.records[tt.first-1 : tt.last])
			checkRecords(t, "Replay", replayAll(t, l, 0), want)
			want = append(want, mustAppend(t, l, testEntries(900, 3))...)
			mustClose(t, l)
			des, _ := os.ReadDir(dir)
			for _, de := range des {
				if len(de.Name()) != 20 && de.Name() != cleanName && de.Name() != ringName {
					t.Fatalf("leftover %s after Open", de.Name())
				}
			}
			l = mustOpen(t, dir, base.opts)
			checkRecords(t, "Replay after reopen", replayAll(t, l, 0), want)
			mustClose(t, l)
		})
	}
}

// alikeJournals makes the same appends to two journals, of IDs "ours" and
// "theirs", closed cleanly, whose segments start at the same indexes
// (three or more): only the tag tells their batches apart. opts is ours.
func alikeJournals(t *testing.T) (ours, theirs string, opts Options) {
	t.Helper()
	mk := func(id string) (string, Options) {
		dir := t.TempDir()
		opts := testOptions(t, 200)
		opts.JournalID = id
		l := mustOpen(t, dir, opts)
		mustAppend(t, l, testEntries(0, 30))
		mustClose(t, l)
		return dir, opts
	}
	ours, opts = mk("ours")
	theirs, _ = mk("theirs")
	segs, others := segmentFiles(t, ours), segmentFiles(t, theirs)
	if len(segs) < 3 || !slices.Equal(segmentStarts(segs), segmentStarts(others)) {
		t.Fatalf("segments %v and %v; want the same three or more", segmentStarts(segs), segmentStarts(others))
	}
	return ours, theirs, opts
}

// TestForeignJournal copies a segment of another journal whose indexes
// line up exactly with this one's (the same appends, so the same wal and
// record indexes): only the journal tag tells them apart, and Open
// refuses it, naming the segment, after a crash as after a clean close.
// A journal written before tags existed opens with one, and tags what it
// appends from then on.
func TestForeignJournal(t *testing.T) {
	ours, theirs, opts := alikeJournals(t)
	others := segmentFiles(t, theirs)
	for _, crashed := range []bool{false, true} {
		dir := t.TempDir()
		copyDir(t, ours, dir)
		if crashed {
			crash(t, dir)
		}
		victim := segmentFiles(t, dir)[1]
		if err := os.WriteFile(victim.path, mustReadFile(t, others[1].path), 0o640); err != nil {
			t.Fatal(err)
		}
		before := hashDir(t, dir)
		_, err := Open(dir, opts)
		var ce *CorruptError
		if !errors.Is(err, errForeignBatch) || !errors.As(err, &ce) || ce.File != victim.name() {
			t.Fatalf("Open with another journal's segment (crashed %v) = %v; want errForeignBatch naming %s", crashed, err, victim.name())
		}
		if hashDir(t, dir) != before {
			t.Fatal("a refused Open changed the directory")
		}
		// Without the tag to check (Inspect), the indexes alone pass.
		if _, err := Inspect(dir, -1, nil); err != nil {
			t.Fatalf("Inspect: %v", err)
		}
	}

	old := t.TempDir()
	untagged := testOptions(t, 200)
	l := mustOpen(t, old, untagged)
	want := mustAppend(t, l, testEntries(0, 10))
	mustClose(t, l)
	l = mustOpen(t, old, opts)
	want = append(want, mustAppend(t, l, testEntries(10, 10))...)
	mustClose(t, l)
	l = mustOpen(t, old, opts)
	checkRecords(t, "a journal tagged half way", replayAll(t, l, 1), want)
	mustClose(t, l)
}

// TestWholeFrameAtTheEndIsNotTorn: after a crash, a whole batch at the end
// of the last segment whose checksum passes but which does not continue
// the journal (an older batch again, or one that skips indexes) was
// written so: Open refuses it, naming the segment and batch, and cuts
// nothing; only bytes that fail to read are a torn end.
func TestWholeFrameAtTheEndIsNotTorn(t *testing.T) {
	opts := testOptions(t, 1<<20)
	base := t.TempDir()
	l := mustOpen(t, base, opts)
	for i := range 5 {
		mustAppendBatch(t, l, testEntries(i*2, 2))
	}
	mustClose(t, l)
	crash(t, base)
	seg := segmentFiles(t, base)[0]
	data := mustReadFile(t, seg.path)
	first, _ := scanEntries(data, 1, -1, 0, 0, 0, 1, nil)   // the first batch's bytes: data[:first.end]
	skip := appendBatchFrame(nil, 0, 20, testEntries(0, 1)) // records from 20, where 11 comes next
	for _, tc := range []struct {
		name  string
		frame []byte // a whole wal entry
		why   error
	}{
		{"the first batch again", data[:first.end], errIndexOrder},
		{"a batch that skips indexes", append(binary.AppendUvarint(nil, uint64(len(skip))), skip...), errIndexGap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := tc.frame
			dir := t.TempDir()
			copyDir(t, base, dir)
			path := segmentFiles(t, dir)[0].path
			if err := os.WriteFile(path, append(mustReadFile(t, path), frame...), 0o640); err != nil {
				t.Fatal(err)
			}
			before := hashDir(t, dir)
			_, err := Open(dir, opts)
			var ce *CorruptError
			if !errors.Is(err, tc.why) || !errors.As(err, &ce) || ce.File != seg.name() || ce.Batch != 6 {
				t.Fatalf("Open = %v; want %q naming segment %s, batch 6", err, tc.why, seg.name())
			}
			if hashDir(t, dir) != before {
				t.Fatal("the refused Open changed the directory")
			}
			if _, err := Inspect(dir, -1, nil); !errors.Is(err, tc.why) {
				t.Fatalf("Inspect = %v; want %q", err, tc.why)
			}
		})
	}
}

// TestUntaggedAfterTagged splices, after a crash, batches of a journal
// written before tags existed behind the tagged batches of one that got
// its tag half way, where their indexes continue exactly: the tag check
// passes them (untagged batches carry none), but a journal never writes
// an untagged batch once it has a tag, so Open refuses, naming the
// segment, and changes nothing.
func TestUntaggedAfterTagged(t *testing.T) {
	tagged := testOptions(t, 1<<20)
	tagged.JournalID = "ours"
	untagged := testOptions(t, 1<<20)

	ours := t.TempDir()
	l := mustOpen(t, ours, untagged)
	mustAppend(t, l, testEntries(0, 10))
	mustClose(t, l)
	l = mustOpen(t, ours, tagged)
	mustAppend(t, l, testEntries(10, 10))
	mustClose(t, l)

	theirs := t.TempDir()
	l = mustOpen(t, theirs, untagged)
	mustAppend(t, l, testEntries(0, 10))
	mustAppend(t, l, testEntries(100, 10))
	mustClose(t, l)

	segs, others := segmentFiles(t, ours), segmentFiles(t, theirs)
	if len(segs) != 1 || len(others) != 1 {
		t.Fatalf("segments %v and %v; want one each", segmentStarts(segs), segmentStarts(others))
	}
	// entryEnds returns the offset after each wal entry of data.
	entryEnds := func(data []byte) []int {
		var ends []int
		for pos := 0; pos < len(data); {
			size, w := binary.Uvarint(data[pos:])
			pos += w + int(size)
			ends = append(ends, pos)
		}
		return ends
	}
	a, b := mustReadFile(t, segs[0].path), mustReadFile(t, others[0].path)
	ea, eb := entryEnds(a), entryEnds(b)
	// Ours up to batch 15 (10 untagged, 5 tagged), then theirs' 16 to 20.
	spliced := append(append([]byte{}, a[:ea[14]]...), b[eb[14]:]...)
	crash(t, ours)
	if err := os.WriteFile(segs[0].path, spliced, 0o640); err != nil {
		t.Fatal(err)
	}
	before := hashDir(t, ours)
	_, err := Open(ours, tagged)
	var ce *CorruptError
	if !errors.Is(err, errUntaggedBatch) || !errors.As(err, &ce) || ce.File != segs[0].name() {
		t.Fatalf("Open with untagged batches after tagged ones = %v; want errUntaggedBatch naming %s", err, segs[0].name())
	}
	if hashDir(t, ours) != before {
		t.Fatal("a refused Open changed the directory")
	}
}

// TestForeignRingLap puts, after a crash, another journal's sync ring
// beside segments whose last one lost every page, where the ring's lap
// starts exactly where the segments' whole batches stop (the same appends,
// so the same indexes): nothing overlaps to compare, and only the tag
// tells the lap's batches apart. Open refuses, naming the ring, and
// changes nothing; it never restores them.
func TestForeignRingLap(t *testing.T) {
	ours, theirs, opts := alikeJournals(t)
	segs := segmentFiles(t, ours)
	if err := os.Remove(filepath.Join(ours, cleanName)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ours, ringName), mustReadFile(t, filepath.Join(theirs, ringName)), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segs[len(segs)-1].path, 0); err != nil {
		t.Fatal(err)
	}
	before := hashDir(t, ours)
	l, err := Open(ours, opts)
	if err == nil {
		mustClose(t, l)
	}
	var ce *CorruptError
	if !errors.Is(err, errForeignBatch) || !errors.As(err, &ce) || ce.File != ringName {
		t.Fatalf("Open with another journal's sync ring = %v; want errForeignBatch naming %s", err, ringName)
	}
	if hashDir(t, ours) != before {
		t.Fatal("a refused Open changed the directory")
	}
}
