package log

import (
	"math"
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
	if len(segs) == 0 {
		rep.FirstIndex = 1 // what wal.Open creates
		return rep, nil
	}
	next := segs[0].index
	var prevLast uint64
	count := func(index uint64, e Entry) error {
		rep.Records++
		if fn != nil {
			return fn(index, e)
		}
		return nil
	}
	for i, s := range segs {
		tail := i == len(segs)-1
		if s.index != next {
			return rep, &CorruptError{Partition: -1, Segment: s.name(), Index: next, Err: errSegmentGap}
		}
		data, err := readSegment(s.path, nil)
		if err != nil {
			return rep, locate(err, -1)
		}
		rep.Bytes += int64(len(data))
		res, err := scanEntries(data, s.index, partition, prevLast, 0, math.MaxUint64, count)
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
		if res.bad != nil {
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
	rep.LastIndex = prevLast
	if rep.FirstIndex == 0 {
		rep.FirstIndex = prevLast + 1
	}
	if clean != nil && (clean.last != rep.LastIndex || clean.lastBatch != next-1) {
		return rep, &CorruptError{Partition: -1, Segment: cleanName, Index: rep.LastIndex, Err: errCleanDiffers}
	}
	return rep, nil
}
