package log

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
)

// Report describes a log directory as Inspect found it.
type Report struct {
	Segments   int    // segment files
	Batches    int    // whole batches (wal entries) that pass their checksum
	Records    int    // records in them
	Bytes      int64  // total size of the segment files
	FirstIndex uint64 // as Log.FirstIndex would report after Open
	LastIndex  uint64 // as Log.LastIndex would report after Open

	// Clean reports a clean-close marker: the log was closed cleanly, so
	// any damage at its end is corruption, not a torn write.
	Clean bool

	// TornTailBytes is what Open would cut off the last segment (0 if
	// nothing), starting at TornTailOffset in TornTailSegment.
	TornTailBytes   int64
	TornTailSegment string
	TornTailOffset  int64

	// Leftovers names the files of an interrupted truncation (.START,
	// .END, .TEMP) that Open would finish; the segments above are counted
	// as they will be afterwards.
	Leftovers []string

	// RingBatches counts the batches Open would restore from the sync
	// ring after a crash, where the last segment lost them (they are
	// counted in Batches and Records too); what Open would cut off the
	// segments first is in the TornTail fields.
	RingBatches int
}

// Inspect reads the log in dir without changing anything, for operators'
// verify and dump commands. It calls fn (if not nil) for every record in
// order; partition is the partition of a format-1 log's records (see
// Options.Partition). A torn tail, which Open would cut, is reported in
// the Report, not as an error; damage before the tail, or anywhere after a
// clean close, is an ErrCorrupt error naming segment file and index
// (Partition -1). An error from fn stops the inspection and is returned as
// is. e.Payload is valid only until fn returns.
func Inspect(dir string, partition int, fn func(index uint64, e Entry) error) (Report, error) {
	var rep Report
	clean, err := readCleanMarker(dir)
	if err != nil {
		return rep, locate(err, -1)
	}
	rep.Clean = clean != nil
	st, err := readDirState(dir)
	rep.Leftovers = st.leftovers
	if err != nil {
		return rep, locate(err, -1)
	}
	segs := st.segments
	rep.Segments = len(segs)
	// After a crash, the batches of the sync ring's lap past the whole
	// batches of the segments replace what follows them (see Open).
	keep, restore := uint64(math.MaxUint64), false
	var lap ringLap
	if data, err := os.ReadFile(filepath.Join(dir, ringName)); err == nil {
		lap = readLap(data)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return rep, locate(err, -1)
	}
	if err := lapPastClean(lap, clean, -1); err != nil {
		return rep, err
	}
	if clean == nil {
		var k uint64
		if k, restore, err = planRestore(segs, lap, partition); err != nil {
			return rep, locate(err, -1)
		}
		if restore {
			keep = k
		}
	}
	if len(segs) == 0 && !restore {
		rep.FirstIndex = 1 // what wal.Open creates
		return rep, nil
	}
	next := uint64(1)
	if len(segs) > 0 {
		next = segs[0].index
	}
	var prevLast uint64
	var tailSize int64 // of the last segment read
	count := func(index uint64, e Entry) error {
		rep.Records++
		if fn != nil {
			return fn(index, e)
		}
		return nil
	}
	for i, s := range segs {
		tail := i == len(segs)-1 || (restore && s.index == keep+1)
		if restore && s.index > keep+1 {
			rep.Segments = i // Open removes the rest before it restores the ring's batches
			break
		}
		if s.index != next {
			return rep, &CorruptError{Partition: -1, Segment: s.name(), Index: next, Err: errSegmentGap}
		}
		data, err := readSegment(s.path, nil)
		if err != nil {
			return rep, locate(err, -1)
		}
		rep.Bytes += int64(len(data))
		tailSize = int64(len(data))
		res, err := scanEntries(data, s.index, partition, prevLast, 0, keep, count)
		rep.Batches += res.entries
		next += uint64(res.entries)
		if res.first != 0 && rep.FirstIndex == 0 {
			rep.FirstIndex = res.first
		}
		if res.last != 0 {
			prevLast = res.last
		}
		if err != nil {
			return rep, err
		}
		if restore && res.end < len(data) {
			// Open cuts what follows keep, whole or not.
			rep.TornTailBytes = int64(len(data) - res.end)
			rep.TornTailSegment = s.name()
			rep.TornTailOffset = int64(res.end)
		} else if res.bad != nil {
			if !tail || clean != nil || findFrame(data, res.end+1, prevLast) >= 0 {
				why := res.bad
				if tail && clean != nil {
					why = errAfterClean
				}
				return rep, &CorruptError{Partition: -1, Segment: s.name(), Index: next, Offset: int64(res.end), Err: why}
			}
			rep.TornTailBytes = int64(len(data) - res.end)
			rep.TornTailSegment = s.name()
			rep.TornTailOffset = int64(res.end)
		}
		if res.entries == 0 && !tail {
			return rep, &CorruptError{Partition: -1, Segment: s.name(), Index: s.index, Err: errSegmentEmpty}
		}
	}
	if restore {
		res, err := scanEntries(lap.entries(keep+1), keep+1, partition, prevLast, 0, math.MaxUint64, count)
		if err != nil {
			return rep, err
		}
		rep.Batches += res.entries
		rep.RingBatches = res.entries
		next = keep + 1 + uint64(res.entries)
		if res.first != 0 && rep.FirstIndex == 0 {
			rep.FirstIndex = res.first
		}
		if res.last != 0 {
			prevLast = res.last
		}
	}
	rep.LastIndex = prevLast
	if rep.FirstIndex == 0 {
		rep.FirstIndex = prevLast + 1
	}
	if clean != nil && (clean.last != rep.LastIndex || clean.lastBatch != next-1 || clean.tailSize != tailSize) {
		return rep, &CorruptError{Partition: -1, Segment: cleanName, Index: rep.LastIndex, Err: errCleanDiffers}
	}
	return rep, nil
}
