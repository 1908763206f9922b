package coordinator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/offsetd/offsetd/log"
)

// DataDir is a data directory as opening finds it: locked, its meta file
// checked and its journal planned (log.PlanOpen), with nothing written
// but a format-1 directory's conversion. Loading then decides whether to
// open it; only then is the plan carried out (CarryOut): the meta file
// written, the journal repaired and opened, the snapshot directories made.
//
// Whoever opens a DataDir owns its journal: on one node the Coordinator
// (Open), on a cluster node package cluster, which reads the journal
// through Replay, has the partitions load as state machines
// (OpenReplicated), carries the plan out, writes the journal through a
// log.Committer of its own and drops its front.
type DataDir struct {
	dir   string
	opts  Options // as validated; Partitions is the directory's
	lock  dirLock // nil for Check's, which takes none
	check bool    // Check's: planned, never carried out

	meta      meta // the meta file, as opening leaves it
	writeMeta bool // meta is new, or of an older version: CarryOut writes it
	// txnFormat says the meta file is at formatTxn; formatMu serializes
	// the one rewrite that puts it there (useTxnFormat).
	txnFormat atomic.Bool
	formatMu  sync.Mutex

	// plan is what opening the journal will do; CarryOut opens journal by
	// it and drops it (nil from then on). Only the loader uses it.
	plan      *log.Plan
	journal   *log.Log         // nil until carried out, and if opening was refused
	snapshots []*log.Snapshots // per partition
	// loaded says every partition loaded, so the plan may be carried out;
	// stale then holds, per partition, the snapshots ahead of the journal
	// that loading found, which CarryOut removes. Set by the loader.
	loaded bool
	stale  [][]uint64
}

// OpenDataDir locks the data directory dir, creating it if needed, and
// plans its opening as Open does, writing nothing yet. A directory of the
// previous format (a log per partition) is converted first; see
// upgradeFormat1. opts.Partitions 0 takes the directory's own.
func OpenDataDir(dir string, opts Options) (*DataDir, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := log.MakeDir(dir, opts.syncDir); err != nil {
		return nil, err
	}
	if _, _, err := readMeta(dir); errors.Is(err, ErrNotDataDir) {
		return nil, err // before locking someone else's directory
	}
	lock, err := lockDir(dir, true)
	if err != nil {
		return nil, err
	}
	d, err := planDataDir(dir, opts, false)
	if err != nil {
		lock.Close()
		return nil, err
	}
	d.lock = lock
	return d, nil
}

// planDataDir reads the data directory as opening does and returns it
// planned, having written nothing but a format-1 directory's conversion
// (which check refuses instead): what it finds is judged, and written to,
// only once every partition has loaded (CarryOut).
func planDataDir(dir string, opts Options, check bool) (*DataDir, error) {
	m, writeM, err := planMeta(dir, opts.Partitions)
	if err != nil {
		return nil, err
	}
	opts.Partitions = m.Partitions
	if m.Format == format1 {
		if check {
			return nil, fmt.Errorf("%w: %s is of format %d, which Open converts", errFormat1, dir, format1)
		}
		if err := upgradeFormat1(dir, opts, m); err != nil {
			return nil, fmt.Errorf("coordinator: converting %s to format %d: %w", dir, dataFormat, err)
		}
		m.Format, writeM = dataFormat, false
	}
	d := &DataDir{dir: dir, opts: opts, check: check, meta: m, writeMeta: writeM}
	d.txnFormat.Store(m.Format == formatTxn)
	d.plan, err = log.PlanOpen(filepath.Join(dir, journalDir), d.journalOptions())
	if err != nil {
		return nil, err
	}
	if err := journalMissing(dir, opts.Partitions, d.plan.Report().Segments); err != nil {
		return nil, err
	}
	for i := range opts.Partitions {
		snaps, err := log.NewSnapshots(SnapshotDir(dir, i), snapshotOwner(m, i))
		if err != nil {
			return nil, err
		}
		d.snapshots = append(d.snapshots, snaps)
	}
	return d, nil
}

// Dir returns the data directory's path.
func (d *DataDir) Dir() string { return d.dir }

// Partitions returns the directory's number of partitions.
func (d *DataDir) Partitions() int { return d.opts.Partitions }

// Replay hands fn every journal record from index from on, in index
// order, as the plan will leave the journal (a torn end cut, batches the
// sync ring holds restored), reading only. It fails with the journal's
// damage, naming segment and index, or with fn's error.
func (d *DataDir) Replay(from uint64, fn func(index uint64, e log.Entry) error) error {
	if d.plan == nil {
		return fmt.Errorf("coordinator: %s: the journal was opened already; Replay reads it before", d.dir)
	}
	return d.plan.Replay(from, fn)
}

// Journal returns the journal, once the plan was carried out (the
// directory opened); nil before. Its one writer is the directory's owner.
func (d *DataDir) Journal() *log.Log { return d.journal }

// Snapshots returns partition's snapshot files, for the directory's owner
// on a cluster node: the node writes them for its partitions
// (Replica.WriteSnapshot), opens them for the partitions to restore
// (Replica.ReadSnapshot), sends the newest to a replica that lags behind,
// receives a leader's in its place (log.Snapshots.Receive: its header
// must name this partition, partition count and hash) and prunes them.
// Their names are the data directory's layout, built in this package only.
func (d *DataDir) Snapshots(partition int) *log.Snapshots { return d.snapshots[partition] }

// Close closes the journal, which leaves its clean-close marker, and
// releases the lock. The journal's writer must have stopped.
func (d *DataDir) Close() error {
	var errs []error
	if d.journal != nil {
		errs = append(errs, d.journal.Close())
	}
	if d.lock != nil {
		errs = append(errs, d.lock.Close())
	}
	return errors.Join(errs...)
}

// CarryOut writes what opening the data directory takes, once every
// partition has loaded (Open, OpenReplicated) and so decided to open it:
// the meta file (a new directory's, or one of an older version, which
// gets an ID), then the journal's repairs (Plan.Open: a torn end cut,
// batches restored from the sync ring, an interrupted truncation
// finished, the clean-close marker removed), the partitions' snapshot
// directories, then the removal of the snapshots ahead of the journal
// that loading found. Journal then returns the journal.
func (d *DataDir) CarryOut() error {
	switch {
	case d.check:
		return fmt.Errorf("coordinator: %s: a directory Check planned is never carried out", d.dir)
	case d.plan == nil:
		return fmt.Errorf("coordinator: %s: carried out already", d.dir)
	case !d.loaded:
		return fmt.Errorf("coordinator: %s: the partitions have not loaded, so the plan is not carried out", d.dir)
	}
	if d.writeMeta {
		if err := writeMeta(d.dir, d.meta); err != nil {
			return err
		}
	}
	j, err := d.plan.Open()
	if err != nil {
		return err
	}
	d.journal = j
	for _, s := range d.snapshots {
		// Made here, not when planned: a refusal makes nothing. Tools
		// count partitions by these directories when the meta file is
		// lost.
		if err := log.MakeDir(s.Dir(), d.opts.syncDir); err != nil {
			return err
		}
	}
	for i, stale := range d.stale {
		if len(stale) == 0 {
			continue
		}
		if err := d.snapshots[i].RemoveAfter(d.plan.LastIndex()); err != nil {
			return err
		}
		d.opts.Logger.Warn("removed snapshots ahead of the journal, whose end a crash took",
			"partition", i, "snapshots", stale, "lastIndex", d.plan.LastIndex())
	}
	d.plan = nil // carried out; it holds the sync ring's bytes
	return nil
}

// useTxnFormat moves the data directory to formatTxn, if it is not there
// yet, before a transactional record is written: the meta file first,
// then the record, so that no release that does not know the record finds
// it in a directory of a format it reads. A failed rewrite is
// ErrWriteFailed, and the record is not written.
func (d *DataDir) useTxnFormat() error {
	if d.txnFormat.Load() {
		return nil
	}
	d.formatMu.Lock()
	defer d.formatMu.Unlock()
	if d.txnFormat.Load() {
		return nil
	}
	m := d.meta
	m.Format = formatTxn
	if err := writeMeta(d.dir, m); err != nil {
		return fmt.Errorf("%w: %v", ErrWriteFailed, err)
	}
	d.txnFormat.Store(true)
	d.opts.Logger.Info("data directory moved to the format of transactional offsets", "dir", d.dir, "format", formatTxn)
	return nil
}

// journalOptions are the options of the journal.
func (d *DataDir) journalOptions() log.Options {
	o := log.DefaultOptions()
	o.SegmentSize = d.opts.SegmentSize
	o.UnsafeNoSync = d.opts.UnsafeNoSync
	o.Logger = d.opts.Logger
	o.JournalID = d.meta.ID
	return o
}

// journalMissing returns an error if dir has snapshots but no journal, or
// a journal directory without a segment file (segments, as the plan
// counted them): the snapshots cover records a journal held, and an empty
// journal in its place would take them for ones a crash left ahead and
// remove them. A journal always keeps a segment once created: wal makes
// the first when it creates the directory, and the journal removes only
// segments before its last.
func journalMissing(dir string, partitions, segments int) error {
	if segments > 0 {
		return nil
	}
	what := "no journal " + JournalDir(dir)
	if _, err := os.Stat(JournalDir(dir)); err == nil {
		what = "no journal segment in " + JournalDir(dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for i := range partitions {
		if list, _ := log.ListSnapshots(SnapshotDir(dir, i)); len(list) > 0 {
			return fmt.Errorf("%w: %s holds snapshots (%s) but %s",
				ErrCorrupt, dir, log.SnapshotPath(SnapshotDir(dir, i), list[0]), what)
		}
	}
	return nil
}

// snapshotOwner is what the snapshots of partition i of the data
// directory of m name in their headers.
func snapshotOwner(m meta, i int) log.SnapshotOwner {
	return log.SnapshotOwner{Partition: i, Partitions: m.Partitions, Hash: m.Hash, Dir: m.ID}
}

// journalDir is where, in a data directory, the journal's segments are.
const journalDir = "journal"

// JournalDir returns where the data directory dir keeps its journal, for
// tools that read a data directory.
func JournalDir(dir string) string { return filepath.Join(dir, journalDir) }

// SnapshotDir returns where partition i of data directory dir keeps its
// snapshots, for tools that read a data directory.
func SnapshotDir(dir string, i int) string {
	return filepath.Join(dir, "snapshots", fmt.Sprintf("p%04d", i))
}
