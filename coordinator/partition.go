package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/valyala/bytebufferpool"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/log"
	"github.com/offsetd/offsetd/statictopic"
)

// Bounds on one group commit: the writer stops draining its queue when either
// is reached, so one batch never becomes an oversized write.
const (
	maxBatchRequests = 1024
	maxBatchBytes    = 8 << 20
)

const (
	stateLoading int32 = iota
	stateReady
	stateFailed
)

// partition is one internal partition: its tables, its snapshots, and the
// lock under which its records are built, handed to the journal and
// applied to its tables, by its writer goroutine or, for commits, by their
// callers (startDirect, waitDirect).
type partition struct {
	id       int
	logger   *slog.Logger
	observer Observer
	reqs     chan *request
	// The tables; replaced only while loading, before the partition is ready.
	offsets  *cache.Offsets
	mappings *cache.Mappings
	switches *cache.Switches // the global-read switches of the scopes that hash here
	// switched fires when any partition applies a global-read record.
	switched *signal

	state       atomic.Int32
	loadErr     error         // set before state becomes stateFailed
	loadTime    time.Duration // set before state becomes stateReady
	loadRecords int           // journal records replayed; set before stateReady
	loadBytes   int64         // snapshot and journal bytes read; set before stateReady

	// committer makes the partition's batches durable in the journal that
	// every partition shares; set before the writer starts.
	committer *log.Committer
	snaps     *log.Snapshots // the partition's snapshot files

	// mu guards the write state below. The writer goroutine holds it while
	// it handles requests, applies batches or starts and finishes
	// snapshots; callers that commit directly (startDirect, waitDirect) hold it while
	// they build their record and hand it to the committer, and while
	// they apply the batches that are durable.
	mu writeLock
	// stopped is set, under mu, once the writer has stopped: direct
	// callers then start no snapshot.
	stopped bool
	// gaveUp tells the writer that a direct caller gave up before its
	// batch was applied, so that the writer applies it; holds at most one.
	gaveUp chan struct{}

	// Write state, guarded by mu. The batch being built (pending, in buf),
	// then the batches handed to the committer and not yet applied, oldest
	// first: the next batch forms while earlier ones sync. pending is
	// empty whenever mu is free.
	pending  []pendingEntry
	buf      *bytebufferpool.ByteBuffer
	inflight []*batch
	spare    []*batch // finished batches, for reuse
	applied  uint64   // the index of the last record applied
	// batchGen holds, per group, the highest generation among the
	// commits built and not yet applied (pending or in flight); it is
	// cleared once nothing is.
	batchGen     map[string]int32
	view         recordView // the record being applied
	lastMetadata string     // the metadata string made last
	mds          []string   // the metadata of the snapshot record being applied
	// capturedAt, while loading, holds the index each group of the snapshot
	// was captured at, where that is past the snapshot's own index.
	capturedAt map[string]uint64

	// watchers are the long polls waiting for a group or static topic of
	// the partition to change.
	watchers watchers

	// Snapshot state, owned by the loader, then guarded by mu.
	snapshotBytes int64 // the least journal bytes between two snapshots
	snapInterval  time.Duration
	lastSnapAt    time.Time // when the newest snapshot was started
	lastSnapshot  uint64    // index of the newest good snapshot, 0 if none
	prevSnapshot  uint64    // index of the one before it, kept to fall back to; 0 if none
	lastSnapSize  int64     // the newest one's size in bytes
	sinceSnapshot int64     // payload bytes appended since it
	maxSeen       uint64    // the highest index a snapshot named at load
	// keepFrom is the lowest journal index the partition may still need:
	// the record after its previous snapshot, which it falls back to if
	// the newest is damaged. The journal is truncated below the lowest of
	// all partitions'.
	keepFrom      atomic.Uint64
	snapAsked     chan struct{} // asks for a snapshot; holds at most one
	snapPinning   bool          // a snapshot was asked for because the partition pins the journal
	snapshotIndex atomic.Uint64 // lastSnapshot, for Stats
	snapshotSize  atomic.Int64  // lastSnapSize, for Stats
	// onSnapshot is called on the snapshot goroutine after each snapshot
	// is durable, to truncate the journal.
	onSnapshot   func()
	snapshotting bool            // a snapshot goroutine is running
	snapDone     chan snapResult // its result
	snapWaiting  []chan error    // callers of Snapshot waiting for the next snapshot to start
	snapRunning  []chan error    // callers of Snapshot waiting for the running one
	// snapTimer, when set, fires snapLater once SnapshotInterval lets go a
	// snapshot that is due by its bytes (snapshotIn); snapLater holds at
	// most one.
	snapTimer *time.Timer
	snapLater chan struct{}

	rep *replicaState // set, before the writer starts, when the partition is replicated
}

// request is one call to a partition: waiting for its writer goroutine,
// or, for a commit, built on its caller's (startDirect).
type request struct {
	ctx context.Context
	typ byte
	// readsState marks requests whose build reads the tables (deletes,
	// mapping changes): the writer flushes the pending batch before building
	// them, so they see every earlier request applied.
	readsState bool
	// build validates the request against the partition's state and appends
	// the record's payload to dst; out is what the caller gets back in the
	// request's result (with its error, too). An error fails the request,
	// writing nothing. build runs under the partition's lock; on the
	// writer goroutine it may run after the caller has given up (its ctx
	// ended), so it must only read what the request owns (inputs are
	// copied when the request is made) and must write nothing but its
	// return values.
	build func(p *partition, dst []byte) (b []byte, out any, err error)
	// commit holds a commit's inputs; a commit request has no build
	// (see record).
	commit commitArgs
	// control, if set, replaces build: it runs on the writer goroutine after
	// the pending batch is flushed, and writes nothing.
	control func(p *partition)
	done    chan result
}

// record builds the request's record: its build, or its commit's.
func (r *request) record(p *partition, dst []byte) (b []byte, out any, err error) {
	if r.build != nil {
		return r.build(p, dst)
	}
	b, err = r.commit.build(p, dst)
	return b, nil, err
}

// result is a request's answer, sent on its done channel: the caller reads
// the request's outcome only from here, never from memory the writer shares.
type result struct {
	index uint64
	out   any // what build returned with the record
	err   error
}

type pendingEntry struct {
	req        *request
	start, end int
	out        any
}

// batch is a partition's batch handed to the committer: its requests, the
// buffer holding their records, and its place in the committer's queue.
type batch struct {
	reqs    []pendingEntry
	buf     *bytebufferpool.ByteBuffer
	entries []log.Entry
	ticket  log.Ticket
	start   time.Time
	// writer: the writer goroutine applies the batch once it is durable.
	// A batch a direct commit started is its caller's to apply instead
	// (it waits for the journal anyway), until a caller gives up and the
	// writer takes every batch in flight back.
	writer bool
}

// maxInflight bounds a partition's batches handed to the committer and
// not yet applied; beyond it the writer stops taking requests until the
// oldest is durable. (Direct commits are bounded by their callers, and
// join the one batch that waits in the journal's queue.)
const maxInflight = 64

// maxSpare bounds the finished batches a partition keeps for reuse.
const maxSpare = 16

func newPartition(id int, opts Options, switched *signal, snaps *log.Snapshots) *partition {
	return &partition{
		snaps:     snaps,
		snapAsked: make(chan struct{}, 1),
		snapLater: make(chan struct{}, 1),
		gaveUp:    make(chan struct{}, 1),
		mu:        make(writeLock, 1),
		id:        id,
		logger:    opts.Logger,
		observer:  opts.Observer,
		reqs:      make(chan *request, maxBatchRequests),
		offsets:   cache.NewOffsets(),
		mappings:  cache.NewMappings(),
		switches:  cache.NewSwitches(),
		switched:  switched,
		batchGen:  make(map[string]int32),
		buf:       bytebufferpool.Get(),

		snapshotBytes: snapshotFloor(opts),
		snapInterval:  opts.SnapshotInterval,
		snapDone:      make(chan snapResult, 1),
	}
}

// ready returns nil when the partition serves requests, or why it does not.
func (p *partition) ready() error {
	switch p.state.Load() {
	case stateReady:
		return nil
	case stateLoading:
		return fmt.Errorf("%w: partition %d", ErrLoading, p.id)
	default:
		return fmt.Errorf("coordinator: partition %d failed to load: %w", p.id, p.loadErr)
	}
}

// run is the writer goroutine. It drains every queued request into one
// batch and hands it to the committer, which makes it durable with other
// partitions' batches in one journal append and fsync; without waiting for
// that, it goes on forming the next batch. As each batch is durable, in
// order, it applies it to the tables and answers its requests (unless a
// caller that committed directly did so first). Between batches it starts
// snapshots and finishes them: the first as soon as it starts, if what it
// replayed makes one due. It returns when reqs is closed and drained, and
// every batch applied.
func (p *partition) run(stop <-chan struct{}) {
	p.mu.lock()
	p.maybeSnapshot(stop)
	p.mu.unlock()
	for {
		p.mu.lock()
		reqs := p.reqs
		if len(p.inflight) >= maxInflight {
			reqs = nil
		}
		var durable <-chan struct{}
		if b := p.writersBatch(); b != nil {
			durable = b.ticket.Done()
		}
		p.mu.unlock()
		select {
		case r, ok := <-reqs:
			if !ok {
				p.mu.lock()
				p.stop()
				p.mu.unlock()
				return
			}
			p.mu.lock()
			p.add(r)
			open := true
		drain:
			for len(p.pending) < maxBatchRequests && p.buf.Len() < maxBatchBytes {
				select {
				case r, ok := <-p.reqs:
					if !ok {
						open = false
						break drain
					}
					p.add(r)
				default:
					break drain
				}
			}
			p.submit()
			if !open {
				p.stop()
				p.mu.unlock()
				return
			}
			p.maybeSnapshot(stop)
			p.mu.unlock()
		case <-durable:
			p.mu.lock()
			p.applyDurable()
			p.maybeSnapshot(stop)
			p.mu.unlock()
		case <-p.gaveUp:
			// A direct caller gave up before its batch was applied: apply
			// what is durable, and take the rest in flight, which may hold
			// that caller's batch.
			p.mu.lock()
			p.applyDurable()
			for _, b := range p.inflight {
				b.writer = true
			}
			p.maybeSnapshot(stop)
			p.mu.unlock()
		case res := <-p.snapDone:
			p.mu.lock()
			p.finishSnapshot(res, stop)
			p.mu.unlock()
		case <-p.snapAsked:
			p.mu.lock()
			p.snapPinning = true
			p.maybeSnapshot(stop)
			p.mu.unlock()
		case <-p.snapLater:
			p.mu.lock()
			p.snapshotLater(stop)
			p.mu.unlock()
		}
	}
}

// stop ends the writer's work once reqs is closed: every batch applied,
// no snapshot running, and no direct commit taken any more. The caller
// holds mu.
func (p *partition) stop() {
	p.settle()
	p.stopped = true
	p.stopSnapshot()
	bytebufferpool.Put(p.buf)
	p.buf = nil
}

// writersBatch returns the oldest batch in flight that the writer applies,
// or nil. Batches are durable in order, so once it is, so is every batch
// before it.
func (p *partition) writersBatch() *batch {
	for _, b := range p.inflight {
		if b.writer {
			return b
		}
	}
	return nil
}

// startDirect starts r, a commit, on the caller's goroutine, without the
// writer: under mu it builds r's record and hands it to the journal,
// adding it to the partition's queued batch when there is one. When r
// starts a new batch, r's caller leads it: startDirect returns the channel
// closed once the batch is durable, and the caller applies it (waitDirect).
// It returns nil when r joined a batch someone else leads, or has been
// answered already (refused, or failed at once): the caller then only
// waits for its answer. A batch so wakes its leader and then each caller
// once, as a bare group commit does, and keeps the writer's semantics:
// records are built and applied in one order, under one lock, with the
// generations in flight. A caller that waits for r before it takes any
// other lock (own) may be told lone: its batch is alone in the journal's
// queue and the committer idle, and the caller appends it itself
// (log.Committer.StartOwn), in waitDirect.
func (p *partition) startDirect(ctx context.Context, r *request, own bool) (durable <-chan struct{}, lone bool, err error) {
	defer failStop()
	if err := p.ready(); err != nil {
		return nil, false, err
	}
	r.ctx = ctx
	if r.done == nil {
		r.done = make(chan result, 1)
	}
	if err := p.mu.lockCtx(ctx); err != nil {
		return nil, false, err
	}
	defer p.mu.unlock()
	if p.stopped {
		return nil, false, ErrClosed
	}
	p.add(r)
	if len(p.pending) == 0 {
		return nil, false, nil // answered
	}
	lone = p.hand(own)
	if n := len(p.inflight); n > 0 && p.inflight[n-1].leads(r) {
		b := p.inflight[n-1]
		b.writer = false
		return b.ticket.Done(), lone, nil
	}
	return nil, lone, nil // joined a batch, or failed at once
}

// waitDirect waits for the answer to r, started by startDirect, and
// reports whether it came: ok is false when ctx ended first. The leader of
// a batch (durable is not nil) waits until the batch is durable, then
// applies every durable batch of the partition in order unless someone
// did; a leader that gives up has the writer apply its batch. A lone
// leader first appends its batch itself (nobody else would), and gives up
// after that if its ctx ended meanwhile: an fsync under way is not
// interrupted. One whose ctx ended before wakes the committer's goroutine
// to append the batch instead, and gives up at once.
func (p *partition) waitDirect(ctx context.Context, r *request, durable <-chan struct{}, lone bool, stop <-chan struct{}) (res result, ok bool) {
	defer failStop()
	switch {
	case lone && ctx.Err() != nil:
		p.committer.Wake() // and give up below, as a leader does
	case lone:
		p.committer.Flush()
		if durable != nil && ctx.Err() != nil {
			p.nudge() // gave up during the fsync, as a leader waiting for it does
			return result{}, false
		}
	}
	if durable != nil {
		select {
		case <-durable:
		case <-ctx.Done():
			p.nudge()
			return result{}, false
		}
		select {
		case res := <-r.done: // applied by another leader, or the writer
			return res, true
		case p.mu <- struct{}{}:
			p.applyDurable()
			if !p.stopped {
				p.maybeSnapshot(stop)
			}
			p.mu.unlock()
		case <-ctx.Done():
			p.nudge()
			return result{}, false
		}
	}
	select {
	case res := <-r.done:
		return res, true
	case <-ctx.Done():
		return result{}, false
	}
}

// nudge tells the writer that a leader gave up before its batch was
// applied.
func (p *partition) nudge() {
	select {
	case p.gaveUp <- struct{}{}:
	default: // the writer is told already
	}
}

// failStop stops the process on a panic of the write path, as a panic on
// the writer goroutine does: a panic on a caller's goroutine could be
// recovered (net/http recovers its handlers'), leaving the partition's
// tables half changed.
func failStop() {
	if v := recover(); v != nil {
		go func() { panic(v) }()
		select {}
	}
}

// writeLock is a partition's write lock: a mutex whose callers can stop
// waiting for it when their context ends (the writer holds it through an
// fsync when a request must see every earlier one applied).
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

// leads reports whether r is the only request of b: it started b.
func (b *batch) leads(r *request) bool {
	return len(b.reqs) == 1 && b.reqs[0].req == r
}

// applyDurable applies the batches in flight that are durable, oldest
// first, and stops at the first that is not.
func (p *partition) applyDurable() {
	for len(p.inflight) > 0 {
		select {
		case <-p.inflight[0].ticket.Done():
			p.finish()
		default:
			return
		}
	}
}

// add builds r's record into the pending batch, or answers r with its error.
func (p *partition) add(r *request) {
	if err := r.ctx.Err(); err != nil {
		r.done <- result{err: err}
		return
	}
	if r.readsState || r.control != nil {
		p.settle()
	}
	if r.control != nil {
		r.control(p)
		r.done <- result{}
		return
	}
	start := p.buf.Len()
	b, out, err := r.record(p, p.buf.B)
	if err != nil {
		p.buf.B = p.buf.B[:start]
		r.done <- result{out: out, err: err}
		return
	}
	p.buf.B = b
	// A record that could not be applied must never reach the log: every
	// replay would fail on it.
	if err := p.view.decode(r.typ, b[start:]); err != nil {
		p.buf.B = p.buf.B[:start]
		r.done <- result{err: fmt.Errorf("%w: record does not decode: %v", ErrInvalid, err)}
		return
	}
	p.pending = append(p.pending, pendingEntry{req: r, start: start, end: len(b), out: out})
	if r.readsState {
		// Later requests must see its effect (a generation check after a
		// delete, say), and only the tables show it.
		p.settle()
	}
}

// settle commits the pending batch and waits until every batch is applied:
// requests that read the tables see every earlier request's effect.
func (p *partition) settle() {
	p.submit()
	for len(p.inflight) > 0 {
		p.finish()
	}
}

// submit hands the pending requests to the committer: it adds them to the
// partition's last batch if that still waits in the committer's queue, or
// queues them as a new batch. A committer that is closed fails them at once.
func (p *partition) submit() { p.hand(false) }

// hand is submit for a direct commit when own: it reports lone when the
// caller must append the new batch itself (log.Committer.StartOwn).
func (p *partition) hand(own bool) (lone bool) {
	if len(p.pending) == 0 {
		return false
	}
	if n := len(p.inflight); n > 0 && p.extend(p.inflight[n-1]) {
		return false
	}
	b := p.newBatch()
	b.reqs, p.pending = p.pending, b.reqs[:0]
	b.buf, p.buf = p.buf, b.buf
	for _, e := range b.reqs {
		b.entries = append(b.entries, log.Entry{Partition: p.id, Type: e.req.typ, Payload: b.buf.B[e.start:e.end]})
	}
	b.start = time.Now()
	b.writer = true
	var err error
	if own {
		lone, err = p.committer.StartOwn(&b.ticket, b.entries)
	} else {
		err = p.committer.Start(&b.ticket, b.entries)
	}
	if err != nil {
		p.fail(b, err)
		p.recycle(b)
		return false
	}
	p.inflight = append(p.inflight, b)
	return lone
}

// extend adds the pending requests to b, if the committer has not taken b
// yet and b has room: one batch per partition waits in the committer's
// queue, however many requests arrive while an fsync runs.
func (p *partition) extend(b *batch) bool {
	if len(b.reqs)+len(p.pending) > maxBatchRequests || b.buf.Len()+p.buf.Len() > maxBatchBytes {
		return false
	}
	// The records are copied to the end of b's buffer and their entries
	// appended to b's. The entries b already has keep pointing where they
	// did, into the array the buffer had then, if it moved: nothing writes
	// there again. The committer may take b meanwhile; it reads only what
	// b held before, never what is appended here.
	base, n := b.buf.Len(), len(b.entries)
	b.buf.B = append(b.buf.B, p.buf.B...)
	for _, e := range p.pending {
		e.start += base
		e.end += base
		b.entries = append(b.entries, log.Entry{Partition: p.id, Type: e.req.typ, Payload: b.buf.B[e.start:e.end]})
		b.reqs = append(b.reqs, e)
	}
	if !p.committer.Extend(&b.ticket, b.entries) {
		b.buf.B = b.buf.B[:base]
		clear(b.entries[n:])
		b.entries = b.entries[:n]
		clear(b.reqs[len(b.reqs)-len(p.pending):])
		b.reqs = b.reqs[:len(b.reqs)-len(p.pending)]
		return false
	}
	clear(p.pending)
	p.pending = p.pending[:0]
	p.buf.Reset()
	return true
}

// finish waits for the oldest batch in flight to be durable, applies it to
// the tables, and acknowledges its requests.
func (p *partition) finish() {
	b := p.inflight[0]
	p.inflight = slices.Delete(p.inflight, 0, 1)
	defer p.recycle(b)
	first, _, err := b.ticket.Result()
	if p.observer != nil {
		p.observer.ObserveAppend(p.id, len(b.entries), b.buf.Len(), time.Since(b.start), err)
	}
	if err != nil {
		p.fail(b, err)
		return
	}
	p.sinceSnapshot += int64(b.buf.Len())
	p.applied = first + uint64(len(b.entries)) - 1
	p.offsets.Update(func(w cache.OffsetsWriter) {
		for i, e := range b.entries {
			if err := p.apply(w, first+uint64(i), e.Type, e.Payload); err != nil {
				// add decoded this record before it was written.
				panic(fmt.Sprintf("coordinator: partition %d cannot apply its own record: %v", p.id, err))
			}
		}
		w.SetApplied(p.applied)
	})
	p.watchers.wake(b.entries)
	for i, e := range b.reqs {
		e.req.done <- result{index: first + uint64(i), out: e.out}
	}
}

// fail answers every request of b with the journal's error, and forgets
// the generations b carried: they were never durable. (Batches in flight
// behind it were checked against them; a commit they refused as stale
// stays refused.)
func (p *partition) fail(b *batch, err error) {
	err = fmt.Errorf("%w: partition %d: %w", ErrWriteFailed, p.id, err)
	p.logger.Error("journal append failed; the journal repairs itself before the next write", "partition", p.id, "err", err)
	for _, e := range b.reqs {
		e.req.done <- result{err: err}
	}
	p.recountGenerations()
}

// recountGenerations rebuilds batchGen from the commits still pending or in
// flight.
func (p *partition) recountGenerations() {
	clear(p.batchGen)
	note := func(typ byte, payload []byte) {
		if typ != recCommit || p.view.decode(typ, payload) != nil || p.view.generation < 0 {
			return
		}
		if g, ok := p.batchGen[string(p.view.group)]; !ok || p.view.generation > g {
			p.batchGen[string(p.view.group)] = p.view.generation
		}
	}
	for _, b := range p.inflight {
		for _, e := range b.entries {
			note(e.Type, e.Payload)
		}
	}
	for _, e := range p.pending {
		note(e.req.typ, p.buf.B[e.start:e.end])
	}
}

// newBatch returns an empty batch, reusing a finished one if it can.
func (p *partition) newBatch() *batch {
	b := &batch{}
	if n := len(p.spare); n > 0 {
		b = p.spare[n-1]
		p.spare = p.spare[:n-1]
	}
	b.buf = bytebufferpool.Get()
	return b
}

// recycle empties a finished batch for reuse, and forgets the pending
// generations once no batch is pending or in flight.
func (p *partition) recycle(b *batch) {
	clear(b.reqs)
	b.reqs = b.reqs[:0]
	clear(b.entries) // drop the payloads
	b.entries = b.entries[:0]
	// The buffer goes back to the pool, which keeps buffers of the sizes
	// in use: a burst of large batches does not stay held here.
	bytebufferpool.Put(b.buf)
	b.buf = nil
	b.ticket = log.Ticket{}
	if len(p.spare) < maxSpare {
		p.spare = append(p.spare, b)
	}
	if len(p.inflight) == 0 && len(p.pending) == 0 {
		clear(p.batchGen)
	}
}

// apply changes the tables by one durable record. Replay and the live path
// share it, so what a restart rebuilds is exactly what was served. The
// record is decoded and checked whole before the tables change.
func (p *partition) apply(w cache.OffsetsWriter, index uint64, typ byte, payload []byte) error {
	r := &p.view
	if err := r.decode(typ, payload); err != nil {
		return err
	}
	switch typ {
	case recCommit, recDeleteOffsets, recDeleteGroup:
		if p.skip(r.group, index) {
			return nil
		}
	case recSnapGroup:
		if r.capturedAt > index && p.capturedAt != nil {
			p.capturedAt[string(r.group)] = r.capturedAt
		}
	}
	switch typ {
	case recCommit, recSnapGroup, recSnapGroups:
		version := index
		if typ != recCommit {
			version = r.version
		}
		p.putOffsets(w, version)
		if typ != recCommit {
			w.SetInfo(w.GroupName(r.group), version, r.lastCommit, r.generation)
		} else if r.generation >= 0 {
			w.SetGeneration(w.GroupName(r.group), r.generation)
		}
	case recSnapSizes:
		w.Reserve(r.sizes[0], r.sizes[1])
	case recDeleteOffsets:
		for _, o := range r.offsets {
			w.Delete(string(r.group), index, cache.TopicPartition{Topic: string(o.topic), Partition: o.partition})
		}
	case recDeleteGroup:
		w.DeleteGroup(string(r.group))
	case recExpireGroups:
		for _, g := range r.groups {
			if !p.skip(g, index) {
				w.DeleteGroup(string(g))
			}
		}
	case recMapping:
		var m statictopic.Mapping
		if err := json.Unmarshal(r.mapping, &m); err != nil {
			return fmt.Errorf("%w: mapping record: %v", ErrCorrupt, err)
		}
		if err := m.Validate(); err != nil {
			return fmt.Errorf("%w: mapping record: %v", ErrCorrupt, err)
		}
		p.mappings.Put(m)
	case recGlobalRead:
		p.switches.SetGlobalRead(string(r.scope), r.enabled)
		p.switched.fire()
	}
	return nil
}

// skip reports whether a replayed record of group at index is already in
// the snapshot being loaded, which captured the group at a later index.
func (p *partition) skip(group []byte, index uint64) bool {
	if p.capturedAt == nil {
		return false
	}
	at, ok := p.capturedAt[string(group)]
	return ok && index <= at
}

// putOffsets puts the offsets of the record in p.view, a commit or a
// snapshot's part of a group, into the table. The offsets of one topic
// come in runs, and each run is one lookup of the table.
func (p *partition) putOffsets(w cache.OffsetsWriter, version uint64) {
	r := &p.view
	if r.typ == recSnapGroups {
		group := w.GroupName(r.group)
		mds := append(p.mds[:0], "")
		for _, b := range r.mds {
			mds = append(mds, p.metadata(b))
		}
		p.mds = mds
		for _, tv := range r.topics {
			tw := w.Topic(group, w.TopicName(tv.name), version)
			tw.Reserve(tv.below, tv.end-tv.start)
			for _, o := range r.snap[tv.start:tv.end] {
				tw.Put(o.partition, cache.Offset{Offset: o.offset, LeaderEpoch: o.epoch, Metadata: mds[o.md], CommitTime: o.commitTime})
			}
		}
		return
	}
	var tw cache.TopicWriter
	for i, o := range r.offsets {
		if i == 0 || string(o.topic) != string(r.offsets[i-1].topic) {
			tw = w.RecordTopic(r.group, w.TopicName(o.topic), version)
		}
		tw.Put(o.partition, cache.Offset{Offset: o.offset, LeaderEpoch: o.leaderEpoch, Metadata: p.metadata(o.metadata), CommitTime: o.commitTime})
	}
}

// metadata returns b as a string, the one made last if they are equal:
// the offsets of a commit, and often the groups of one consumer, carry the
// same metadata, so it is held once.
func (p *partition) metadata(b []byte) string {
	if string(b) != p.lastMetadata {
		p.lastMetadata = string(b)
	}
	return p.lastMetadata
}
