package log

import (
	"fmt"
)

// Replay calls fn for every entry with index >= from, in index order, up
// to LastIndex; from below FirstIndex starts at FirstIndex. It reads the
// segment files directly, one whole file at a time into one reused
// buffer, and checks every frame it passes to fn: damage is an ErrCorrupt
// error naming partition, segment file and index. An error from fn stops
// the replay and is returned as is.
//
// payload aliases the read buffer: it is valid only until fn returns.
// Replay must be called by the log's owner, never alongside Append.
func (l *Log) Replay(from uint64, fn func(index uint64, typ byte, payload []byte) error) error {
	if l.closed {
		return l.errorf("replay: %w", ErrClosed)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil replay function", ErrInvalid)
	}
	first, last := l.first.Load(), l.last.Load()
	from = max(from, first)
	if from > last {
		return nil
	}
	st, err := readDirState(l.dir)
	if err != nil {
		return locate(err, l.opts.Partition)
	}
	segs := st.segments
	i := len(segs) - 1 // the segment holding from
	for i >= 0 && segs[i].index > from {
		i--
	}
	if i < 0 {
		return l.corrupt(segmentName(from), from, 0, errMissing)
	}
	var buf []byte
	next := segs[i].index
	for ; i < len(segs) && next <= last; i++ {
		s := segs[i]
		if s.index != next {
			return l.corrupt(s.name(), next, 0, errSegmentGap)
		}
		data, err := readSegment(s.path, buf)
		if err != nil {
			return l.errorf("replay: %w", err)
		}
		buf = data
		res, err := scanEntries(data, s.index, from, last, fn)
		if err != nil {
			return err
		}
		if res.bad != nil {
			return l.corrupt(s.name(), s.index+uint64(res.entries), res.end, res.bad)
		}
		if res.entries == 0 && i < len(segs)-1 {
			return l.corrupt(s.name(), s.index, 0, errSegmentEmpty)
		}
		next = s.index + uint64(res.entries)
	}
	if next <= last {
		name := segmentName(next)
		if len(segs) > 0 {
			name = segs[len(segs)-1].name()
		}
		return l.corrupt(name, next, 0, errMissing)
	}
	return nil
}

func (l *Log) corrupt(segment string, index uint64, offset int, why error) error {
	return &CorruptError{Partition: l.opts.Partition, Segment: segment, Index: index, Offset: int64(offset), Err: why}
}
