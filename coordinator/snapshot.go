package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/valyala/bytebufferpool"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/log"
)

// Snapshots bound the journal and the restart time. A partition snapshots
// once the journal bytes it appended since its last snapshot reach half
// the size of that snapshot (at least Options.SnapshotBytes shared out
// over the partitions), so disk and restart time follow the live state,
// not the history. A background goroutine writes the live state as of journal
// index S (every record of the partition up to S is applied: the
// journal's last index when nothing of the partition is in flight, else
// the last index it applied; see maybeSnapshot): it lists the groups, then
// reads them one at a time under a short read lock while the writer goes
// on committing. So each group is captured exactly as of some index J >= S
// (the table's applied index under that lock), which its record carries.
// On load, the journal from S+1 is replayed over the snapshot, skipping for
// each group the records up to its J: the group's keys, generation,
// version and last commit come out as if the whole journal had been
// replayed.
//
// Each partition keeps its newest snapshot and the one before it, to fall
// back to if the newest is damaged; so it needs the journal from the
// record after the previous one (keepFrom). The journal drops whole
// segments below the lowest keepFrom of all partitions. A quiet partition
// that holds that lowest point is asked to snapshot (it is small), so it
// never pins the journal for long.

// snapshotRatio: a partition snapshots once it has appended 1/snapshotRatio
// of its last snapshot's size. With the previous snapshot kept to fall
// back to, the journal then holds about two such stretches per partition;
// measured over 60 overwrites of 20,000 offsets (TestDiskFollowsLiveState),
// 2 kept the data directory within 5.7x one pass of the journal (7.3x at
// 1) when snapshots held whole keys (1.5x a pass each); compact snapshots
// (a few bytes an offset) bring it to 3.8-4.1x (4.0-5.9x when the commits
// are not synced: they outrun the snapshots, which are), most of it the
// journal between snapshots (at least SnapshotBytes).
const snapshotRatio = 2

// maxSnapEntries bounds the offsets in one snapshot record.
const maxSnapEntries = 1024

// snapshotFloor is the least journal bytes a partition appends between
// two snapshots.
func snapshotFloor(opts Options) int64 {
	if opts.SnapshotBytes < 0 {
		return -1
	}
	return max(opts.SnapshotBytes/int64(opts.Partitions), 4<<10)
}

type snapResult struct {
	index uint64
	size  int64
	took  time.Duration
	err   error
	// The removal of older snapshots that followed, if any.
	removeErr error
	// refresh: a replicated partition with nothing new only rewrote its
	// group's records at the journal's end.
	refresh bool
}

// maybeSnapshot starts a snapshot when enough has been appended since the
// last one, or when Snapshot (or the journal's truncation) asked for one.
// One due but held back by SnapshotInterval is taken once the interval
// ends, whether or not a request comes by then (snapLater).
func (p *partition) maybeSnapshot(stop <-chan struct{}) {
	if p.snapshotting {
		return
	}
	asked := len(p.snapWaiting) > 0 || p.snapPinning
	due := p.snapshotBytes >= 0 && p.sinceSnapshot >= max(p.snapshotBytes, p.lastSnapSize/snapshotRatio)
	if wait := p.snapInterval - time.Since(p.lastSnapAt); due && wait > 0 {
		due = false
		p.snapshotIn(wait)
	}
	if !asked && !due {
		return
	}
	// The snapshot's index: every record of this partition up to it is
	// applied (the writer says which).
	index, refresh, ok := p.w.snapshotAt()
	if !ok {
		return // asked again after the next batch is applied
	}
	p.snapPinning = false
	p.snapRunning, p.snapWaiting = p.snapWaiting, nil
	if (index == 0 || index == p.lastSnapshot) && !refresh {
		p.answerSnapshot(nil) // nothing new to capture
		return
	}
	p.snapshotting = true
	p.sinceSnapshot = 0
	p.lastSnapAt = time.Now()
	prev := p.lastSnapshot
	w := p.w
	// The pending transactional offsets are few: they are copied here,
	// where every record up to index and none past it is applied, and so
	// are the snapshot's exactly as of its index.
	var txns []txnSnapEntry
	if !refresh {
		txns = p.txns.copyAll()
	}
	go func() {
		start := time.Now()
		res := snapResult{index: index, refresh: refresh}
		// First every record applied is made durable, even under
		// UnsafeNoSync (see the writers' snapshotted).
		res.err = w.snapshotted(prev, index, refresh, false)
		if res.err == nil && !refresh {
			res.size, res.err = w.keepSnapshot(index, func(content io.Writer) error {
				return p.writeSnapshot(content, txns, stop)
			})
		}
		res.took = time.Since(start)
		if res.err == nil {
			// The newest and the previous snapshot stay (and no damaged
			// one between them, which the load skipped). Then the journal
			// may drop what no partition needs; unlinking files can take
			// milliseconds each, so it is done here, off the writer.
			res.removeErr = w.snapshotted(prev, index, refresh, true)
			if p.onSnapshot != nil {
				p.onSnapshot()
			}
		}
		p.snapDone <- res
	}()
}

// errSnapshotStopped ends a snapshot that Close cut short: the callers of
// Snapshot waiting for it are told the coordinator closed.
var errSnapshotStopped = fmt.Errorf("%w: the snapshot was stopped before it was written", ErrClosed)

// writeSnapshot writes the content of a snapshot of the partition to out,
// which its host gives it (writer.keepSnapshot): the tables as of the
// snapshot's index (at least: each group records the index it was captured
// at), with txns, the pending transactional offsets as of that index
// exactly. It runs beside the partition's writes and takes only short read
// locks. restoreSnapshot reads it back.
func (p *partition) writeSnapshot(out io.Writer, txns []txnSnapEntry, stop <-chan struct{}) error {
	w := log.NewSnapshotEncoder(out)
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	keys, groups, topics := p.offsets.Sizes()
	if err := w.Add(recSnapSizes, encodeSnapSizes(buf.B[:0], groups, topics, keys)); err != nil {
		return err
	}
	var (
		entries []cache.Entry
		enc     snapWriter
	)
	for i, name := range p.offsets.Groups(nil) {
		if i%256 == 0 {
			select {
			case <-stop:
				return errSnapshotStopped
			default:
			}
		}
		var info cache.GroupInfo
		var at uint64
		var ok bool
		entries, info, at, ok = p.offsets.GroupAt(name, entries[:0])
		if !ok {
			continue // deleted since the listing
		}
		// The records take entries a chunk at a time; entries itself
		// stays whole, so the next group reuses its array.
		for rest := entries; len(rest) > 0; {
			n := min(len(rest), maxSnapEntries)
			buf.B = enc.encode(buf.B[:0], name, info, at, rest[:n])
			if err := w.Add(recSnapGroups, buf.B); err != nil {
				return err
			}
			rest = rest[n:]
		}
	}
	for _, m := range p.mappings.All(nil) {
		b, err := json.Marshal(m)
		if err == nil {
			err = w.Add(recMapping, b)
		}
		if err != nil {
			return err
		}
	}
	for _, scope := range p.switches.Scopes(nil) {
		if err := w.Add(recGlobalRead, encodeGlobalRead(buf.B[:0], scope, true)); err != nil {
			return err
		}
	}
	for _, e := range txns {
		// An entry with no offsets still keeps its producer's epoch.
		for rest := e.offsets; ; {
			n := min(len(rest), maxSnapEntries)
			if err := w.Add(recSnapTxn, encodeSnapTxn(buf.B[:0], e.group, e.producer, e.epoch, rest[:n])); err != nil {
				return err
			}
			if rest = rest[n:]; len(rest) == 0 {
				break
			}
		}
	}
	return w.Finish()
}

// restoreSnapshot replaces the groups of the partition's tables by those
// of its snapshot as of index, whose content it reads from content as
// writeSnapshot wrote it, each record checked (log.DecodeSnapshot), and
// marks the tables applied up to index. Readers see the old groups or the
// new ones, never a mix (the offsets change under one write lock). The
// caller empties the other tables first.
func (p *partition) restoreSnapshot(index uint64, content io.Reader) error {
	var err error
	groups := p.offsets.Groups(nil)
	p.offsets.Update(func(w cache.OffsetsWriter) {
		for _, g := range groups {
			w.DeleteGroup(g)
		}
		err = log.DecodeSnapshot(content, func(typ byte, payload []byte) error {
			return p.apply(w, index, typ, payload)
		})
		w.SetApplied(index)
	})
	return err
}

// finishSnapshot runs on the writer's goroutine once a snapshot is written.
func (p *partition) finishSnapshot(res snapResult, stop <-chan struct{}) {
	p.snapshotting = false
	defer p.maybeSnapshot(stop) // one asked for while this one ran
	if mo, ok := p.observer.(MaintenanceObserver); ok {
		mo.ObserveSnapshot(p.id, res.size, res.took, res.err)
	}
	if res.err != nil {
		p.answerSnapshot(res.err)
		if !errors.Is(res.err, errSnapshotStopped) {
			p.logger.Error("snapshot failed; the journal keeps growing until one succeeds", "partition", p.id, "err", res.err)
		}
		return
	}
	if res.refresh {
		p.answerSnapshot(nil)
		return
	}
	p.logger.Debug("snapshot written", "partition", p.id, "index", res.index, "bytes", res.size, "took", res.took)
	p.prevSnapshot, p.lastSnapshot, p.lastSnapSize = p.lastSnapshot, res.index, res.size
	p.snapshotIndex.Store(res.index)
	p.snapshotSize.Store(res.size)
	if res.removeErr != nil {
		p.logger.Error("removing older snapshots failed", "partition", p.id, "err", res.removeErr)
	}
	p.answerSnapshot(res.removeErr)
}

// snapshotIn has the writer look at snapshots again after wait (it
// receives from snapLater), unless it is to already.
func (p *partition) snapshotIn(wait time.Duration) {
	if p.snapTimer != nil {
		return
	}
	p.snapTimer = time.AfterFunc(wait, func() {
		select {
		case p.snapLater <- struct{}{}:
		default:
		}
	})
}

// snapshotLater is the writer's part when snapLater fires: the timer is
// spent, and the snapshot it waited for may be due.
func (p *partition) snapshotLater(stop <-chan struct{}) {
	p.snapTimer = nil
	p.maybeSnapshot(stop)
}

// answerSnapshot tells the callers of Snapshot waiting for the snapshot
// that just finished.
func (p *partition) answerSnapshot(err error) {
	for _, ch := range p.snapRunning {
		ch <- err
	}
	p.snapRunning = nil
}

// askSnapshot asks the partition's writer for a snapshot soon, without
// waiting for it.
func (p *partition) askSnapshot() {
	select {
	case p.snapAsked <- struct{}{}:
	default:
	}
}

// stopSnapshot waits for a running snapshot at Close (c.stop makes it
// quit) and fails the callers still waiting for one.
func (p *partition) stopSnapshot() {
	if p.snapTimer != nil {
		p.snapTimer.Stop()
		p.snapTimer = nil
	}
	if p.snapshotting {
		p.snapshotting = false
		res := <-p.snapDone
		if res.err == nil {
			p.prevSnapshot, p.lastSnapshot, p.lastSnapSize = p.lastSnapshot, res.index, res.size
		}
		p.answerSnapshot(res.err)
	}
	p.snapRunning = p.snapWaiting
	p.answerSnapshot(ErrClosed)
}

// truncateJournal drops the journal's segments that no partition needs,
// and asks the partitions that alone hold back a whole segment to
// snapshot. It runs after snapshots, on their goroutines, one at a time.
func (c *Coordinator) truncateJournal() {
	c.truncating.Lock()
	defer c.truncating.Unlock()
	if c.isClosed.Load() {
		return
	}
	start := time.Now()
	lowest := uint64(0)
	for i, p := range c.parts {
		if p.state.Load() != stateReady {
			return // a partition that did not load may need it all
		}
		if k := p.keepFrom.Load(); i == 0 || k < lowest {
			lowest = k
		}
	}
	n, err := c.d.journal.SegmentsBefore(lowest)
	if err == nil && n > 0 {
		err = c.d.journal.TruncateFront(lowest)
		if mo, ok := c.opts.Observer.(MaintenanceObserver); ok {
			mo.ObserveTruncate(time.Since(start), err)
		}
	}
	if err != nil {
		c.opts.Logger.Error("dropping the journal's front failed", "err", err)
		return
	}
	// When the journal holds more than its budget, the partitions that
	// alone keep its oldest segment are asked to snapshot.
	segs, err := c.d.journal.Segments()
	if err != nil || len(segs) < 2 || segs[1].First == 0 {
		return
	}
	var total int64
	for _, s := range segs {
		total += s.Bytes
	}
	if total <= c.JournalBudget() {
		return
	}
	for _, p := range c.parts {
		if p.keepFrom.Load() < segs[1].First {
			p.askSnapshot()
		}
	}
}

// JournalBudget returns how many journal bytes the partitions' live state
// warrants: four times, per partition, its newest snapshot's size or the
// least journal bytes between two of its snapshots, whichever is larger.
// A journal past it is held at its front by partitions that alone keep
// its oldest segment: quiet ones, whose previous snapshot is old. Its
// owner asks them to snapshot (AskSnapshot), and they let go after two
// snapshots (each keeps its previous one). Busy partitions snapshot by
// themselves, as their own appends reach the size of their state.
func (c *Coordinator) JournalBudget() int64 {
	var budget int64
	for _, p := range c.parts {
		budget += 4 * max(p.snapshotBytes, p.snapshotSize.Load())
	}
	return budget
}

// AskSnapshot asks partition to snapshot soon, without waiting for it
// (see JournalBudget). With nothing new since its newest snapshot, a
// replicated partition refreshes it: its replica compacts to it again
// (Replica.Compact).
func (c *Coordinator) AskSnapshot(partition int) {
	if partition >= 0 && partition < len(c.parts) {
		c.parts[partition].askSnapshot()
	}
}

// Snapshot writes a snapshot of every partition's state now, drops what
// the journal no longer needs, and returns once every partition is done.
// It is what the coordinator does by itself as the journal grows;
// operators call it before a backup.
func (c *Coordinator) Snapshot(ctx context.Context) error {
	waits := make([]chan error, len(c.parts))
	for i, p := range c.parts {
		ch := make(chan error, 1)
		waits[i] = ch
		_, err := c.submit(ctx, p, &request{control: func(p *partition) {
			p.snapWaiting = append(p.snapWaiting, ch)
		}})
		if err != nil {
			return err
		}
	}
	var errs []error
	for _, ch := range waits {
		select {
		case err := <-ch:
			errs = append(errs, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}
