package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// The sync ring: where a batch in the last segment becomes durable.
//
// wal appends to its segment files, so every fsync of a segment must
// write the file's new size as well as its data: two writes to the
// device, one after the other, where a file written in place needs one.
// So Append writes each batch to its segment without a sync, and a copy
// of it into a file of fixed size written round and round, and syncs only
// that file (fdatasync: the data alone). wal syncs a segment when it closes
// it, so everything below the last segment is durable on its own; the
// ring holds the batches of the last segment since it was last synced.
//
// The file is written in full with zeros when it is made, so that a sync
// of it never writes its size or allocates blocks. A lap starts at byte 0
// when everything before its first batch is durable in the segments:
// after wal closes a segment, at Open, and when the next batch does not
// fit before the end of the file (the last segment is then fsynced
// instead). A failed write overwrites the place of its batch's copy, and
// the lap goes on. Every record of a lap carries the lap's random nonce
// and the next wal index, so a read from byte 0 finds exactly the current
// lap: the first record of another lap, a torn record or zeros end it.
//
//	record: | crc32c u32 | nonce u64 | wal index u64 | len u32 | frame |  (LE)
//	crc32c:  of the 20 bytes after it and the frame
//
// The frame is the batch's frame as the segment holds it (see the package
// documentation). After a crash, Open compares the lap with the segments:
// where the last segment lost batches that the lap holds (the page cache
// never wrote them, or wrote some of their pages), it cuts the segment
// back to its last whole batch and appends the lap's batches after it
// (see planRestore).
const (
	ringName   = "RING"
	ringHeader = 4 + 8 + 8 + 4
)

// ring is the open sync ring of a journal; its owner is the Log's owner.
type ring struct {
	path  string
	f     *os.File
	size  int64 // the bytes a lap may use
	pos   int64 // where the next record goes, in the current lap
	nonce uint64
	// next is the wal index the next record must carry, in the current
	// lap; 0 when a lap must start (restart).
	next uint64
	buf  []byte
}

// ringLap is the lap a ring file holds: frames for the wal indexes first,
// first+1, ... in order.
type ringLap struct {
	first  uint64
	frames [][]byte
	// stray is the offset of a whole record of the lap's nonce past its
	// end (the lap ended at a damaged record, not at its last), -1 if none.
	stray int64
}

// lastBatch returns the wal index of the lap's last batch, first-1 if it
// holds none.
func (r ringLap) lastBatch() uint64 { return r.first + uint64(len(r.frames)) - 1 }

// entries returns the lap's batches from wal index from on as wal's
// binary entries, as a segment starting at from would hold them.
func (r ringLap) entries(from uint64) []byte {
	var b []byte
	for i, f := range r.frames {
		if r.first+uint64(i) >= from {
			b = binary.AppendUvarint(b, uint64(len(f)))
			b = append(b, f...)
		}
	}
	return b
}

// ringSize is the length of one lap for segments of segmentSize bytes: a
// lap normally ends with its segment, so two segments' worth leaves room.
func ringSize(segmentSize int) int64 {
	return min(max(2*int64(segmentSize), 64<<10), 64<<20)
}

// openRing opens (or creates) the ring file of the journal in dir, and
// reads the lap it holds. A file shorter than size is filled up with
// zeros and synced; a new one is synced with the directory.
func openRing(dir string, size int64) (*ring, ringLap, error) {
	path := filepath.Join(dir, ringName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640); err == nil {
			err = errors.Join(f.Sync(), SyncDir(dir))
			if err != nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return nil, ringLap{}, fmt.Errorf("open %s: %w", ringName, err)
	}
	data, err := io.ReadAll(f)
	if err == nil && int64(len(data)) < size {
		err = fill(f, int64(len(data)), size)
	}
	if err != nil {
		f.Close()
		return nil, ringLap{}, fmt.Errorf("%s: %w", ringName, err)
	}
	return &ring{path: path, f: f, size: size}, readLap(data), nil
}

// fill writes zeros to f from byte from up to byte to, and syncs it: the
// ring is written in place from then on, so a sync never has to write its
// size or allocate blocks.
func fill(f *os.File, from, to int64) error {
	zeros := make([]byte, min(to-from, 1<<20))
	for off := from; off < to; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off); err != nil {
			return err
		}
	}
	return f.Sync()
}

// readLap returns the lap that data, a ring file, holds from byte 0.
func readLap(data []byte) ringLap {
	var lap ringLap
	var nonce uint64
	pos := 0
	for pos+ringHeader <= len(data) {
		h := data[pos : pos+ringHeader]
		n := binary.LittleEndian.Uint32(h[20:])
		if uint64(n) > uint64(len(data)-pos-ringHeader) || n < minFrameSize {
			break
		}
		body := data[pos+4 : pos+ringHeader+int(n)]
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(h) {
			break
		}
		rn, index := binary.LittleEndian.Uint64(h[4:]), binary.LittleEndian.Uint64(h[12:])
		if len(lap.frames) == 0 {
			if index == 0 {
				break
			}
			nonce, lap.first = rn, index
		} else if rn != nonce || index != lap.lastBatch()+1 {
			break
		}
		lap.frames = append(lap.frames, data[pos+ringHeader:pos+ringHeader+int(n)])
		pos += ringHeader + int(n)
	}
	lap.stray = -1
	if len(lap.frames) > 0 {
		var nb [8]byte
		binary.LittleEndian.PutUint64(nb[:], nonce)
		for q := pos + 1; q < len(data); {
			i := bytes.Index(data[q:], nb[:])
			if i < 0 {
				break
			}
			h := q + i - 4
			q += i + 1
			if h < pos || h+ringHeader > len(data) {
				continue
			}
			n := binary.LittleEndian.Uint32(data[h+20:])
			if n < minFrameSize || uint64(n) > uint64(len(data)-h-ringHeader) {
				continue
			}
			if crc32.Checksum(data[h+4:h+ringHeader+int(n)], castagnoli) == binary.LittleEndian.Uint32(data[h:]) &&
				binary.LittleEndian.Uint64(data[h+12:]) > lap.lastBatch() {
				lap.stray = int64(h)
				break
			}
		}
	}
	return lap
}

// restart makes the next record start a new lap: everything appended so
// far is durable in the segments.
func (r *ring) restart() { r.next = 0 }

// fits reports whether a frame of n bytes fits in the current lap, or at
// the start of a new one if one must start.
func (r *ring) fits(n int) bool {
	pos := r.pos
	if r.next == 0 {
		pos = 0
	}
	return pos+ringHeader+int64(n) <= r.size
}

// put writes the frame of the batch at wal index index and syncs its data;
// the caller checked that it fits. The batch must be the next of the lap,
// or everything before it durable in the segments if a lap starts.
func (r *ring) put(index uint64, frame []byte) error {
	if r.next == 0 {
		r.pos, r.nonce, r.next = 0, rand.Uint64(), index
	}
	if index != r.next {
		return fmt.Errorf("%s: batch %d written after %d", ringName, index, r.next-1)
	}
	b := r.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, r.nonce)
	b = binary.LittleEndian.AppendUint64(b, index)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(frame)))
	b = append(b, frame...)
	binary.LittleEndian.PutUint32(b, crc32.Checksum(b[4:], castagnoli))
	if cap(b) <= 1<<20 {
		r.buf = b
	}
	if _, err := r.f.WriteAt(b, r.pos); err != nil {
		return fmt.Errorf("write %s: %w", ringName, err)
	}
	if err := datasync(r.f); err != nil {
		return fmt.Errorf("sync %s: %w", ringName, err)
	}
	r.pos += int64(len(b))
	r.next++
	return nil
}

// clear overwrites the start of the file, so that it holds no lap, and
// syncs it. Open does so for a log opened with UnsafeNoSync, which keeps
// no lap, once what the lap held is synced in the segments.
func (r *ring) clear() error {
	r.restart()
	return r.zero(0)
}

// forget overwrites, and syncs, the place where the record of the lap's
// next batch goes: after a failed write of that batch, its copy (whole,
// if the write failed only in its sync) must never be read back as part
// of the lap. The acknowledged batches before it keep their copies.
func (r *ring) forget() error {
	if r.next == 0 || r.pos+ringHeader > r.size {
		return nil // no lap, a new one not started, or no room for the record
	}
	return r.zero(r.pos)
}

// zero overwrites the record header at pos and syncs the file.
func (r *ring) zero(pos int64) error {
	if _, err := r.f.WriteAt(make([]byte, ringHeader), pos); err != nil {
		return fmt.Errorf("clear %s: %w", ringName, err)
	}
	if err := datasync(r.f); err != nil {
		return fmt.Errorf("clear %s: %w", ringName, err)
	}
	return nil
}

// close closes the file; a nil ring is none.
func (r *ring) close() error {
	if r == nil {
		return nil
	}
	return r.f.Close()
}

// lapPastClean returns a CorruptError if lap holds a batch past the last
// one a clean close recorded: Close synced everything the lap held.
func lapPastClean(lap ringLap, clean *cleanMarker, partition int) error {
	if clean == nil || len(lap.frames) == 0 || lap.lastBatch() <= clean.lastBatch {
		return nil
	}
	return &CorruptError{Partition: partition, Segment: ringName, Index: clean.lastBatch + 1, Err: errCleanDiffers}
}

// planRestore decides what lap, read from the ring after a crash, adds to
// segs (a journal's segment files, oldest first): it returns the wal
// index of the last whole batch the segments keep, and restore, true when
// the lap holds batches after it, which Open appends once it has cut the
// segments back to keep.
//
// The segments are read from the one that holds the lap's first batch.
// Their whole batches there may stop short of the lap's end: the page
// cache wrote some of their pages, or none, before the crash, as the ring
// made them durable instead. Damage there is not corruption if the lap
// holds the batch that is damaged; but a whole batch after the damage is,
// if it is not the one batch that can have been in flight after the lap
// (written to its segment, and not yet synced into the ring).
func planRestore(segs []segmentFile, lap ringLap, partition int) (keep uint64, restore bool, err error) {
	if len(lap.frames) == 0 {
		return 0, false, nil
	}
	if lap.stray >= 0 {
		return 0, false, &CorruptError{Partition: partition, Segment: ringName, Index: lap.lastBatch() + 1, Offset: lap.stray, Err: errRingStray}
	}
	res, _ := scanEntries(lap.entries(lap.first), lap.first, partition, 0, 0, 0, math.MaxUint64, nil)
	if res.bad != nil || res.entries != len(lap.frames) {
		// Each frame passed the ring's checksum: only a writer's bug
		// gets here.
		return 0, false, &CorruptError{Partition: partition, Segment: ringName, Index: lap.first + uint64(res.entries), Err: errRingBatch}
	}
	// Past the damage, whole batches must not start past the lap's last
	// record (nor past its last batch's first index: a batch of no
	// records, SkipTo's, ends before it starts).
	after := res.last
	if f, err := decodeFrame(lap.frames[len(lap.frames)-1]); err == nil {
		if first, err := frameFirstIndex(f, lap.lastBatch()); err == nil {
			after = max(after, first)
		}
	}
	next, prevLast := uint64(1), uint64(0) // a journal with no segment file holds nothing
	if len(segs) > 0 {
		if next, prevLast, err = wholeBatches(segs, lap, after, partition); err != nil {
			return 0, false, err
		}
	}
	keep = next - 1
	if lap.lastBatch() <= keep {
		return keep, false, nil // the segments hold the whole lap
	}
	if lap.first > keep+1 {
		return 0, false, &CorruptError{Partition: partition, Segment: ringName, Index: keep + 1, Err: errRingGap}
	}
	// The batches restored must go on where the segments' records stop.
	if res, _ := scanEntries(lap.entries(keep+1), keep+1, partition, 0, prevLast, 0, math.MaxUint64, nil); res.bad != nil {
		return 0, false, &CorruptError{Partition: partition, Segment: ringName, Index: keep + 1 + uint64(res.entries), Err: fmt.Errorf("%w: %w", errRingBatch, res.bad)}
	}
	return keep, true, nil
}

// wholeBatches reads segs from the one holding the lap's first batch and
// returns the wal index after their last whole batch, and the last record
// index up to it. A segment wal closed was synced before the next one was
// made, so only the last can hold damage a crash explains, and whole
// batches after it must not start past after, but the one batch in flight
// after the lap. A whole batch the lap holds too must be the lap's copy,
// byte for byte.
func wholeBatches(segs []segmentFile, lap ringLap, after uint64, partition int) (next, prevLast uint64, err error) {
	i := 0
	for i+1 < len(segs) && segs[i+1].index <= lap.first {
		i++
	}
	next = segs[i].index
	for k, s := range segs[i:] {
		last := i+k == len(segs)-1
		if s.index != next {
			return 0, 0, &CorruptError{Partition: partition, Segment: s.name(), Index: next, Err: errSegmentGap}
		}
		data, err := readSegment(s.path, nil)
		if err != nil {
			return 0, 0, locate(err, partition)
		}
		res, _ := scanEntries(data, s.index, partition, 0, prevLast, 0, math.MaxUint64, nil)
		if err := sameAsLap(data[:res.end], s, lap, partition); err != nil {
			return 0, 0, err
		}
		next += uint64(res.entries)
		if res.last != 0 {
			prevLast = res.last
		}
		if res.bad == nil {
			continue
		}
		if !last || next < lap.first {
			// Synced: not torn.
			return 0, 0, &CorruptError{Partition: partition, Segment: s.name(), Index: next, Offset: int64(res.end), Err: res.bad}
		}
		// The batch in flight after the lap may have reached the segment
		// whole, after pages that did not.
		inflight := next <= lap.lastBatch()+1
		for q := findFrame(data, res.end+1, after); q >= 0; q = findFrame(data, q+1, after) {
			last := frameLast(data, q)
			if !inflight || last < 0 {
				return 0, 0, &CorruptError{Partition: partition, Segment: s.name(), Index: next, Offset: int64(q), Err: errPastRing}
			}
			inflight, after = false, uint64(last)
		}
	}
	return next, prevLast, nil
}

// sameAsLap checks that the whole entries of segment s, data, that the
// lap holds too are its copies: a lap that does not belong to these
// segments is never restored.
func sameAsLap(data []byte, s segmentFile, lap ringLap, partition int) error {
	for pos, index := 0, s.index; pos < len(data); index++ {
		size, w := binary.Uvarint(data[pos:])
		frame := data[pos+w : pos+w+int(size)]
		pos += w + int(size)
		if index < lap.first || index > lap.lastBatch() {
			continue
		}
		if !bytes.Equal(frame, lap.frames[index-lap.first]) {
			return &CorruptError{Partition: partition, Segment: ringName, Index: index, Err: errRingDiffers}
		}
	}
	return nil
}

// frameLast returns the last record index of the whole entry at offset q
// of data (found by findFrame), or -1 if it cannot be read.
func frameLast(data []byte, q int) int64 {
	size, w := binary.Uvarint(data[q:])
	f, err := decodeFrame(data[q+w : q+w+int(size)])
	if err != nil {
		return -1
	}
	_, last, err := frameRecords(f, 0, 0, nil)
	if err != nil {
		return -1
	}
	return int64(last)
}
