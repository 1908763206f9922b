package log

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// poison marks the handle failed after a write or sync error. wal cannot
// be trusted after that: after a failed write its memory keeps the failed
// entry, after a failed sync its last index has moved on. So the wal
// handle is closed, and the files are cut back right away, so that even a
// crash before Recover cannot bring the failed batch back. Recover
// repeats the cut and reopens.
func (l *Log) poison(cause error) error {
	l.files.Lock()
	defer l.files.Unlock()
	l.poisoned.Store(true)
	err := l.errorf("%w", cause)
	l.logger.Error("log: write or sync failed, the handle is poisoned until it recovers",
		"err", cause.Error(), "last_index", l.lastRecord.Load())
	if l.wal != nil {
		if cerr := closeWAL(l.wal); cerr != nil {
			l.logger.Warn("log: close of the failed wal handle", "err", cerr.Error())
		}
		l.wal = nil
	}
	// Cut the segment whatever became of the ring: the failed batch may
	// be whole in it, and wal.Close just synced it.
	rerr := errors.Join(restoreFiles(l.dir, l.lastBatch.Load(), l.opts.partition()), l.forgetFailed())
	if rerr != nil {
		l.logger.Warn("log: cut back after the failed write failed, will retry on recovery", "err", rerr.Error())
	}
	return err
}

// forgetFailed makes sure that the sync ring never gives back the batch
// whose write failed: the ring's copy of it, whole if only its sync
// failed, is overwritten where the lap's next record goes. The copies of
// the acknowledged batches before it stay, which the segment may still
// need.
func (l *Log) forgetFailed() error {
	if l.ring == nil {
		return nil
	}
	return locate(l.ring.forget(), l.opts.partition())
}

// Recover closes the wal handle, cuts the segment files back to the last
// acknowledged batch (removing what a failed batch wrote, even if it reached the
// disk), repairs the tail and reopens. Append and TruncateFront call it
// themselves on a poisoned log; calling it on a healthy log is harmless.
// On failure the log stays poisoned.
func (l *Log) Recover() error {
	if l.closed {
		return l.errorf("recover: %w", ErrClosed)
	}
	if err := l.recover(); err != nil {
		return l.errorf("recover: %w", err)
	}
	return nil
}

func (l *Log) recover() error {
	l.files.Lock()
	defer l.files.Unlock()
	wasPoisoned := l.poisoned.Swap(true) // true until the reopen below succeeds
	if l.wal != nil {
		if err := closeWAL(l.wal); err != nil {
			l.logger.Warn("log: close of the wal handle before recovery", "err", err.Error())
		}
		l.wal = nil
	}
	lastRecord, lastBatch, firstRecord := l.lastRecord.Load(), l.lastBatch.Load(), l.firstRecord.Load()
	if err := errors.Join(restoreFiles(l.dir, lastBatch, l.opts.partition()), l.forgetFailed()); err != nil {
		return err
	}
	if err := l.openWAL(nil); err != nil {
		return err
	}
	l.cycled = 0
	if got, gotBatch := l.lastRecord.Load(), l.lastBatch.Load(); gotBatch != lastBatch || (got != lastRecord && lastBatch != 0) {
		// openWAL stored what it found; keep ours, and give up on this handle.
		l.lastRecord.Store(lastRecord)
		l.lastBatch.Store(lastBatch)
		l.firstRecord.Store(firstRecord)
		closeWAL(l.wal)
		l.wal = nil
		return fmt.Errorf("reopened with lastRecord index %d (entry %d), want %d (entry %d)", got, gotBatch, lastRecord, lastBatch)
	}
	l.poisoned.Store(false)
	if wasPoisoned {
		l.logger.Info("log: recovered after a failed write", "last_index", lastRecord)
	}
	return nil
}

// restoreFiles finishes an interrupted truncation and cuts the segment
// files back to the batch at wal index lastBatch.
func restoreFiles(dir string, lastBatch uint64, partition int) error {
	if _, err := finishTruncation(dir); err != nil {
		return locate(err, partition)
	}
	return cutBack(dir, lastBatch, partition)
}

// cutBack removes every byte written after the batch at wal index
// lastBatch: the segment files that start after lastBatch+1, and the end
// of the file holding it. It parses the files rather than trusting wal's memory. An empty
// segment starting at lastBatch+1 is kept (wal reads it as "last index
// is lastBatch"). The directory and the cut file are synced. (A crash between
// the two can leave whole entries of the failed batch in the older
// segment; nothing can order a remove and a truncate atomically.)
func cutBack(dir string, lastBatch uint64, partition int) error {
	st, err := readDirState(dir)
	if err != nil {
		return locate(err, partition)
	}
	segs := st.segments
	removed := false
	for len(segs) > 0 && segs[len(segs)-1].index > lastBatch+1 {
		if err := os.Remove(segs[len(segs)-1].path); err != nil {
			return locate(err, partition)
		}
		segs, removed = segs[:len(segs)-1], true
	}
	if removed {
		if err := SyncDir(dir); err != nil {
			return locate(err, partition)
		}
	}
	if len(segs) == 0 {
		if lastBatch > 0 {
			return &CorruptError{Partition: partition, File: segmentName(lastBatch), Batch: lastBatch, Err: errMissing}
		}
		return nil // wal.Open creates the first segment
	}
	return cutSegment(segs[len(segs)-1], lastBatch, partition)
}

// cutSegment truncates the segment to end with the batch at wal index
// lastBatch (to nothing if it starts at lastBatch+1), checking every
// entry it keeps.
func cutSegment(seg segmentFile, lastBatch uint64, partition int) error {
	data, err := readSegment(seg.path, nil)
	if err != nil {
		return locate(err, partition)
	}
	var size int
	if seg.index <= lastBatch {
		res, _ := scanEntries(data, seg.index, partition, 0, 0, math.MaxUint64, lastBatch, nil)
		if want := lastBatch - seg.index + 1; uint64(res.entries) != want {
			why := res.bad
			if why == nil {
				why = errMissing
			}
			return &CorruptError{Partition: partition, File: seg.name(), Batch: seg.index + uint64(res.entries), Offset: int64(res.end), Err: why}
		}
		size = res.end
	}
	if size == len(data) {
		return nil
	}
	f, err := os.OpenFile(seg.path, os.O_WRONLY, 0)
	if err != nil {
		return locate(err, partition)
	}
	err = f.Truncate(int64(size))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return locate(fmt.Errorf("cut %s back to index %d: %w", filepath.Base(seg.path), lastBatch, err), partition)
	}
	return nil
}
