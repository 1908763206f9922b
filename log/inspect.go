package log

import (
	"math"
)

// Report describes a log directory as Inspect found it.
type Report struct {
	Segments   int    // segment files
	Entries    int    // whole entries that pass their checksum
	Bytes      int64  // total size of the segment files
	FirstIndex uint64 // as Log.FirstIndex would report after Open
	LastIndex  uint64 // as Log.LastIndex would report after Open

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
// verify and dump commands. It calls fn (if not nil) for every whole entry
// in order. A torn tail, which Open would cut, is reported in the Report,
// not as an error; damage before the tail is an ErrCorrupt error naming
// segment file and index (Partition -1). An error from fn stops the
// inspection and is returned as is. payload is valid only until fn
// returns.
func Inspect(dir string, fn func(index uint64, typ byte, payload []byte) error) (Report, error) {
	var rep Report
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
	rep.FirstIndex = segs[0].index
	next := segs[0].index
	var buf []byte
	for i, s := range segs {
		tail := i == len(segs)-1
		if s.index != next {
			return rep, &CorruptError{Partition: -1, Segment: s.name(), Index: next, Err: errSegmentGap}
		}
		data, err := readSegment(s.path, buf)
		if err != nil {
			return rep, locate(err, -1)
		}
		buf = data
		rep.Bytes += int64(len(data))
		res, err := scanEntries(data, s.index, 0, math.MaxUint64, fn)
		rep.Entries += res.entries
		next += uint64(res.entries)
		rep.LastIndex = next - 1
		if err != nil {
			return rep, err
		}
		if res.bad != nil {
			if !tail || findFrame(data, res.end+1) >= 0 {
				return rep, &CorruptError{Partition: -1, Segment: s.name(), Index: next, Offset: int64(res.end), Err: res.bad}
			}
			rep.TornTailBytes = int64(len(data) - res.end)
			rep.TornTailSegment = s.name()
			rep.TornTailOffset = int64(res.end)
		}
		if res.entries == 0 && !tail {
			return rep, &CorruptError{Partition: -1, Segment: s.name(), Index: s.index, Err: errSegmentEmpty}
		}
	}
	return rep, nil
}
