package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/internal/signal"
	"github.com/offsetd/offsetd/log"
)

// replicatedWriter writes a partition that a replication drives (see
// OpenReplicated). Its goroutine (run) owns the partition's writer-owned
// state and the fields below, and is the only one to touch them: it builds
// requests against the tables as the local writer does, but proposes their
// records to the replication group, and applies whatever the group
// commits, its own records and those of other leaders alike, answering its
// requests as theirs come back. It also runs the partition's snapshots.
type replicatedWriter struct {
	p       *partition
	replica Replica
	inbox   inbox // every request, for run
	// waiting holds requests in arrival order that cannot be built yet:
	// the leader has not applied its term's first entry, or the request
	// reads the tables while records are in flight.
	waiting []*request
	// inflight holds the proposed records not yet committed, oldest first.
	inflight []proposed
	data     [][]byte      // the records of batch, for Propose
	batch    []proposed    // built, to propose together
	applied  atomic.Uint64 // the partition's applied, for barrier
	// progress fires after every batch of entries applied, for barrier.
	progress *signal.Signal
	woken    []log.Entry // scratch: the records applied, for the watchers
}

// proposed is one record a leader proposed: it is committed if the entry
// at index comes back with term.
type proposed struct {
	req         *request
	out         any
	term, index uint64
}

func newReplicatedWriter(p *partition, replica Replica) *replicatedWriter {
	w := &replicatedWriter{p: p, replica: replica, inbox: newInbox(), progress: signal.New()}
	w.applied.Store(p.applied)
	return w
}

// start queues r for run. A commit's offsets are copied: run may build it
// after its caller gave up and reused the slice.
func (w *replicatedWriter) start(ctx context.Context, r *request) (pending, error) {
	r.ctx = ctx
	if r.done == nil {
		r.done = make(chan result, 1)
	}
	if r.build == nil && r.control == nil {
		r.commit.offsets = slices.Clone(r.commit.offsets)
	}
	return pending{}, w.inbox.put(ctx, r)
}

// wait waits for run's answer to r.
func (w *replicatedWriter) wait(ctx context.Context, r *request, _ pending) (result, bool) {
	if ctx.Done() == nil {
		return <-r.done, true
	}
	select {
	case res := <-r.done:
		return res, true
	case <-ctx.Done():
		return result{}, false
	}
}

// close has run stop once the requests queued are taken.
func (w *replicatedWriter) close() { w.inbox.close() }

// run is the writer's goroutine. It returns when the inbox is closed:
// requests still waiting or in flight then get ErrClosed (a record in
// flight may still be committed by the group). If the replica stops first,
// it answers every request with ErrClosed until the inbox is closed.
func (w *replicatedWriter) run(stop <-chan struct{}) {
	p := w.p
	committed := w.replica.Committed()
	defer p.stopSnapshot()
	p.maybeSnapshot(stop)
	for {
		select {
		case res := <-p.snapDone:
			p.finishSnapshot(res, stop)
		case <-p.snapAsked:
			p.snapPinning = true
			p.maybeSnapshot(stop)
		case <-p.snapLater:
			p.snapshotLater(stop)
		case req, ok := <-w.inbox.ch:
			if !ok {
				w.failWaiting(ErrClosed)
				w.failInflight(ErrClosed)
				return
			}
			w.waiting = append(w.waiting, req)
			w.serveWaiting(stop)
		case entries, ok := <-committed:
			if !ok {
				w.failInflight(ErrClosed)
				w.failWaiting(ErrClosed)
				for req := range w.inbox.ch {
					req.done <- result{err: ErrClosed}
				}
				return
			}
			if err := w.applyCommitted(entries); err != nil {
				w.failStopped(err)
				return
			}
			p.maybeSnapshot(stop)
			if leader, _ := w.replica.Lead(); leader != w.replica.ID() {
				// Another leader decides the fate of what is in flight, and
				// this node may not learn it for long (cut off, say).
				w.failInflight(fmt.Errorf("%w: partition %d", ErrLeadershipLost, p.id))
			}
			w.serveWaiting(stop)
		}
	}
}

// failStopped stops a replicated partition that cannot go on (a snapshot
// received that does not read back): it answers every request with err
// until the inbox is closed.
func (w *replicatedWriter) failStopped(err error) {
	p := w.p
	err = fmt.Errorf("coordinator: partition %d stopped: %w", p.id, err)
	p.logger.Error("replicated partition stopped", "partition", p.id, "err", err)
	p.loadErr = err
	p.state.Store(stateFailed)
	w.failInflight(err)
	w.failWaiting(err)
	for req := range w.inbox.ch {
		req.done <- result{err: err}
	}
}

// serveWaiting builds and proposes the waiting requests, in order, as far
// as it can.
func (w *replicatedWriter) serveWaiting(stop <-chan struct{}) {
	p := w.p
	n := 0
	for n < len(w.waiting) {
		r := w.waiting[n]
		if err := r.ctx.Err(); err != nil {
			r.done <- result{err: err}
			n++
			continue
		}
		if r.control != nil { // a snapshot asked for: each replica takes its own
			r.control(p)
			r.done <- result{}
			p.maybeSnapshot(stop)
			n++
			continue
		}
		leader, start := w.replica.Lead()
		if leader != w.replica.ID() {
			r.done <- result{err: &NotLeaderError{Partition: p.id, Leader: leader}}
			n++
			continue
		}
		if start == 0 || p.applied < start || (r.readsState && (len(w.inflight) > 0 || len(w.batch) > 0)) {
			break // wait for the next committed entries
		}
		w.build(r)
		n++
		if r.readsState {
			break // later requests must see its effect, which only the tables show
		}
	}
	w.waiting = w.waiting[:copy(w.waiting, w.waiting[n:])]
	w.proposeBatch()
}

// build builds r's record into the batch to propose, or answers r with its
// error.
func (w *replicatedWriter) build(r *request) {
	b, out, err := w.p.check(r, nil)
	if err != nil {
		r.done <- result{out: out, err: err}
		return
	}
	data := make([]byte, 0, 1+len(b))
	w.data = append(w.data, append(append(data, r.typ), b...))
	w.batch = append(w.batch, proposed{req: r, out: out})
}

// proposeBatch proposes the records built since the last batch as
// consecutive entries of one proposal: one append, and one fsync, for all.
func (w *replicatedWriter) proposeBatch() {
	if len(w.batch) == 0 {
		return
	}
	term, first, err := w.replica.Propose(context.Background(), w.data)
	for i, pr := range w.batch {
		if err != nil {
			// Not appended (a transfer of the lead under way, say).
			pr.req.done <- result{err: fmt.Errorf("%w: partition %d: %v", ErrNotCommitted, w.p.id, err)}
			continue
		}
		pr.term, pr.index = term, first+uint64(i)
		w.inflight = append(w.inflight, pr)
	}
	clear(w.data)
	w.data = w.data[:0]
	clear(w.batch)
	w.batch = w.batch[:0]
}

// applyCommitted applies committed entries to the tables, in order, and
// answers the requests whose records they are, or that they show lost.
func (w *replicatedWriter) applyCommitted(entries []Committed) error {
	p := w.p
	for _, e := range entries {
		if e.Snapshot && e.Index > p.applied {
			if err := w.installSnapshot(e.Index); err != nil {
				return err
			}
		}
	}
	p.offsets.Update(func(ow cache.OffsetsWriter) {
		for _, e := range entries {
			if e.Index <= p.applied {
				continue
			}
			if len(e.Data) > 0 {
				if err := p.apply(ow, e.Index, e.Data[0], e.Data[1:]); err != nil {
					// The leader decoded it before proposing it.
					panic(fmt.Sprintf("coordinator: partition %d cannot apply committed entry %d: %v", p.id, e.Index, err))
				}
				p.sinceSnapshot += int64(len(e.Data))
				w.woken = append(w.woken, log.Entry{Partition: p.id, Type: e.Data[0], Payload: e.Data[1:]})
			}
			p.applied = e.Index
		}
		ow.SetApplied(p.applied)
	})
	w.applied.Store(p.applied)
	p.watchers.wake(w.woken)
	clear(w.woken)
	w.woken = w.woken[:0]
	n := 0
	for ; n < len(w.inflight); n++ {
		pr := w.inflight[n]
		at := entryAt(entries, pr.index)
		if at == nil {
			break
		}
		if at.Term == pr.term {
			pr.req.done <- result{index: pr.index, out: pr.out}
		} else {
			pr.req.done <- result{err: fmt.Errorf("%w: partition %d index %d", ErrNotCommitted, p.id, pr.index)}
		}
	}
	w.inflight = w.inflight[:copy(w.inflight, w.inflight[n:])]
	if len(w.inflight) == 0 {
		clear(p.batchGen)
	}
	w.progress.Fire()
	return nil
}

// installSnapshot replaces the tables by the partition's snapshot as of
// index, a leader's snapshot this node received in place of the entries up
// to index, which the replica keeps (Replica.ReadSnapshot). Readers see
// the old tables or the new ones, never a mix of groups (see
// restoreSnapshot).
func (w *replicatedWriter) installSnapshot(index uint64) error {
	p := w.p
	for _, scope := range p.switches.Scopes(nil) {
		p.switches.SetGlobalRead(scope, false) // the snapshot holds those on
	}
	p.capturedAt = make(map[string]uint64)
	p.txns.reset()
	err := w.replica.ReadSnapshot(index, func(content io.Reader) error {
		return p.restoreSnapshot(index, content)
	})
	if err != nil {
		return fmt.Errorf("snapshot %d received: %w", index, err)
	}
	p.applied = index
	p.prevSnapshot, p.lastSnapshot = 0, index
	p.sinceSnapshot = 0
	p.switched.Fire()
	p.watchers.wakeAll()
	return nil
}

// entryAt returns the entry of entries at index, or nil.
func entryAt(entries []Committed, index uint64) *Committed {
	if len(entries) == 0 || index < entries[0].Index || index > entries[len(entries)-1].Index {
		return nil
	}
	e := &entries[index-entries[0].Index]
	if e.Index != index {
		return nil
	}
	return e
}

func (w *replicatedWriter) failWaiting(err error) {
	for _, r := range w.waiting {
		r.done <- result{err: err}
	}
	w.waiting = w.waiting[:0]
}

func (w *replicatedWriter) failInflight(err error) {
	for _, pr := range w.inflight {
		pr.req.done <- result{err: err}
	}
	w.inflight = w.inflight[:0]
}

// snapshotAt: a replicated partition's snapshot names an index of its
// group's log, the last applied. With nothing new, one asked for because
// the partition holds the journal's front refreshes the newest: it
// compacts the group's log to it and rewrites the group's records at the
// journal's end, so that a quiet partition gives up falling back to its
// older snapshot and the journal can go.
func (w *replicatedWriter) snapshotAt() (index uint64, refresh, ok bool) {
	p := w.p
	index = p.applied
	return index, index != 0 && index == p.lastSnapshot && p.snapPinning, true
}

// snapshotted: before the new snapshot, the group's log goes up to the
// previous one (already durable), or to the newest when refreshing, and
// every entry applied is durable; the replica drops the snapshots older
// than that one (Replica.Compact). After it there is nothing more to do:
// the partition may hold, above prev, a snapshot its leader installed
// while this one was written, which stays.
func (w *replicatedWriter) snapshotted(prev, index uint64, refresh, written bool) error {
	if written {
		return nil
	}
	to := prev
	if refresh {
		to = index
	}
	return w.replica.Compact(context.Background(), to)
}

// keepSnapshot hands the snapshot to the replica, which keeps it
// (Replica.WriteSnapshot).
func (w *replicatedWriter) keepSnapshot(index uint64, content func(io.Writer) error) (int64, error) {
	return w.replica.WriteSnapshot(index, content)
}

// lead returns the leader as the replica knows it.
func (w *replicatedWriter) lead() (leader uint64, self bool) {
	leader, _ = w.replica.Lead()
	return leader, leader == w.replica.ID()
}

// barrier uses Raft's ReadIndex: the leader confirms with a quorum that it
// still leads, then waits to have applied up to its commit index.
func (w *replicatedWriter) barrier(ctx context.Context) error {
	p := w.p
	if leader, _ := w.replica.Lead(); leader != w.replica.ID() {
		return &NotLeaderError{Partition: p.id, Leader: leader}
	}
	index, err := w.replica.ReadIndex(ctx)
	if errors.Is(err, ErrNotLeader) {
		// The lead moved while the read waited; Lead may not know where yet.
		leader, _ := w.replica.Lead()
		if leader == w.replica.ID() {
			leader = 0
		}
		return &NotLeaderError{Partition: p.id, Leader: leader}
	}
	if err != nil {
		return fmt.Errorf("coordinator: partition %d: %w", p.id, err)
	}
	for {
		changed := w.progress.Wait()
		if w.applied.Load() >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
