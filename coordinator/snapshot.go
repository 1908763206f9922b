package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/bytebufferpool"

	"github.com/offsetd/offsetd/cache"
)

// Snapshots bound the log and the restart time. When a partition has
// appended enough since its last snapshot, a background goroutine writes
// the live state as of log index S: it lists the groups, then reads them one
// at a time under a short read lock while the writer goes on committing. So
// each group is captured exactly as of some index J >= S (the table's
// applied index under that lock), which its record carries. On load, the
// log from S+1 is replayed over the snapshot, skipping for each group the
// records up to its J: the group's keys, generation, version and last
// commit come out as if the whole log had been replayed. Once the snapshot
// is durable the previous one's log is dropped, keeping that snapshot and
// its tail so that a damaged newest snapshot can fall back to it.

// maxSnapEntries bounds the offsets in one snapshot record.
const maxSnapEntries = 1024

type snapResult struct {
	index uint64
	size  int64
	took  time.Duration
	err   error
	// The truncation that followed, if any.
	truncated    bool
	truncateTook time.Duration
	truncateErr  error
}

// maybeSnapshot starts a snapshot when enough has been appended since the
// last one, or when Snapshot asked for one.
func (p *partition) maybeSnapshot(stop <-chan struct{}) {
	if p.snapshotting {
		return
	}
	asked := len(p.snapWaiting) > 0
	due := p.snapshotBytes >= 0 && p.sinceSnapshot >= max(p.snapshotBytes, p.lastSnapSize)
	if !asked && !due {
		return
	}
	p.snapRunning, p.snapWaiting = p.snapWaiting, nil
	index := p.log.LastIndex()
	if index == 0 || index == p.lastSnapshot {
		p.answerSnapshot(nil) // nothing new to capture
		return
	}
	p.snapshotting = true
	p.sinceSnapshot = 0
	prev := p.lastSnapshot
	go func() {
		start := time.Now()
		res := snapResult{index: index}
		res.size, res.err = p.writeSnapshot(index, stop)
		res.took = time.Since(start)
		if res.err == nil && prev != 0 {
			// Unlinking segments can take milliseconds each: done here, off
			// the writer goroutine, commits do not wait for it.
			start = time.Now()
			res.truncated = true
			res.truncateErr = p.truncate(prev)
			res.truncateTook = time.Since(start)
		}
		p.snapDone <- res
	}()
}

// writeSnapshot writes the tables as of index (at least) to a snapshot file.
// It runs beside the writer goroutine and takes only short read locks.
func (p *partition) writeSnapshot(index uint64, stop <-chan struct{}) (int64, error) {
	w, err := p.log.CreateSnapshot(index)
	if err != nil {
		return 0, err
	}
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	var entries []cache.Entry
	for i, name := range p.offsets.Groups(nil) {
		if i%256 == 0 {
			select {
			case <-stop:
				w.Abort()
				return 0, errStopped
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
		for len(entries) > 0 {
			n := min(len(entries), maxSnapEntries)
			buf.B = encodeSnapGroup(buf.B[:0], name, info, at, entries[:n])
			if err := w.Add(recSnapGroup, buf.B); err != nil {
				w.Abort()
				return 0, err
			}
			entries = entries[n:]
		}
	}
	for _, m := range p.mappings.All(nil) {
		b, err := json.Marshal(m)
		if err == nil {
			err = w.Add(recMapping, b)
		}
		if err != nil {
			w.Abort()
			return 0, err
		}
	}
	for _, scope := range p.switches.Scopes(nil) {
		if err := w.Add(recGlobalRead, encodeGlobalRead(buf.B[:0], scope, true)); err != nil {
			w.Abort()
			return 0, err
		}
	}
	return w.Commit()
}

// finishSnapshot runs on the writer goroutine once a snapshot is written:
// the log before the previous snapshot, and older snapshots, go.
func (p *partition) finishSnapshot(res snapResult, stop <-chan struct{}) {
	p.snapshotting = false
	defer p.maybeSnapshot(stop) // one asked for while this one ran
	if mo, ok := p.observer.(MaintenanceObserver); ok {
		mo.ObserveSnapshot(p.id, res.size, res.took, res.err)
	}
	if res.err != nil {
		p.answerSnapshot(res.err)
		if !errors.Is(res.err, errStopped) {
			p.logger.Error("snapshot failed; the log keeps growing until one succeeds", "partition", p.id, "err", res.err)
		}
		return
	}
	p.logger.Debug("snapshot written", "partition", p.id, "index", res.index, "bytes", res.size, "took", res.took)
	p.lastSnapshot, p.lastSnapSize = res.index, res.size
	if res.truncated {
		if mo, ok := p.observer.(MaintenanceObserver); ok {
			mo.ObserveTruncate(p.id, res.truncateTook, res.truncateErr)
		}
		if res.truncateErr != nil {
			p.logger.Error("dropping the log before the previous snapshot failed", "partition", p.id, "err", res.truncateErr)
		}
	}
	p.answerSnapshot(res.truncateErr)
}

// answerSnapshot tells the callers of Snapshot waiting for the snapshot
// that just finished.
func (p *partition) answerSnapshot(err error) {
	for _, ch := range p.snapRunning {
		ch <- err
	}
	p.snapRunning = nil
}

// truncate keeps the snapshot at prev and the log after it, and drops what
// is older. It runs on the snapshot goroutine, beside the writer.
func (p *partition) truncate(prev uint64) error {
	if prev+1 > p.log.FirstIndex() {
		if err := p.log.TruncateFront(prev + 1); err != nil {
			return fmt.Errorf("coordinator: partition %d: %w", p.id, err)
		}
	}
	return p.log.RemoveSnapshotsBefore(prev)
}

// stopSnapshot waits for a running snapshot at Close (c.stop makes it
// quit) and fails the callers still waiting for one.
func (p *partition) stopSnapshot() {
	if p.snapshotting {
		p.snapshotting = false
		res := <-p.snapDone
		if res.err == nil {
			p.lastSnapshot, p.lastSnapSize = res.index, res.size
		}
		p.answerSnapshot(res.err)
	}
	p.snapRunning = p.snapWaiting
	p.answerSnapshot(ErrClosed)
}

// Snapshot writes a snapshot of every partition's state now, drops each
// log's entries before the partition's previous snapshot, and returns once
// every partition is done. It is what the coordinator does by itself every
// Options.SnapshotBytes of log; operators call it before a backup.
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
