package coordinator

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/log"
)

var errStopped = errors.New("coordinator: stopped while loading")

// errNotOpened is why a partition that loaded is not served: another
// failed to load, and a data directory opens whole or not at all, so that
// a refusal writes nothing.
var errNotOpened = errors.New("coordinator: not opened, as another partition failed to load")

// Loading: every partition loads its newest good snapshot (in parallel),
// then the journal is read once, from the lowest index any partition
// needs, and each record goes to its partition unless that partition's
// snapshot already holds it. Partitions apply their records on goroutines
// of their own, so they load in parallel too.

// SnapshotLoad is what loading a partition's snapshots found
// (DataDir.LoadSnapshot).
type SnapshotLoad struct {
	// Index is the snapshot loaded, 0 if none; Size its bytes.
	Index uint64
	Size  int64
	// Previous is the snapshot before it, to fall back to; 0 if none.
	Previous uint64
	// Newest is the newest snapshot the partition has, loaded or not: no
	// record index up to it is used again.
	Newest uint64
	// Stale lists the snapshots ahead of the log, newest first, that the
	// directory's CarryOut removes once it has decided to open.
	Stale []uint64
	// Skipped says, for each snapshot passed over, which and why.
	Skipped []string
}

// LoadSnapshot has restore restore partition's newest snapshot that
// reads back whole and that its log, holding records first to last,
// continues, falling back to older ones, and writes nothing; see
// loadSnapshot. restore gets each snapshot's content after its header is
// checked, and must leave the partition's tables as if it had never been
// called when it fails. On a cluster node the node calls it (see
// OpenReplicated), with its group's log's bounds.
func (d *DataDir) LoadSnapshot(partition int, first, last uint64, clean bool, restore func(index uint64, content io.Reader) error) (SnapshotLoad, error) {
	return loadSnapshot(d.snapshots[partition], partition, d.opts.Logger, first, last, clean, restore)
}

// loadSnapshot restores, through restore, the partition's newest snapshot
// in snaps that reads back whole and that the log, holding records first
// to last, continues, and writes nothing. A snapshot ahead of the log
// after a crash (the crash took the journal's end) is not loaded, and is
// planned for removal (SnapshotLoad.Stale), so that it is never loaded
// later, once new records have taken its indexes; after a clean close
// (clean) the journal ends where it ended, and a snapshot past it is
// refused. A damaged snapshot falls back to the one before it. A snapshot
// whose header names another partition or data directory is refused. With
// no usable snapshot the log must still start at its first record;
// otherwise loading fails, naming every snapshot file it judged, rather
// than serve a silently shorter state.
//
// It is the host's part of loading: listing, judging, falling back; the
// partition only restores the content it is handed
// (partition.restoreSnapshot).
func loadSnapshot(snaps *log.Snapshots, partition int, logger *slog.Logger, first, last uint64, clean bool, restore func(index uint64, content io.Reader) error) (SnapshotLoad, error) {
	var sl SnapshotLoad
	list, err := snaps.List()
	if err != nil {
		return sl, fmt.Errorf("coordinator: partition %d: %w", partition, err)
	}
	if len(list) > 0 {
		sl.Newest = list[0]
	}
	for len(list) > 0 && list[0] > last {
		if err := snaps.CheckOwner(list[0]); err != nil {
			// Not a snapshot of ours that a crash left ahead: never removed.
			return sl, fmt.Errorf("coordinator: partition %d: snapshot %s: %w", partition, log.SnapshotPath(snaps.Dir(), list[0]), err)
		}
		if clean {
			return sl, fmt.Errorf("%w: partition %d: snapshot %s covers index %d, past the end of the journal (index %d), which was closed cleanly: the snapshot is not this journal's, or the journal lost records",
				ErrCorrupt, partition, log.SnapshotPath(snaps.Dir(), list[0]), list[0], last)
		}
		sl.Stale = append(sl.Stale, list[0])
		list = list[1:]
	}
	if len(sl.Stale) > 0 {
		logger.Warn("snapshots ahead of the journal, whose end a crash took, are not loaded and are removed once the directory opens",
			"partition", partition, "newest", sl.Stale[0], "lastIndex", last)
	}
	for i, index := range list {
		path := log.SnapshotPath(snaps.Dir(), index)
		if index+1 < first {
			sl.Skipped = append(sl.Skipped, fmt.Sprintf("%s: older than the journal's first index %d", path, first))
			if i > 0 {
				logger.Warn("snapshot is older than the journal it needs; trying an older one is no use",
					"partition", partition, "snapshot", index, "firstIndex", first)
			}
			break
		}
		err := snaps.Restore(index, func(content io.Reader) error { return restore(index, content) })
		if errors.Is(err, log.ErrSnapshotOwner) {
			return sl, fmt.Errorf("coordinator: partition %d: snapshot %s: %w", partition, path, err)
		}
		if err != nil {
			sl.Skipped = append(sl.Skipped, fmt.Sprintf("%s: %v", path, err))
			logger.Warn("snapshot unreadable; falling back to the one before it and a longer journal",
				"partition", partition, "snapshot", index, "err", err)
			continue
		}
		sl.Index = index
		if fi, err := os.Stat(path); err == nil {
			sl.Size = fi.Size()
		}
		if i+1 < len(list) {
			sl.Previous = list[i+1]
		}
		break
	}
	if sl.Index == 0 {
		if first > 1 {
			judged := "none in " + snaps.Dir()
			if len(sl.Skipped) > 0 {
				judged = strings.Join(sl.Skipped, "; ")
			}
			return sl, fmt.Errorf("%w: partition %d: no usable snapshot (%s) and the journal starts at index %d",
				ErrCorrupt, partition, judged, first)
		}
		if len(list) > 0 {
			logger.Warn("no usable snapshot; replaying the whole journal", "partition", partition)
		}
	}
	return sl, nil
}

// restoreLoaded is the restore a partition's loading is given
// (loadSnapshot): the content of snapshot index replaces whatever an
// earlier, damaged snapshot left in the tables.
func (p *partition) restoreLoaded(index uint64, content io.Reader) error {
	p.resetTables()
	err := p.restoreSnapshot(index, content)
	if err != nil {
		p.resetTables()
	}
	return err
}

// loaded takes what loading its snapshots found: the tables hold the
// snapshot loaded, if any.
func (p *partition) loaded(sl SnapshotLoad) {
	if sl.Index == 0 {
		p.resetTables()
	}
	p.lastSnapshot, p.prevSnapshot = sl.Index, sl.Previous
	p.maxSeen = max(p.maxSeen, sl.Newest)
	if sl.Index != 0 {
		p.snapshotIndex.Store(sl.Index)
		p.loadBytes += sl.Size
		// The next snapshot is due once the journal holds half of this
		// one, and the journal's budget counts it, as if it had been
		// written since open.
		p.lastSnapSize = sl.Size
		p.snapshotSize.Store(sl.Size)
	}
	for _, at := range p.capturedAt {
		p.maxSeen = max(p.maxSeen, at)
	}
	p.keepFrom.Store(p.prevSnapshot + 1)
}

// replayRecord is one journal record on its way to its partition. Its
// payload aliases a segment the journal read and does not reuse.
type replayRecord struct {
	index   uint64
	typ     byte
	payload []byte
}

// replayChunk is how many records travel to a partition at once.
const replayChunk = 1024

// replayJournal reads the journal once from the lowest index a loading
// partition needs and applies each record to its partition, partitions in
// parallel. It returns the first error: the journal's (damage names the
// segment and index), or a partition's (a record that does not apply).
func (c *Coordinator) replayJournal(loading []*partition, stop <-chan struct{}) error {
	if c.load != nil {
		return nil // the journal holds the replication's records, not the partitions'
	}
	if len(loading) == 0 {
		return nil
	}
	from := uint64(0)
	for i, p := range loading {
		if i == 0 || p.lastSnapshot+1 < from {
			from = p.lastSnapshot + 1
		}
	}
	in := make(map[int]bool, len(loading))
	for _, p := range loading {
		in[p.id] = true
	}
	type feed struct {
		ch    chan []replayRecord
		chunk []replayRecord
	}
	feeds := make([]feed, len(c.parts))
	errs := make([]error, len(c.parts))
	var appliers sync.WaitGroup
	for _, p := range loading {
		f := &feeds[p.id]
		f.ch = make(chan []replayRecord, 4)
		appliers.Add(1)
		go func() {
			defer appliers.Done()
			for chunk := range f.ch {
				if errs[p.id] != nil {
					continue // drain
				}
				p.offsets.Update(func(w cache.OffsetsWriter) {
					for _, r := range chunk {
						if err := p.apply(w, r.index, r.typ, r.payload); err != nil {
							errs[p.id] = fmt.Errorf("partition %d index %d: %w", p.id, r.index, err)
							return
						}
					}
				})
				p.loadRecords += len(chunk)
			}
		}()
	}
	n := 0
	err := c.d.plan.Replay(from, func(index uint64, e log.Entry) error {
		if n++; n&0xffff == 0 {
			select {
			case <-stop:
				return errStopped
			default:
			}
		}
		if e.Partition >= len(c.parts) {
			return fmt.Errorf("%w: journal record %d is of partition %d, but there are %d", ErrCorrupt, index, e.Partition, len(c.parts))
		}
		if !in[e.Partition] || index <= c.parts[e.Partition].lastSnapshot {
			return nil
		}
		f := &feeds[e.Partition]
		f.chunk = append(f.chunk, replayRecord{index, e.Type, e.Payload})
		c.parts[e.Partition].sinceSnapshot += int64(len(e.Payload))
		c.parts[e.Partition].loadBytes += int64(len(e.Payload))
		if len(f.chunk) == replayChunk {
			f.ch <- f.chunk
			f.chunk = make([]replayRecord, 0, replayChunk)
		}
		return nil
	})
	for _, p := range loading {
		f := &feeds[p.id]
		if len(f.chunk) > 0 {
			f.ch <- f.chunk
		}
		close(f.ch)
	}
	appliers.Wait()
	last := c.d.plan.LastIndex()
	for _, p := range loading {
		p.offsets.Update(func(w cache.OffsetsWriter) { w.SetApplied(max(last, p.lastSnapshot)) })
		p.capturedAt = nil
	}
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// resetTables gives the partition empty tables, before it serves anything.
func (p *partition) resetTables() {
	p.capturedAt = make(map[string]uint64)
	p.offsets = cache.NewOffsets()
	p.mappings = cache.NewMappings()
	p.switches = cache.NewSwitches()
	p.txns = newTxnTable()
}

// loadAll loads every partition: snapshots in parallel, then one pass over
// the journal as the plan will leave it, writing nothing. Partitions whose
// snapshots fail to load fail with their own error; damage in the journal
// fails every partition that was loading. If any partition failed, the
// open is refused, LoadInBackground or not: the partitions that loaded
// fail with errNotOpened and nothing is written, since carrying out the
// plan for them (a torn end cut, snapshots removed, the marker written
// at Close) would change the directory that is refused. Otherwise, unless
// this is Check's, on one node the plan is carried out (CarryOut), the
// journal gets its committer and each partition its writer; on a cluster
// node the directory's owner carries the plan out, and the partitions
// wait for their replicas (Start).
func (c *Coordinator) loadAll() {
	c.loadStart = time.Now()
	go func() {
		defer close(c.loaded)
		first, last := c.d.plan.FirstIndex(), c.d.plan.LastIndex()
		clean := c.d.plan.Report().Clean
		c.loads = make([]SnapshotLoad, len(c.parts))
		var wg sync.WaitGroup
		sem := make(chan struct{}, max(1, min(len(c.parts), maxLoaders())))
		for _, p := range c.parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				select {
				case <-c.stop:
					p.loadErr = errStopped
					return
				default:
				}
				if c.load != nil {
					// The directory's owner picks the snapshot to load.
					c.loads[p.id], p.loadErr = c.load(p.id, p.restoreLoaded)
				} else {
					c.loads[p.id], p.loadErr = c.d.LoadSnapshot(p.id, first, last, clean, p.restoreLoaded)
				}
				if p.loadErr == nil {
					p.loaded(c.loads[p.id])
				}
			}()
		}
		wg.Wait()
		var loading []*partition
		for _, p := range c.parts {
			if p.loadErr == nil {
				loading = append(loading, p)
			} else {
				c.fail(p)
			}
		}
		if err := c.replayJournal(loading, c.stop); err != nil {
			for _, p := range loading {
				p.loadErr = err
				c.fail(p)
			}
			return
		}
		if c.d.check || len(loading) == 0 {
			return // nothing is written: a refusal leaves the directory as it was
		}
		if len(loading) < len(c.parts) {
			for _, p := range loading {
				p.loadErr = errNotOpened
				c.fail(p)
			}
			return
		}
		for _, p := range c.parts {
			if p.sawTxn && c.d.meta.Format != formatTxn {
				// Transactional records under an older format: a crash
				// came between a follower's record and its meta file.
				c.d.meta.Format, c.d.writeMeta = formatTxn, true
				c.d.txnFormat.Store(true)
			}
		}
		c.d.loaded = true
		for _, sl := range c.loads {
			c.d.stale = append(c.d.stale, sl.Stale)
		}
		if c.load != nil {
			return // the directory's owner carries it out; the partitions wait for their replicas (Start)
		}
		if err := c.d.CarryOut(); err != nil {
			for _, p := range loading {
				p.loadErr = err
				c.fail(p)
			}
			return
		}
		next := last
		for _, p := range c.parts {
			next = max(next, p.maxSeen, p.lastSnapshot)
		}
		if err := c.d.journal.SkipTo(next + 1); err != nil {
			for _, p := range loading {
				p.loadErr = err
				c.fail(p)
			}
			return
		}
		var onBatch func(log.BatchInfo)
		if jo, ok := c.opts.Observer.(JournalObserver); ok {
			onBatch = func(b log.BatchInfo) {
				jo.ObserveJournalBatch(b.Calls, b.Partitions, b.Records, b.Bytes, b.Took, b.Err)
			}
		}
		c.committer = log.NewCommitter(c.d.journal, onBatch)
		for _, p := range c.parts {
			p.journal = c.committer
			p.w = newLocalWriter(p, c.stop, c.d.snapshots[p.id])
		}
		c.startWriters()
	}()
}

// startWriters starts every partition's writer, once it has loaded and
// has one, and makes the partitions ready.
func (c *Coordinator) startWriters() {
	took := time.Since(c.loadStart)
	for _, p := range c.parts {
		p.loadTime = took
		if p.observer != nil {
			p.observer.ObserveLoad(p.id, p.loadRecords, took)
		}
		keys, groups := p.offsets.Len()
		c.opts.Logger.Debug("partition loaded", "partition", p.id, "keys", keys, "groups", groups,
			"mappings", p.mappings.Len(), "took", took)
		c.writers.Add(1)
		go func() {
			defer c.writers.Done()
			p.w.run(c.stop)
		}()
		p.state.Store(stateReady)
	}
}

// fail marks a partition that could not load.
func (c *Coordinator) fail(p *partition) {
	p.state.Store(stateFailed)
	if !errors.Is(p.loadErr, errStopped) && !errors.Is(p.loadErr, errNotOpened) {
		c.opts.Logger.Error("partition failed to load", "partition", p.id, "err", p.loadErr)
	}
}
