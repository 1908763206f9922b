package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// lapPastClean returns a CorruptError if lap holds a batch past the last
// one a clean close recorded: Close synced everything the lap held.
func lapPastClean(lap ringLap, clean *cleanMarker, partition int) error {
	if clean == nil || len(lap.frames) == 0 || lap.lastBatch() <= clean.lastBatch {
		return nil
	}
	return &CorruptError{Partition: partition, File: ringName, Batch: clean.lastBatch + 1,
		Err: fmt.Errorf("%w: %s records entry %d as the last, the sync ring holds entries up to %d", errCleanDiffers, cleanName, clean.lastBatch, lap.lastBatch())}
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
		return 0, false, &CorruptError{Partition: partition, File: ringName, Batch: lap.lastBatch() + 1, Offset: lap.stray, Err: errRingStray}
	}
	res, _ := scanEntries(lap.entries(lap.first), lap.first, partition, 0, 0, 0, math.MaxUint64, nil)
	if res.bad != nil || res.entries != len(lap.frames) {
		// Each frame passed the ring's checksum: only a writer's bug
		// gets here.
		return 0, false, &CorruptError{Partition: partition, File: ringName, Batch: lap.first + uint64(res.entries), Err: errRingBatch}
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
		return 0, false, &CorruptError{Partition: partition, File: ringName, Batch: keep + 1, Err: errRingGap}
	}
	// The batches restored must go on where the segments' records stop.
	if res, _ := scanEntries(lap.entries(keep+1), keep+1, partition, 0, prevLast, 0, math.MaxUint64, nil); res.bad != nil {
		return 0, false, &CorruptError{Partition: partition, File: ringName, Batch: keep + 1 + uint64(res.entries), Err: fmt.Errorf("%w: %w", errRingBatch, res.bad)}
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
			return 0, 0, &CorruptError{Partition: partition, File: s.name(), Batch: next, Err: errSegmentGap}
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
			return 0, 0, &CorruptError{Partition: partition, File: s.name(), Batch: next, Offset: int64(res.end), Err: res.bad}
		}
		// The batch in flight after the lap may have reached the segment
		// whole, after pages that did not.
		inflight := next <= lap.lastBatch()+1
		for q := findFrame(data, res.end+1, after); q >= 0; q = findFrame(data, q+1, after) {
			last := frameLast(data, q)
			if !inflight || last < 0 {
				return 0, 0, &CorruptError{Partition: partition, File: s.name(), Batch: next, Offset: int64(q), Err: errPastRing}
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
			return &CorruptError{Partition: partition, File: ringName, Batch: index, Err: errRingDiffers}
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
