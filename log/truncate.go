package log

import (
	"fmt"
	"os"
)

// TruncateFront removes the whole segments all of whose records come
// before record index index, but never the last segment. It is meant for
// after snapshots covering index-1. The records from the start of the
// segment holding index stay, so FirstIndex becomes the first index of the
// oldest remaining segment, which may be below index. index must be in
// [1, LastIndex+1]; below FirstIndex it removes nothing. It writes no data:
// it lists the directory, unlinks the files, oldest first, and syncs the
// directory once if it removed any.
//
// A failed unlink or directory sync returns an error but does not poison
// the handle: the files left are a contiguous run of segments ending at
// the last one either way, FirstIndex names the oldest of them, and a
// crash before the sync leaves such a run too, which Open accepts.
//
// Unlike the other methods, TruncateFront may run on another goroutine
// while the owner appends: unlinking segments can take milliseconds each
// (more on a filesystem mounted with discard), and commits need not wait
// for it. It refuses a poisoned log, whose recovery is the owner's.
func (l *Log) TruncateFront(index uint64) error {
	l.files.Lock()
	defer l.files.Unlock()
	if l.closed {
		return l.errorf("truncate front: %w", ErrClosed)
	}
	if l.poisoned.Load() {
		// Recovery is the owner's, on its next Append.
		return l.errorf("truncate front refused: the log is poisoned until the next append recovers it")
	}
	if index == 0 || index > l.lastRecord.Load()+1 {
		return fmt.Errorf("%w: truncate front to %d, past the next index %d", ErrInvalid, index, l.lastRecord.Load()+1)
	}
	if index <= l.firstRecord.Load() {
		return nil // nothing before it is held
	}
	st, err := readDirState(l.dir)
	if err != nil {
		return l.errorf("truncate front to %d: %w", index, err)
	}
	if len(st.leftovers) > 0 {
		// Open finished them and nothing writes them since: someone else
		// is at work in the directory.
		return l.errorf("truncate front to %d: unexpected files %v", index, st.leftovers)
	}
	segs := st.segments
	n, firsts, err := l.segmentsBefore(segs, index)
	if err != nil {
		return l.errorf("truncate front to %d: %w", index, err)
	}
	if n == 0 {
		return nil
	}
	// Once open, wal only writes to and cycles its last segment; it opens
	// older ones only to read or truncate, which Log never asks of it (see
	// Log). So they can go behind its back: its list of segments goes
	// stale (about 100 bytes and a path per segment created since Open),
	// nothing consults it, and the next wal.Open lists the directory afresh.
	for i, s := range segs[:n] {
		if err := os.Remove(s.path); err != nil {
			if i > 0 {
				l.firstRecord.Store(firsts[i-1]) // segs[:i] are gone
			}
			return l.errorf("truncate front to %d: remove segment %d of %d: %w", index, i+1, n, err)
		}
	}
	l.firstRecord.Store(firsts[n-1])
	if err := SyncDir(l.dir); err != nil {
		return l.errorf("truncate front to %d: sync directory: %w", index, err)
	}
	return nil
}

// segmentsBefore returns how many segments, oldest first, hold only
// records below index, and the first record index of the segment after
// each of them. It never counts the last segment, which wal writes to,
// nor the last one holding a batch, which holds the last index.
func (l *Log) segmentsBefore(segs []segmentFile, index uint64) (int, []uint64, error) {
	n := 0
	var firsts []uint64
	for n+1 < len(segs) && segs[n].index < l.tailStart.Load() {
		next, err := segmentFirstIndex(segs[n+1])
		if err != nil {
			return 0, nil, err
		}
		if next == 0 || next > index {
			// An empty segment (only the tail can be one) must not be left
			// alone: the last index would be lost with the segment before
			// it, and a reopen would give indexes again.
			break
		}
		firsts = append(firsts, next)
		n++
	}
	return n, firsts, nil
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	First uint64 // record index where its first batch starts; 0 if it holds none
	Bytes int64
}

// Segments describes the segment files, oldest first. Like TruncateFront,
// it may run beside the owner.
func (l *Log) Segments() ([]SegmentInfo, error) {
	l.files.Lock()
	defer l.files.Unlock()
	if l.closed {
		return nil, l.errorf("segments: %w", ErrClosed)
	}
	st, err := readDirState(l.dir)
	if err != nil {
		return nil, l.errorf("segments: %w", err)
	}
	out := make([]SegmentInfo, len(st.segments))
	for i, s := range st.segments {
		fi, err := os.Stat(s.path)
		if err != nil {
			return nil, l.errorf("segments: %w", err)
		}
		first, err := segmentFirstIndex(s)
		if err != nil {
			return nil, l.errorf("segments: %w", err)
		}
		out[i] = SegmentInfo{First: first, Bytes: fi.Size()}
	}
	return out, nil
}

// SegmentsBefore returns how many segment files TruncateFront(index) would
// remove. Like TruncateFront, it may run beside the owner.
func (l *Log) SegmentsBefore(index uint64) (int, error) {
	l.files.Lock()
	defer l.files.Unlock()
	if l.closed {
		return 0, l.errorf("segments: %w", ErrClosed)
	}
	st, err := readDirState(l.dir)
	if err != nil {
		return 0, l.errorf("segments: %w", err)
	}
	n, _, err := l.segmentsBefore(st.segments, index)
	return n, err
}
