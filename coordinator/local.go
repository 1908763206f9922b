package coordinator

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/valyala/bytebufferpool"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/log"
)

// localWriter writes a partition that is not replicated, through the
// commit pipeline every partition shares (log.Committer, whose comment
// states its invariants and steps). A commit runs on its caller's
// goroutine: under the writer's lock it applies the partition's durable
// batches, builds its record into the partition's waiting batch (or a new
// one, once the journal took that), and lets go of the lock; then it waits
// for the journal, appending itself when nobody does: the caller whose
// record started the batch (its leader) until the batch is durable, then
// it takes the lock again to apply every durable batch, its own among
// them unless a holder of the lock since did; the others until the batch
// is applied. Records are so built and applied in one order, under one
// lock, and answered only once durable.
//
// Its goroutine (run) builds the other requests, rare ones whose callers
// may give up while they are built, and does what no caller waits for:
// snapshots, and the batches whose callers gave up.
//
// The lock guards the fields below and the partition's writer-owned state
// (see partition). Its holder waits for nothing but the journal (settle),
// which never waits for a lock: see log.Committer's lock rule.
type localWriter struct {
	p     *partition
	stop  <-chan struct{} // closed when the coordinator closes; ends a snapshot
	snaps *log.Snapshots  // the partition's snapshot files, in the data directory

	mu writeLock
	// stopped is set once run has stopped: requests are refused.
	stopped bool
	// inflight holds the batches handed to the journal and not yet
	// applied, oldest first; the last may still wait in the journal's
	// queue, where it grows with the records built meanwhile.
	inflight []*batch
	spare    []*batch // finished batches, for reuse

	inbox inbox // the requests other than commits, for run
	// abandoned tells run that a caller gave up before its batch was
	// applied, so that run sees it appended and applied; holds at most
	// one.
	abandoned chan struct{}
}

// Bounds on one batch of a partition: past either, its next record starts
// a new batch, so one batch never becomes an oversized write.
const (
	maxBatchRequests = 1024
	maxBatchBytes    = 8 << 20
)

// maxSpare bounds the finished batches a partition keeps for reuse.
const maxSpare = 16

// batch is a batch of a partition's records handed to the journal: its
// requests, the buffer holding their records, their entries, and its
// place in the journal's queue.
type batch struct {
	reqs    []pendingEntry
	buf     *bytebufferpool.ByteBuffer
	entries []log.Entry // the ticket's, pointing into buf
	ticket  log.Ticket
	start   time.Time
	// applied is closed once the batch is applied, or failed: the
	// requests that joined the batch wait for it.
	applied chan struct{}
}

type pendingEntry struct {
	req *request
	out any
}

func newLocalWriter(p *partition, stop <-chan struct{}, snaps *log.Snapshots) *localWriter {
	return &localWriter{
		p:         p,
		stop:      stop,
		snaps:     snaps,
		mu:        make(writeLock, 1),
		inbox:     newInbox(),
		abandoned: make(chan struct{}, 1),
	}
}

// start begins r. A commit is built on the caller's goroutine: start
// builds its record into the partition's waiting batch, or a new one it
// then leads; its pending is empty when r is answered already (refused).
// Any other request goes to run, whose caller may give up while it is
// built.
func (w *localWriter) start(ctx context.Context, r *request) (pending, error) {
	defer failStop()
	r.ctx = ctx
	if r.done == nil {
		r.done = make(chan result, 1)
	}
	if r.build != nil || r.control != nil {
		return pending{}, w.inbox.put(ctx, r)
	}
	if err := w.mu.lockCtx(ctx); err != nil {
		return pending{}, err
	}
	defer w.unlock()
	if w.stopped {
		return pending{}, ErrClosed
	}
	return w.startLocked(r), nil
}

// startLocked builds r's record, with the lock held. The pending it
// returns holds, when r leads its batch, the batch's Done, else the
// channel closed once the batch is applied; it is empty when r is
// answered already (refused, or applied with the lock held: readsState).
func (w *localWriter) startLocked(r *request) pending {
	w.applyDurable()
	if r.readsState {
		w.settle()
	}
	b, leads := w.add(r)
	if b == nil {
		return pending{}
	}
	if r.readsState {
		// Later requests must see its effect (a generation check after a
		// delete, say), and only the tables show it.
		w.settle()
		return pending{}
	}
	if leads {
		return pending{ch: b.ticket.Done(), leads: true}
	}
	return pending{ch: b.applied}
}

// wait returns r's answer; ok is false when ctx ended first. It waits
// through the journal, which appends the queue on this goroutine when
// nobody else does: the leader of a batch (its first request) until the
// batch is durable, then it applies every durable batch of the partition
// unless a holder of the lock did; the others until their batch is
// applied, so that they are woken once. A caller that gives up leaves its
// batch to run. Whoever waits for several (CommitMany) waits for those it
// leads first: so the batch another joined is never held up by a leader
// waiting for a batch the other leads.
func (w *localWriter) wait(ctx context.Context, r *request, p pending) (res result, ok bool) {
	defer failStop()
	if p.ch != nil {
		// ctx is checked after the wait too: an append under way is not
		// interrupted, but its caller gives up all the same.
		if err := w.p.journal.Wait(ctx, p.ch); err != nil || ctx.Err() != nil {
			w.abandon()
			return result{}, false
		}
		if p.leads {
			select {
			case res := <-r.done: // applied by a holder of the lock since
				return res, true
			case w.mu <- struct{}{}:
				w.applyDurable()
				w.unlock()
			case <-ctx.Done():
				w.abandon()
				return result{}, false
			}
		}
	}
	select {
	case res := <-r.done:
		return res, true
	default:
	}
	select {
	case res := <-r.done:
		return res, true
	case <-ctx.Done():
		return result{}, false
	}
}

// abandon tells run that a caller gave up before its batch was applied.
func (w *localWriter) abandon() {
	select {
	case w.abandoned <- struct{}{}:
	default: // run is told already
	}
}

// unlock starts a snapshot if the batches applied make one due, and lets
// go of the lock.
func (w *localWriter) unlock() {
	if !w.stopped {
		w.p.maybeSnapshot(w.stop)
	}
	w.mu.unlock()
}

// run is the writer's goroutine. It builds the requests other than
// commits (their callers may give up meanwhile) and sees their batches
// appended and applied, runs control requests, starts snapshots and
// finishes them (the first as soon as it starts, if what was replayed
// makes one due), and sees the batches of callers that gave up appended
// and applied. It returns once close was called: with every batch applied
// and no snapshot running.
func (w *localWriter) run(stop <-chan struct{}) {
	p := w.p
	w.mu.lock()
	w.unlock()
	for {
		select {
		case r, ok := <-w.inbox.ch:
			w.mu.lock()
			if !ok {
				w.settle()
				w.stopped = true
				p.stopSnapshot()
				w.mu.unlock()
				return
			}
			var pend pending
			switch {
			case r.ctx.Err() != nil:
				r.done <- result{err: r.ctx.Err()}
			case r.control != nil:
				w.settle()
				r.control(p)
				r.done <- result{}
			default:
				pend = w.startLocked(r)
			}
			w.unlock()
			if pend.leads {
				w.applyWhenDurable(pend.ch)
			}
		case <-w.abandoned:
			w.mu.lock()
			var last <-chan struct{}
			if n := len(w.inflight); n > 0 {
				last = w.inflight[n-1].ticket.Done()
			}
			w.mu.unlock()
			w.applyWhenDurable(last)
		case res := <-p.snapDone:
			w.mu.lock()
			p.finishSnapshot(res, stop)
			w.unlock()
		case <-p.snapAsked:
			w.mu.lock()
			p.snapPinning = true
			w.unlock()
		case <-p.snapLater:
			w.mu.lock()
			p.snapshotLater(stop)
			w.unlock()
		}
	}
}

// applyWhenDurable waits until durable is closed, appending what the
// journal holds when nobody does, then applies every durable batch; it
// does nothing when durable is nil.
func (w *localWriter) applyWhenDurable(durable <-chan struct{}) {
	if durable == nil {
		return
	}
	_ = w.p.journal.Wait(context.Background(), durable)
	w.mu.lock()
	w.applyDurable()
	w.unlock()
}

// close has run stop once the control requests queued are answered.
func (w *localWriter) close() { w.inbox.close() }

// add builds r's record into the partition's waiting batch, if the journal
// has not taken it and it has room, or into a new batch it queues, which r
// then leads. It returns the batch, or nil when r is answered with its
// error.
func (w *localWriter) add(r *request) (b *batch, leads bool) {
	if err := r.ctx.Err(); err != nil {
		r.done <- result{err: err}
		return nil, false
	}
	if n := len(w.inflight); n > 0 {
		b := w.inflight[n-1]
		if len(b.reqs) < maxBatchRequests && b.buf.Len() < maxBatchBytes {
			built := false
			if b.ticket.Add(func(entries []log.Entry) []log.Entry {
				b.entries = entries
				built = w.build(b, r)
				return b.entries
			}) {
				if !built {
					return nil, false
				}
				return b, false
			}
		}
	}
	b = w.newBatch()
	if !w.build(b, r) {
		w.recycle(b)
		return nil, false
	}
	b.start = time.Now()
	if err := w.p.journal.Start(&b.ticket, b.entries); err != nil {
		w.fail(b, err)
		w.recycle(b)
		return nil, false
	}
	w.inflight = append(w.inflight, b)
	return b, true
}

// build builds r's record at the end of b, or answers r with its error.
func (w *localWriter) build(b *batch, r *request) bool {
	start := b.buf.Len()
	buf, out, err := w.p.check(r, b.buf.B)
	b.buf.B = buf
	if err != nil {
		r.done <- result{out: out, err: err}
		return false
	}
	b.reqs = append(b.reqs, pendingEntry{req: r, out: out})
	b.entries = append(b.entries, log.Entry{Partition: w.p.id, Type: r.typ, Payload: buf[start:]})
	return true
}

// applyDurable applies the batches in flight that are durable, oldest
// first, and stops at the first that is not.
func (w *localWriter) applyDurable() {
	for len(w.inflight) > 0 {
		select {
		case <-w.inflight[0].ticket.Done():
			w.finish()
		default:
			return
		}
	}
}

// settle waits until every batch in flight is durable, appending them if
// nobody does, and applies them: a request that reads the tables sees
// every earlier request's effect.
func (w *localWriter) settle() {
	for n := len(w.inflight); n > 0; n = len(w.inflight) {
		_ = w.p.journal.Wait(context.Background(), w.inflight[n-1].ticket.Done())
		w.applyDurable()
	}
}

// finish applies the oldest batch in flight, durable, to the tables, and
// answers its requests.
func (w *localWriter) finish() {
	p := w.p
	b := w.inflight[0]
	w.inflight = slices.Delete(w.inflight, 0, 1)
	defer w.recycle(b)
	first, _, err := b.ticket.Result()
	if p.observer != nil {
		p.observer.ObserveAppend(p.id, len(b.entries), b.buf.Len(), time.Since(b.start), err)
	}
	if err != nil {
		w.fail(b, err)
		return
	}
	p.sinceSnapshot += int64(b.buf.Len())
	p.applied = first + uint64(len(b.entries)) - 1
	p.offsets.Update(func(ow cache.OffsetsWriter) {
		for i, e := range b.entries {
			if err := p.apply(ow, first+uint64(i), e.Type, e.Payload); err != nil {
				// check decoded this record before it was queued.
				panic(fmt.Sprintf("coordinator: partition %d cannot apply its own record: %v", p.id, err))
			}
		}
		ow.SetApplied(p.applied)
	})
	p.watchers.wake(b.entries)
	for i, e := range b.reqs {
		e.req.done <- result{index: first + uint64(i), out: e.out}
	}
	close(b.applied)
}

// fail answers every request of b with the journal's error, and forgets
// the generations b carried: they were never durable. (Batches in flight
// behind it were checked against them; a commit they refused as stale
// stays refused.)
func (w *localWriter) fail(b *batch, err error) {
	p := w.p
	err = fmt.Errorf("%w: partition %d: %w", ErrWriteFailed, p.id, err)
	p.logger.Error("journal append failed; the journal repairs itself before the next write", "partition", p.id, "err", err)
	for _, e := range b.reqs {
		e.req.done <- result{err: err}
	}
	close(b.applied)
	clear(p.batchGen)
	for _, b := range w.inflight {
		for _, e := range b.entries {
			p.noteGeneration(e.Type, e.Payload)
		}
	}
}

// newBatch returns an empty batch, reusing a finished one if it can.
func (w *localWriter) newBatch() *batch {
	b := &batch{}
	if n := len(w.spare); n > 0 {
		b = w.spare[n-1]
		w.spare = w.spare[:n-1]
	}
	b.buf = bytebufferpool.Get()
	b.applied = make(chan struct{})
	return b
}

// recycle empties a finished batch for reuse, and forgets the generations
// built once no batch is in flight.
func (w *localWriter) recycle(b *batch) {
	clear(b.reqs)
	b.reqs = b.reqs[:0]
	clear(b.entries) // drop the payloads
	b.entries = b.entries[:0]
	// The buffer goes back to the pool, which keeps buffers of the sizes
	// in use: a burst of large batches does not stay held here.
	bytebufferpool.Put(b.buf)
	b.buf = nil
	b.ticket = log.Ticket{}
	if len(w.spare) < maxSpare {
		w.spare = append(w.spare, b)
	}
	if len(w.inflight) == 0 {
		clear(w.p.batchGen)
	}
}

// snapshotAt: with no batch in flight, every record of the partition up
// to the journal's last index is applied (so a quiet partition's snapshot
// lets the journal go); with batches in flight, whose records will have
// higher indexes, it is the last index applied, and the snapshot waits
// until that passes the newest snapshot's.
func (w *localWriter) snapshotAt() (index uint64, refresh, ok bool) {
	if len(w.inflight) > 0 {
		return w.p.applied, false, w.p.applied > w.p.lastSnapshot
	}
	return w.p.journal.LastIndex(), false, true
}

// snapshotted: before a snapshot, the journal is synced, even under
// UnsafeNoSync: a snapshot must never cover records a machine crash could
// take back. Once it is durable the journal is needed only from the
// record after the previous one, and older snapshots go. With prev 0 no
// older snapshot loaded: those on disk are damaged or too old for the
// journal.
func (w *localWriter) snapshotted(prev, index uint64, _, written bool) error {
	if !written {
		return w.p.journal.Sync()
	}
	w.p.keepFrom.Store(prev + 1)
	return w.snaps.Prune(index, prev)
}

// keepSnapshot writes the snapshot file of index in the data directory:
// a temporary file, synced, renamed into place (log.Snapshots.Write).
func (w *localWriter) keepSnapshot(index uint64, content func(io.Writer) error) (int64, error) {
	return w.snaps.Write(index, content)
}

// lead: a single node leads every partition.
func (w *localWriter) lead() (uint64, bool) { return 0, true }

// barrier: every write acknowledged is applied.
func (w *localWriter) barrier(context.Context) error { return nil }

// failStop stops the process on a panic of the write path, as a panic on
// a writer's goroutine does: a panic on a caller's goroutine could be
// recovered (net/http recovers its handlers'), leaving the partition's
// tables half changed.
func failStop() {
	if v := recover(); v != nil {
		go func() { panic(v) }()
		select {}
	}
}

// writeLock is the local writer's lock: a mutex whose callers can stop
// waiting for it when their context ends (its holder may wait for the
// journal when a request must see every earlier one applied).
type writeLock chan struct{}

func (l writeLock) lock()   { l <- struct{}{} }
func (l writeLock) unlock() { <-l }

func (l writeLock) lockCtx(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// inbox queues requests for a writer's goroutine until it is closed.
type inbox struct {
	ch     chan *request
	mu     sync.RWMutex
	closed bool // guarded by mu; ch is closed with it
}

// inboxSize bounds the requests queued for a writer's goroutine.
const inboxSize = 1024

func newInbox() inbox { return inbox{ch: make(chan *request, inboxSize)} }

// put queues r, or returns ErrClosed once the inbox is closed, or ctx's
// error if it ends while the inbox is full.
func (q *inbox) put(ctx context.Context, r *request) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return ErrClosed
	}
	select {
	case q.ch <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops the inbox taking requests; its goroutine drains what is
// queued, then sees ch closed.
func (q *inbox) close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
}
