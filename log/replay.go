package log

import "fmt"

// Replay calls fn for every record with index >= from, in index order, up
// to LastIndex. It reads the segment files directly, one whole file at a
// time, and checks every batch it reads: damage is an ErrCorrupt error
// naming partition, segment file and index. An error from fn stops the
// replay and is returned as is.
//
// e.Payload aliases the segment's bytes, which Replay does not reuse: it
// stays valid after fn returns, for as long as the caller keeps it (a
// loader may hand records to other goroutines without copying them).
// Replay must be called by the log's owner, never alongside Append.
func (l *Log) Replay(from uint64, fn func(index uint64, e Entry) error) error {
	if l.closed {
		return l.errorf("replay: %w", ErrClosed)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil replay function", ErrInvalid)
	}
	last, lastBatch := l.lastRecord.Load(), l.lastBatch.Load()
	from = max(from, l.firstRecord.Load())
	if from > last {
		return nil
	}
	st, err := readDirState(l.dir)
	if err != nil {
		return locate(err, l.opts.partition())
	}
	segs := st.segments
	// The segment holding from: the last one that starts at or before it.
	i := len(segs) - 1
	for ; i >= 0; i-- {
		first, err := segmentFirstIndex(segs[i])
		if err != nil {
			return locate(err, l.opts.partition())
		}
		if first != 0 && first <= from {
			break
		}
	}
	if i < 0 {
		name := ""
		if len(segs) > 0 {
			name = segs[0].name()
		}
		return &CorruptError{Partition: l.opts.partition(), File: name, Record: from, Err: errMissing}
	}
	next := segs[i].index // wal index expected next
	var prevLast uint64
	for ; i < len(segs) && next <= lastBatch; i++ {
		s := segs[i]
		if s.index != next {
			return l.corrupt(s.name(), next, 0, errSegmentGap)
		}
		data, err := readSegment(s.path, nil)
		if err != nil {
			return l.errorf("replay: %w", err)
		}
		res, err := scanEntries(data, s.index, l.opts.partition(), 0, prevLast, from, lastBatch, fn)
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
		if res.last != 0 {
			prevLast = res.last
		}
	}
	if next <= lastBatch || prevLast < last {
		name := segmentName(next)
		if len(segs) > 0 {
			name = segs[len(segs)-1].name()
		}
		return l.corrupt(name, next, 0, errMissing)
	}
	return nil
}

// corrupt returns the CorruptError of damage at wal index batch of a
// segment.
func (l *Log) corrupt(segment string, batch uint64, offset int, why error) error {
	return &CorruptError{Partition: l.opts.partition(), File: segment, Batch: batch, Offset: int64(offset), Err: why}
}
