package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// crashState is what a crash of a live log leaves on disk, taken while
// the log is open: the sync ring as it was after the first rings appends,
// and the segment files after all of them. An append's segment write
// comes before its ring write, so the batches after the first rings are
// in flight: in the segment, not yet in the ring.
type crashState struct {
	dir  string
	want []record // acknowledged: in the ring, or synced
	ring []byte
	lap  ringLap
	tail segmentFile
	// lapStart is the byte offset in the tail of the lap's first batch,
	// starts that of each batch; acked is the tail's size once the last
	// acknowledged batch was written.
	lapStart, acked int
	starts          []int
}

// liveCrash appends batches of ten records to a log in a fresh directory
// and returns what a crash after the acked-th and inflight more would
// leave (a state, in a directory that nothing has open).
func liveCrash(t *testing.T, opts Options, acked, inflight int) crashState {
	t.Helper()
	live := t.TempDir()
	l := mustOpen(t, live, opts)
	defer mustClose(t, l)
	var st crashState
	for i := range acked {
		st.want = append(st.want, mustAppendBatch(t, l, testEntries(i*10, 10))...)
	}
	st.ring = mustReadFile(t, filepath.Join(live, ringName))
	st.acked = int(l.tailSize)
	for i := range inflight {
		mustAppendBatch(t, l, testEntries((acked+i)*10, 10))
	}
	st.dir = t.TempDir()
	copyDir(t, live, st.dir)
	if err := os.WriteFile(filepath.Join(st.dir, ringName), st.ring, 0o640); err != nil {
		t.Fatal(err)
	}
	st.lap = readLap(st.ring)
	segs := segmentFiles(t, st.dir)
	st.tail = segs[len(segs)-1]
	st.lapStart = -1
	data := mustReadFile(t, st.tail.path)
	for pos, index := 0, st.tail.index; pos < len(data); index++ {
		if index == st.lap.first {
			st.lapStart = pos
		}
		st.starts = append(st.starts, pos)
		n, w := binary.Uvarint(data[pos:])
		pos += w + int(n)
	}
	return st
}

// damageTail replaces the tail segment's bytes from..to with zeros, or
// cuts it at from when to is -1.
func (st crashState) damageTail(t *testing.T, from, to int) {
	t.Helper()
	data := mustReadFile(t, st.tail.path)
	if to < 0 {
		data = data[:from]
	} else {
		clear(data[from:to])
	}
	if err := os.WriteFile(st.tail.path, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

// TestRingRestoresWhatTheSegmentLost: after a power cut, the last segment
// keeps any subset of the pages written since it was last synced, and
// Open restores the batches the sync ring holds, dropping the batch in
// flight; Inspect reports the same without changing anything.
func TestRingRestoresWhatTheSegmentLost(t *testing.T) {
	const page = 4096
	opts := testOptions(t, 1<<20)
	for _, tt := range []struct {
		name     string
		inflight int
		damage   func(st crashState) (from, to int)
	}{
		{"every page since the lap started lost", 0, func(st crashState) (int, int) { return st.lapStart, -1 }},
		{"the batch in flight kept, the pages before it lost", 1, func(st crashState) (int, int) { return st.lapStart, st.acked }},
		{"a middle page lost, later pages kept", 1, func(st crashState) (int, int) { return 2 * page, 3 * page }},
		{"the first page lost, the rest kept", 0, func(st crashState) (int, int) { return 0, page }},
		{"nothing lost", 0, func(st crashState) (int, int) { return 0, 0 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := liveCrash(t, opts, 60, tt.inflight)
			if st.lapStart != 0 || st.acked < 4*page || len(st.lap.frames) != 60 {
				t.Fatalf("the lap holds %d batches from byte %d, the tail %d bytes: want 60 from 0, over 4 pages", len(st.lap.frames), st.lapStart, st.acked)
			}
			from, to := tt.damage(st)
			st.damageTail(t, from, to)
			var inspected []record
			rep, err := Inspect(st.dir, -1, collect(&inspected))
			if err != nil || rep.LastIndex != st.want[len(st.want)-1].Index {
				t.Fatalf("Inspect = %+v, %v", rep, err)
			}
			checkRecords(t, "Inspect", inspected, st.want)
			l := mustOpen(t, st.dir, opts)
			checkRecords(t, "Replay", replayAll(t, l, 0), st.want)
			want := append(st.want, mustAppend(t, l, testEntries(900, 3))...)
			mustClose(t, l)
			l = mustOpen(t, st.dir, opts)
			checkRecords(t, "Replay after reopen", replayAll(t, l, 0), want)
			mustClose(t, l)
		})
	}
}

// TestRingTornRecord: the ring's last record is torn (its write was in
// flight), and the segment lost its batches: Open keeps every batch
// before it.
func TestRingTornRecord(t *testing.T) {
	opts := testOptions(t, 1<<20)
	st := liveCrash(t, opts, 12, 0)
	last := st.lap.frames[len(st.lap.frames)-1]
	end := bytes.Index(st.ring, last) + len(last)
	clear(st.ring[end-5 : end])
	if err := os.WriteFile(filepath.Join(st.dir, ringName), st.ring, 0o640); err != nil {
		t.Fatal(err)
	}
	st.damageTail(t, st.lapStart, -1)
	l := mustOpen(t, st.dir, opts)
	checkRecords(t, "Replay", replayAll(t, l, 0), st.want[:len(st.want)-10])
	mustClose(t, l)
}

// TestRingRefusesWhatItCannotExplain: damage the ring cannot account for
// is corruption, named where it is: two whole batches after damage, past
// the ring (only one can be in flight); damage before the lap, in
// batches synced to their segment; a ring that starts after the
// segments' last whole batch.
func TestRingRefusesWhatItCannotExplain(t *testing.T) {
	const page = 4096
	t.Run("two batches past the ring", func(t *testing.T) {
		st := liveCrash(t, testOptions(t, 1<<20), 60, 2)
		st.damageTail(t, 2*page, 3*page)
		checkCorrupt(t, st.dir, testOptions(t, 1<<20), st.tail.name(), errPastRing)
	})
	t.Run("damage before the lap", func(t *testing.T) {
		opts := testOptions(t, 1<<20)
		opts.ringSize = 2048 // laps of a few batches: the tail is synced when one ends
		st := liveCrash(t, opts, 40, 0)
		if st.lapStart < 2*page {
			t.Fatalf("the lap starts at byte %d of the tail", st.lapStart)
		}
		st.damageTail(t, page, page+100)
		checkCorrupt(t, st.dir, opts, st.tail.name(), errFrameCRC)
	})
	t.Run("ring after the segments", func(t *testing.T) {
		opts := testOptions(t, 1<<20)
		opts.ringSize = 2048
		st := liveCrash(t, opts, 40, 0)
		// The segment ends cleanly, a whole batch before the lap.
		st.damageTail(t, st.starts[st.lap.first-st.tail.index-1], -1)
		checkCorrupt(t, st.dir, opts, ringName, errRingGap)
	})
}

// checkCorrupt checks that Inspect and Open both refuse dir, naming file
// and reason, and change nothing.
func checkCorrupt(t *testing.T, dir string, opts Options, file string, why error) {
	t.Helper()
	before := mustReadFile(t, filepath.Join(dir, ringName))
	_, ierr := Inspect(dir, -1, nil)
	_, oerr := Open(dir, opts)
	for _, err := range []error{ierr, oerr} {
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.File != file || !errors.Is(err, why) {
			t.Fatalf("Inspect: %v; Open: %v; want a CorruptError in %s: %v", ierr, oerr, file, why)
		}
	}
	if !bytes.Equal(before, mustReadFile(t, filepath.Join(dir, ringName))) {
		t.Fatal("the ring changed")
	}
}

// TestRingForgetsAFailedWrite: a batch whose sync into the ring failed,
// after its copy reached the file whole, is not restored by the next Open:
// the failure overwrites that copy, and the acknowledged batches before
// it keep theirs.
func TestRingForgetsAFailedWrite(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(t, 1<<20)
	l := mustOpen(t, dir, opts)
	defer l.Close()
	want := mustAppend(t, l, testEntries(0, 20))
	acked := l.lastBatch.Load()
	// The next batch reaches the segment and the ring, and then the
	// ring's fdatasync "fails": put leaves its place as it was.
	failed := testEntries(100, 3)
	l.buf = appendBatchFrame(l.buf[:0], l.opts.journalTag(), l.LastIndex()+1, failed)
	if err := l.wal.Write(acked+1, l.buf); err != nil {
		t.Fatal(err)
	}
	pos, next := l.ring.pos, l.ring.next
	if err := l.ring.put(acked+1, l.buf); err != nil {
		t.Fatal(err)
	}
	l.ring.pos, l.ring.next = pos, next
	if lap := readLap(mustReadFile(t, filepath.Join(dir, ringName))); lap.lastBatch() != acked+1 {
		t.Fatalf("the ring's lap ends at %d", lap.lastBatch())
	}
	l.poison(errors.New("injected"))
	if lap := readLap(mustReadFile(t, filepath.Join(dir, ringName))); lap.lastBatch() != acked {
		t.Fatalf("the ring holds batches %d-%d after the failure, want up to %d", lap.first, lap.lastBatch(), acked)
	}
	// A crash now, with the segment's unsynced pages lost: the next Open
	// has what was acknowledged, and the failed batch nowhere.
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	segs := segmentFiles(t, crashed)
	if err := os.Truncate(segs[len(segs)-1].path, 0); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, crashed, opts)
	checkRecords(t, "Replay after the crash", replayAll(t, c, 0), want)
	mustClose(t, c)
	// The log itself recovers and goes on, in the same lap.
	want = append(want, mustAppend(t, l, testEntries(200, 2))...)
	checkRecords(t, "Replay after recovery", replayAll(t, l, 0), want)
	if lap := readLap(mustReadFile(t, filepath.Join(dir, ringName))); lap.first != 1 || lap.lastBatch() != acked+2 {
		t.Fatalf("the ring holds batches %d-%d, want 1-%d", lap.first, lap.lastBatch(), acked+2)
	}
}

// TestRingUnsafeNoSyncRestoresAndClears: opened with UnsafeNoSync after a
// crash of a run with syncs, the log still restores what the ring holds,
// and then clears it, so that no lap outlives the run that kept it.
func TestRingUnsafeNoSyncRestoresAndClears(t *testing.T) {
	st := liveCrash(t, testOptions(t, 1<<20), 60, 0)
	st.damageTail(t, st.lapStart, -1)
	opts := testOptions(t, 1<<20)
	opts.UnsafeNoSync = true
	l := mustOpen(t, st.dir, opts)
	checkRecords(t, "Replay", replayAll(t, l, 0), st.want)
	if lap := readLap(mustReadFile(t, filepath.Join(st.dir, ringName))); len(lap.frames) != 0 {
		t.Fatalf("the ring still holds batches %d-%d", lap.first, lap.lastBatch())
	}
	mustAppend(t, l, testEntries(900, 3))
	mustClose(t, l)
}

// TestRingDamageInAClosedSegment: wal synced a segment as it closed it, so
// damage in it is corruption, even where the ring still holds a copy of
// the damaged batch from before the segment was closed.
func TestRingDamageInAClosedSegment(t *testing.T) {
	opts := testOptions(t, 8<<10)
	live := t.TempDir()
	l := mustOpen(t, live, opts)
	defer l.Close()
	for i := 0; l.lastBatch.Load() == 0 || l.tailStart.Load() != l.lastBatch.Load()+1; i++ {
		mustAppendBatch(t, l, testEntries(i*10, 10)) // until a batch closes its segment
	}
	dir := t.TempDir()
	copyDir(t, live, dir)
	lap := readLap(mustReadFile(t, filepath.Join(dir, ringName)))
	segs := segmentFiles(t, dir)
	closed := segs[len(segs)-2]
	if len(lap.frames) < 2 || lap.first < closed.index {
		t.Fatalf("segments %v, lap %d-%d: want a lap in the closed segment", segmentStarts(segs), lap.first, lap.lastBatch())
	}
	data := mustReadFile(t, closed.path)
	res, _ := scanEntries(data, closed.index, testPartition, 0, 0, 0, lap.first+1, nil)
	clear(data[res.end-100 : res.end-84]) // inside the lap's second batch
	if err := os.WriteFile(closed.path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	checkCorrupt(t, dir, opts, closed.name(), errFrameCRC)
}

// TestRingEndingInASkip: the lap ends with a batch of no records (SkipTo),
// and the batch in flight after it reached the segment whole, after a
// lost page: a crash state, restored.
func TestRingEndingInASkip(t *testing.T) {
	opts := testOptions(t, 1<<20)
	live := t.TempDir()
	l := mustOpen(t, live, opts)
	defer l.Close()
	var want []record
	for i := range 30 {
		want = append(want, mustAppendBatch(t, l, testEntries(i*10, 10))...)
	}
	if err := l.SkipTo(l.LastIndex() + 100); err != nil {
		t.Fatal(err)
	}
	ring := mustReadFile(t, filepath.Join(live, ringName))
	mustAppendBatch(t, l, testEntries(1000, 3)) // in flight
	dir := t.TempDir()
	copyDir(t, live, dir)
	if err := os.WriteFile(filepath.Join(dir, ringName), ring, 0o640); err != nil {
		t.Fatal(err)
	}
	segs := segmentFiles(t, dir)
	data := mustReadFile(t, segs[len(segs)-1].path)
	clear(data[100:4196]) // a page early in the lap lost
	if err := os.WriteFile(segs[len(segs)-1].path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, dir, opts)
	checkRecords(t, "Replay", replayAll(t, c, 0), want)
	if next := c.LastIndex() + 1; next != want[len(want)-1].Index+100 {
		t.Fatalf("the next index is %d, want %d, past the skip", next, want[len(want)-1].Index+100)
	}
	mustClose(t, c)
}

// TestRingOfAnotherJournal: a ring whose copies differ from the segments'
// batches (left or copied from another journal) is refused, never
// restored.
func TestRingOfAnotherJournal(t *testing.T) {
	opts := testOptions(t, 1<<20)
	otherDir := t.TempDir()
	other := mustOpen(t, otherDir, opts)
	for i := range 60 {
		mustAppendBatch(t, other, testEntries(5000+i*10, 10))
	}
	ring := mustReadFile(t, filepath.Join(otherDir, ringName))
	mustClose(t, other)
	st := liveCrash(t, opts, 40, 0)
	st.damageTail(t, st.starts[20], -1)
	if err := os.WriteFile(filepath.Join(st.dir, ringName), ring, 0o640); err != nil {
		t.Fatal(err)
	}
	checkCorrupt(t, st.dir, opts, ringName, errRingDiffers)
}

// FuzzReadLap feeds arbitrary bytes as a sync ring file: readLap never
// panics, and the lap it finds holds whole frames of consecutive wal
// indexes that start at byte 0 and are written back exactly as a ring
// would write them, with a stray record (if any) past them.
func FuzzReadLap(f *testing.F) {
	dir := f.TempDir()
	r, _, err := openRing(dir, 4096)
	if err != nil {
		f.Fatal(err)
	}
	for i := range 3 {
		if err := r.put(uint64(5+i), appendBatchFrame(nil, 0, uint64(10+i), testEntries(i, 1))); err != nil {
			f.Fatal(err)
		}
	}
	r.close()
	f.Add(mustReadFile(f, filepath.Join(dir, ringName)))
	f.Add(make([]byte, 64))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		lap := readLap(data)
		if len(lap.frames) == 0 {
			if lap.stray != -1 {
				t.Fatalf("no lap, but a stray record at %d", lap.stray)
			}
			return
		}
		if lap.first == 0 {
			t.Fatal("a lap of wal index 0")
		}
		pos := 0
		for _, fr := range lap.frames {
			if len(fr) < minFrameSize {
				t.Fatalf("a frame of %d bytes", len(fr))
			}
			pos += ringHeader + len(fr)
		}
		if pos > len(data) {
			t.Fatalf("the lap's records take %d bytes of %d", pos, len(data))
		}
		if lap.stray != -1 && (lap.stray < int64(pos) || lap.stray >= int64(len(data))) {
			t.Fatalf("stray record at %d, the lap ends at %d of %d", lap.stray, pos, len(data))
		}
		// The same frames, written as a ring writes them with the lap's
		// nonce, are the bytes the lap was read from.
		nonce := binary.LittleEndian.Uint64(data[4:])
		var re []byte
		for i, fr := range lap.frames {
			rec := binary.LittleEndian.AppendUint32(nil, 0)
			rec = binary.LittleEndian.AppendUint64(rec, nonce)
			rec = binary.LittleEndian.AppendUint64(rec, lap.first+uint64(i))
			rec = binary.LittleEndian.AppendUint32(rec, uint32(len(fr)))
			rec = append(rec, fr...)
			binary.LittleEndian.PutUint32(rec, crc32.Checksum(rec[4:], castagnoli))
			re = append(re, rec...)
		}
		if !bytes.Equal(re, data[:pos]) {
			t.Fatal("the lap's records do not re-encode as the bytes they were read from")
		}
	})
}
