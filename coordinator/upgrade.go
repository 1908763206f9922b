package coordinator

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/internal/signal"
	"github.com/offsetd/offsetd/log"
)

// upgradeFormat1 converts a data directory of format 1, a log per
// partition in p0000/…, into format 2: it loads every partition as the
// previous release did (its newest good snapshot plus its log), reading
// only, and then writes each partition's state as a snapshot of the new
// format at one index M, the highest index any partition used, creates
// an empty journal, and (the step that commits the conversion) rewrites
// the meta file as m in format 2. Only then are the old directories
// removed. The journal's records start after M, so every group keeps its
// version and versions keep growing. A partition that does not load
// refuses the conversion before anything is written.
//
// A crash before the meta file is rewritten leaves format 1 and a partial
// new layout, which the next Open removes before it converts again; a
// crash after leaves old directories that the next Open removes.
func upgradeFormat1(dir string, opts Options, m meta) error {
	if n, err := PartitionsOnDisk(dir); err != nil {
		return err
	} else if _, jerr := os.Stat(JournalDir(dir)); n == 0 && jerr == nil {
		// A journal and no partition log: the meta file is not this
		// directory's. Converting would drop the journal.
		return fmt.Errorf("%w: %s says data format %d, but the directory holds a journal and no partition logs",
			ErrCorrupt, metaFile, format1)
	}
	m.Format, m.Version = dataFormat, metaVersion
	parts := make([]*partition, opts.Partitions)
	snaps := make([]*log.Snapshots, opts.Partitions)
	var top uint64
	for i := range parts {
		p, last, err := loadFormat1(dir, i, opts, m)
		if err != nil {
			return err
		}
		if snaps[i], err = log.NewSnapshots(SnapshotDir(dir, i), snapshotOwner(m, i)); err != nil {
			return err
		}
		parts[i] = p
		top = max(top, last, p.maxSeen, p.lastSnapshot)
	}
	for _, d := range []string{filepath.Join(dir, journalDir), filepath.Join(dir, "snapshots")} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	if top > 0 {
		for i, p := range parts {
			_, err := snaps[i].Write(top, func(content io.Writer) error {
				return p.writeSnapshot(content, p.txns.copyAll(), nil)
			})
			if err != nil {
				return err
			}
		}
	}
	j, err := log.Open(filepath.Join(dir, journalDir), log.Options{SegmentSize: opts.SegmentSize, Logger: opts.Logger, JournalID: m.ID})
	if err != nil {
		return err
	}
	if err := j.SkipTo(top + 1); err != nil {
		j.Close()
		return err
	}
	if err := j.Close(); err != nil {
		return err
	}
	if err := writeMeta(dir, m); err != nil {
		return err
	}
	opts.Logger.Info("converted the data directory to one journal", "dir", dir,
		"from_format", format1, "to_format", dataFormat, "partitions", opts.Partitions, "index", top)
	return removeFormat1(dir, opts.Partitions)
}

// format1Dir is where format 1 kept partition i's log and snapshots.
func format1Dir(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("p%04d", i)) }

// loadFormat1 loads partition i of a format-1 directory, reading only,
// and returns it with its log's last index; its snapshots go to the new
// place, as the data directory of m names them.
func loadFormat1(dir string, i int, opts Options, m meta) (*partition, uint64, error) {
	p := newPartition(i, opts, signal.New())
	pdir := format1Dir(dir, i)
	if _, err := os.Stat(pdir); errors.Is(err, fs.ErrNotExist) {
		p.resetTables()
		p.capturedAt = nil
		return p, 0, nil // a partition that never wrote
	}
	lopts := log.Options{SegmentSize: opts.SegmentSize, Logger: opts.Logger, Format1: true, Partition: i}
	l, err := log.PlanOpen(pdir, lopts)
	if err != nil {
		return nil, 0, err
	}
	old, err := log.NewSnapshots(pdir, snapshotOwner(m, i))
	if err != nil {
		return nil, 0, err
	}
	sl, err := loadSnapshot(old, i, opts.Logger, l.FirstIndex(), l.LastIndex(), l.Report().Clean, p.restoreLoaded)
	if err != nil {
		return nil, 0, err
	}
	p.loaded(sl)
	p.offsets.Update(func(w cache.OffsetsWriter) {
		err = l.Replay(p.lastSnapshot+1, func(index uint64, e log.Entry) error {
			if err := p.apply(w, index, e.Type, e.Payload); err != nil {
				return fmt.Errorf("partition %d index %d: %w", i, index, err)
			}
			return nil
		})
		w.SetApplied(max(l.LastIndex(), p.lastSnapshot))
	})
	p.capturedAt = nil
	return p, l.LastIndex(), err
}

// removeFormat1 removes the per-partition directories of format 1.
func removeFormat1(dir string, partitions int) error {
	removed := false
	for i := range partitions {
		pdir := format1Dir(dir, i)
		if _, err := os.Stat(pdir); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(pdir); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		return log.SyncDir(dir)
	}
	return nil
}
