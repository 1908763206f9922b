package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
// writer goroutine that alone commits its records to the journal and
// changes its tables.
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
	entries   []log.Entry    // the batch being committed

	// Writer-goroutine state for the batch being built.
	pending      []pendingEntry
	buf          *bytebufferpool.ByteBuffer
	batchGen     map[string]int32 // highest generation in the pending batch, per group
	view         recordView       // the record being applied
	lastMetadata string           // the metadata string made last
	mds          []string         // the metadata of the snapshot record being applied
	// capturedAt, while loading, holds the index each group of the snapshot
	// was captured at, where that is past the snapshot's own index.
	capturedAt map[string]uint64

	changed *signal // fires after every applied batch

	// Snapshot state, owned by the loader, then by the writer goroutine.
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
}

// request is one call waiting for the writer goroutine.
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
	// writing nothing. build runs on the writer goroutine after the caller
	// may have given up (its ctx ended), so it must only read what the
	// request owns (inputs are copied when the request is made) and must
	// write nothing but its return values.
	build func(p *partition, dst []byte) (b []byte, out any, err error)
	// control, if set, replaces build: it runs on the writer goroutine after
	// the pending batch is flushed, and writes nothing.
	control func(p *partition)
	done    chan result
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

func newPartition(id int, opts Options, switched *signal, snaps *log.Snapshots) *partition {
	return &partition{
		snaps:     snaps,
		snapAsked: make(chan struct{}, 1),
		id:        id,
		logger:    opts.Logger,
		observer:  opts.Observer,
		reqs:      make(chan *request, maxBatchRequests),
		offsets:   cache.NewOffsets(),
		mappings:  cache.NewMappings(),
		switches:  cache.NewSwitches(),
		switched:  switched,
		batchGen:  make(map[string]int32),
		changed:   newSignal(),

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

// run is the writer goroutine: it drains every queued request into one batch,
// appends it with one fsync, applies it to the tables, then answers every
// waiter. Between batches it starts snapshots and finishes them. It returns
// when reqs is closed and drained.
func (p *partition) run(stop <-chan struct{}) {
	p.buf = bytebufferpool.Get()
	defer bytebufferpool.Put(p.buf)
	for {
		select {
		case r, ok := <-p.reqs:
			if !ok {
				p.stopSnapshot()
				return
			}
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
			p.flush()
			if !open {
				p.stopSnapshot()
				return
			}
			p.maybeSnapshot(stop)
		case res := <-p.snapDone:
			p.finishSnapshot(res, stop)
		case <-p.snapAsked:
			p.snapPinning = true
			p.maybeSnapshot(stop)
		}
	}
}

// add builds r's record into the pending batch, or answers r with its error.
func (p *partition) add(r *request) {
	if err := r.ctx.Err(); err != nil {
		r.done <- result{err: err}
		return
	}
	if (r.readsState || r.control != nil) && len(p.pending) > 0 {
		p.flush()
	}
	if r.control != nil {
		r.control(p)
		r.done <- result{}
		return
	}
	start := p.buf.Len()
	b, out, err := r.build(p, p.buf.B)
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
		// Later requests of the batch must see its effect (a generation
		// check after a delete, say), and only the tables show it.
		p.flush()
	}
}

// flush writes the pending batch as one log append (one fsync), applies it
// to the tables, and acknowledges every request in it.
func (p *partition) flush() {
	if len(p.pending) == 0 {
		return
	}
	defer func() {
		clear(p.pending)
		p.pending = p.pending[:0]
		p.buf.Reset()
		clear(p.batchGen)
	}()
	entries := p.entries[:0]
	for _, e := range p.pending {
		entries = append(entries, log.Entry{Partition: p.id, Type: e.req.typ, Payload: p.buf.B[e.start:e.end]})
	}
	defer func() {
		clear(entries)
		p.entries = entries[:0]
	}()
	start := time.Now()
	first, _, err := p.committer.Commit(entries)
	if p.observer != nil {
		p.observer.ObserveAppend(p.id, len(entries), p.buf.Len(), time.Since(start), err)
	}
	if err != nil {
		err = fmt.Errorf("%w: partition %d: %w", ErrWriteFailed, p.id, err)
		p.logger.Error("journal append failed; the journal repairs itself before the next write", "partition", p.id, "err", err)
		for _, e := range p.pending {
			e.req.done <- result{err: err}
		}
		return
	}
	p.sinceSnapshot += int64(p.buf.Len())
	p.offsets.Update(func(w cache.OffsetsWriter) {
		for i, e := range entries {
			if err := p.apply(w, first+uint64(i), e.Type, e.Payload); err != nil {
				// add decoded this record before it was written.
				panic(fmt.Sprintf("coordinator: partition %d cannot apply its own record: %v", p.id, err))
			}
		}
		w.SetApplied(first + uint64(len(entries)) - 1)
	})
	p.changed.fire()
	for i, e := range p.pending {
		e.req.done <- result{index: first + uint64(i), out: e.out}
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
		group := w.GroupName(r.group)
		version := index
		if typ != recCommit {
			version = r.version
		}
		p.putOffsets(w, group, version)
		if typ != recCommit {
			w.SetInfo(group, version, r.lastCommit, r.generation)
		} else if r.generation >= 0 {
			w.SetGeneration(group, r.generation)
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
func (p *partition) putOffsets(w cache.OffsetsWriter, group string, version uint64) {
	r := &p.view
	if r.typ == recSnapGroups {
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
			tw = w.Topic(group, w.TopicName(o.topic), version)
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
