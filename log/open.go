package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tidwall/wal"
)

// Open carries out the plan and returns the open log: it finishes any
// truncation that a crash interrupted, restores from the sync ring the
// batches the last segment lost, cuts a torn batch off the end of the
// last segment (logging what it dropped and restored), syncs, and removes
// the clean-close marker. Nothing may change the directory between
// PlanOpen and Open (its user holds the data directory's lock); Open
// fails if the journal it opens does not end where the plan said.
func (p *Plan) Open() (*Log, error) {
	dir, opts := p.dir, p.opts
	l := &Log{dir: dir, opts: opts, logger: opts.Logger.With("log", logName(opts.partition()))}
	if err := MakeDir(dir, SyncDir); err != nil {
		return nil, l.errorf("open: %w", err)
	}
	if p.cleanTmp {
		// A Close that crashed: not clean.
		if err := os.Remove(filepath.Join(dir, cleanName+".tmp")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, l.errorf("open: %w", err)
		}
	}
	clean := p.clean
	// With UnsafeNoSync the ring is read, if a run with syncs left one,
	// and then cleared: such a log keeps no lap.
	var err error
	if _, serr := os.Stat(filepath.Join(dir, ringName)); !opts.UnsafeNoSync || serr == nil {
		size := opts.syncRingSize()
		if opts.UnsafeNoSync {
			size = 0
		}
		if l.ring, _, err = openRing(dir, size); err != nil {
			return nil, l.errorf("open: %w", err)
		}
	}
	err = l.openRestoring(clean, p)
	if err == nil && (l.lastRecord.Load() != p.lastRecord || l.lastBatch.Load() != p.lastBatch) {
		closeWAL(l.wal)
		err = l.errorf("open: the journal ends at index %d (entry %d), planned %d (entry %d): the directory changed since it was planned",
			l.lastRecord.Load(), l.lastBatch.Load(), p.lastRecord, p.lastBatch)
	}
	if err == nil && opts.UnsafeNoSync && l.ring != nil {
		if err = l.ring.clear(); err != nil {
			closeWAL(l.wal)
			err = l.errorf("open: %w", err)
		}
		l.ring.close()
		l.ring = nil
	}
	if err != nil {
		l.ring.close()
		return nil, err
	}
	if clean != nil {
		// From here on a crash is not a clean close.
		if err := removeCleanMarker(dir); err != nil {
			closeWAL(l.wal)
			l.ring.close()
			return nil, l.errorf("open: %w", err)
		}
	}
	return l, nil
}

// openRestoring opens wal (openWAL) and, after a crash, appends what the
// sync ring's lap holds beyond the whole batches of the segments, after
// cutting them back to the last of those, as the plan says. After a clean
// close the segments hold everything the lap does.
func (l *Log) openRestoring(clean *cleanMarker, p *Plan) error {
	if clean != nil {
		return l.openWAL(clean)
	}
	restore, keep, lap := p.restore, p.keep, p.lap
	if restore {
		if _, err := finishTruncation(l.dir); err != nil {
			return locate(fmt.Errorf("finish interrupted truncation: %w", err), l.opts.partition())
		}
		if err := cutBack(l.dir, keep, l.opts.partition()); err != nil {
			return err
		}
	}
	if err := l.openWAL(nil); err != nil {
		return err
	}
	if !restore {
		return nil
	}
	if got := l.lastBatch.Load(); got != keep {
		closeWAL(l.wal)
		return &CorruptError{Partition: l.opts.partition(), File: ringName, Batch: got + 1, Err: errRingGap}
	}
	for i, frame := range lap.frames {
		batch := lap.first + uint64(i)
		if batch <= keep {
			continue
		}
		f, err := decodeFrame(frame)
		var first, last uint64
		if err == nil {
			first, last, err = frameRecords(f, batch, l.opts.partition(), nil)
		}
		if err == nil {
			err = l.appendFrame(batch, frame, first, last, false)
		}
		if err != nil {
			if l.wal != nil {
				closeWAL(l.wal)
			}
			return l.errorf("open: restore batch %d from the sync ring: %w", batch, err)
		}
	}
	if err := errors.Join(l.wal.Sync(), SyncDir(l.dir)); err != nil {
		closeWAL(l.wal)
		return l.errorf("open: sync the batches restored from the sync ring: %w", err)
	}
	l.logger.Warn("log: restored batches from the sync ring that the last segment had lost",
		"from_batch", keep+1, "to_batch", lap.lastBatch(), "last_index", l.lastRecord.Load())
	return nil
}

// openWAL prepares the directory (finished truncations, repaired tail,
// everything synced) and opens wal on it. clean, if not nil, is what the
// last clean close recorded: the directory must match it exactly.
func (l *Log) openWAL(clean *cleanMarker) error {
	info, err := prepareDir(l.dir, l.opts.partition(), l.logger, clean != nil)
	if err != nil {
		return err
	}
	if clean != nil && (clean.lastBatch != info.lastBatch || clean.lastRecord != info.lastRecord || clean.tailSize != info.tailSize) {
		return &CorruptError{Partition: l.opts.partition(), File: cleanName, Record: info.lastRecord,
			Err: fmt.Errorf("%w: recorded last index %d (entry %d, tail %d bytes), found %d (entry %d, tail %d bytes)",
				errCleanDiffers, clean.lastRecord, clean.lastBatch, clean.tailSize, info.lastRecord, info.lastBatch, info.tailSize)}
	}
	w, err := wal.Open(l.dir, l.walOptions())
	if err != nil {
		return l.errorf("open wal: %w", err)
	}
	if len(info.segs) == 0 {
		// wal created the first segment file.
		if err := SyncDir(l.dir); err != nil {
			closeWAL(w)
			return l.errorf("open: %w", err)
		}
		l.tailStart.Store(1)
		l.tailSize = 0
	} else {
		l.tailStart.Store(info.segs[len(info.segs)-1].index)
		l.tailSize = info.tailSize
	}
	lastBatch, err := w.LastIndex()
	if err == nil && lastBatch != info.lastBatch {
		err = fmt.Errorf("wal reports last entry %d, the files end at %d", lastBatch, info.lastBatch)
	}
	if err != nil {
		closeWAL(w)
		return l.errorf("open wal: %w", err)
	}
	l.wal = w
	l.lastBatch.Store(info.lastBatch)
	l.lastRecord.Store(info.lastRecord)
	l.firstRecord.Store(info.firstRecord)
	l.empty = info.empty
	return nil
}
