package coordinator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/offsetd/offsetd/log"
)

// CheckReport is what Open would do with a data directory, as Check found
// it.
type CheckReport struct {
	Format     int
	Partitions int
	Hash       string
	// ID identifies the data directory; NewID reports one Open would
	// write, as the directory predates identifiers.
	ID    string
	NewID bool
	// Journal is the journal as Open's plan leaves it: what it cuts or
	// restores is in its TornTail and RingBatches fields.
	Journal log.Report
	// Parts says how each partition loads.
	Parts []PartitionCheck
}

// PartitionCheck is how one partition loads.
type PartitionCheck struct {
	Partition int
	// Snapshot is the index of the snapshot it loads, in SnapshotFile;
	// 0 if it loads none (and replays the journal from its start).
	Snapshot     uint64
	SnapshotFile string
	// Skipped names the snapshots passed over, and why: damaged ones it
	// fell back from, one older than the journal.
	Skipped []string
	// Stale lists the snapshots ahead of the journal, whose end a crash
	// took, that Open removes.
	Stale []uint64
	// Records counts the journal records it replays.
	Records int
	// Err is why it does not load, nil if it does.
	Err error
}

// Check reads the data directory dir as Open does and reports what Open
// would do, changing nothing: it takes no lock and writes no file. It
// runs Open's own planning and loading (every partition's snapshot and
// the journal, in memory), so its error is Open's: nil if Open would open
// the directory (LoadInBackground aside), else the same refusal naming the
// same files. A directory without a meta file and without data is an
// error wrapping fs.ErrNotExist; one of format 1, which Open converts, is
// an ErrFormat error. opts.Partitions 0 takes the directory's own.
func Check(dir string, opts Options) (CheckReport, error) {
	return check(dir, opts, nil)
}

// CheckReplicated is Check for a cluster node's data directory, whose
// owner replays the journal and loads its partitions' snapshots (see
// OpenReplicated): replay replays the planned directory, reading only,
// and returns how the owner loads a partition's snapshot, or the error
// with which the owner's open would refuse the directory.
func CheckReplicated(dir string, opts Options, replay func(d *DataDir) (load LoadFunc, err error)) (CheckReport, error) {
	if replay == nil {
		return CheckReport{}, fmt.Errorf("%w: CheckReplicated without replay", ErrInvalid)
	}
	return check(dir, opts, replay)
}

func check(dir string, opts Options, replay func(d *DataDir) (LoadFunc, error)) (CheckReport, error) {
	var rep CheckReport
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return rep, err
	}
	opts.LoadInBackground = false
	opts.Retention = 0
	if _, err := os.Stat(dir); err != nil {
		return rep, err
	}
	if _, _, err := readMeta(dir); errors.Is(err, fs.ErrNotExist) {
		return rep, fmt.Errorf("%s holds no offsetd data: %w", dir, err)
	}
	d, err := planDataDir(dir, opts, true)
	if err != nil {
		return rep, err
	}
	rep.Format, rep.Partitions, rep.Hash, rep.ID, rep.NewID = d.meta.Format, d.meta.Partitions, d.meta.Hash, d.meta.ID, d.writeMeta
	rep.Journal = d.plan.Report()
	c := newCoordinator(d)
	if replay != nil {
		if c.load, err = replay(d); err != nil {
			return rep, err
		}
	}
	c.loadAll()
	err = c.loadErrors()
	for i, p := range c.parts {
		pc := PartitionCheck{Partition: i, Records: p.loadRecords, Skipped: c.loads[i].Skipped, Stale: c.loads[i].Stale}
		if p.state.Load() == stateFailed {
			pc.Err = p.loadErr
		} else if p.lastSnapshot != 0 {
			pc.Snapshot = p.lastSnapshot
			pc.SnapshotFile = log.SnapshotPath(d.snapshots[i].Dir(), p.lastSnapshot)
		}
		rep.Parts = append(rep.Parts, pc)
	}
	return rep, err
}
