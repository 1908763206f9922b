package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/internal/signal"
	"github.com/offsetd/offsetd/log"
	"github.com/offsetd/offsetd/statictopic"
)

const (
	stateLoading int32 = iota
	stateReady
	stateFailed
)

// partition is one internal partition's state: its tables, the records
// that change them (apply), the watchers of its groups and topics, and its
// snapshots. Its writer (localWriter, replicatedWriter) is the only code
// that builds its records and applies them; what the writer owns, below,
// is touched only where the writer says (under the local writer's lock, on
// the replicated writer's goroutine), and by the loader before the
// partition is ready.
type partition struct {
	id       int
	logger   *slog.Logger
	observer Observer
	// The tables; replaced only while loading, before the partition is
	// ready. Readers use them on any goroutine.
	offsets  *cache.Offsets
	mappings *cache.Mappings
	switches *cache.Switches // the global-read switches of the scopes that hash here
	txns     *txnTable       // the offsets pending in transactions (txn.go)
	// switched fires when any partition applies a global-read record.
	switched *signal.Signal

	state       atomic.Int32
	loadErr     error         // set before state becomes stateFailed
	loadTime    time.Duration // set before state becomes stateReady
	loadRecords int           // journal records replayed; set before stateReady
	loadBytes   int64         // snapshot and journal bytes read; set before stateReady

	// journal is the commit pipeline every partition shares on one node
	// (nil on a cluster node, whose replicas write the journal), and w the
	// partition's writer; both set before the partition is ready.
	journal journal
	w       writer

	// The writer's: the index of the last record applied, and, per group,
	// the highest generation among the commits built and not yet applied
	// (cleared once none is).
	applied      uint64
	batchGen     map[string]int32
	view         recordView // the record being applied, or checked
	lastMetadata string     // the metadata string made last
	mds          []string   // the metadata of the snapshot record being applied
	// sawTxn says a transactional record was applied (while loading:
	// Open then makes sure the directory is at formatTxn). useTxnFormat is
	// Coordinator.useTxnFormat, for the records a replicated partition
	// applies from its leader.
	sawTxn       bool
	useTxnFormat func() error
	// capturedAt, while loading, holds the index each group of the snapshot
	// was captured at, where that is past the snapshot's own index.
	capturedAt map[string]uint64

	// watchers are the long polls waiting for a group or static topic of
	// the partition to change.
	watchers watchers

	// Snapshot state, the loader's, then the writer's.
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
}

// writer builds a partition's records, makes them durable and applies
// them, in one order: the local one through the commit pipeline on its
// callers' goroutines, the replicated one through the partition's
// replication group on its own goroutine. Each also runs the partition's
// snapshots (see snapshot.go) where it owns the state.
type writer interface {
	// start begins r, and returns what wait needs; an error fails r,
	// which wrote nothing.
	start(ctx context.Context, r *request) (pending, error)
	// wait returns r's result once it is applied; ok is false when ctx
	// ends first (r may still be written). Once it returns r's result, the
	// writer no longer refers to r.
	wait(ctx context.Context, r *request, p pending) (res result, ok bool)
	// run is the writer's goroutine; it returns after close, once every
	// request it took is answered and no snapshot runs.
	run(stop <-chan struct{})
	close()
	// snapshotAt returns the index a snapshot starting now captures, and
	// whether it only refreshes the newest one; ok is false when it must
	// wait for more records to be applied.
	snapshotAt() (index uint64, refresh, ok bool)
	// keepSnapshot has the partition's host keep its snapshot as of
	// index, whose content writes (partition.writeSnapshot), durably, and
	// returns its size in bytes. It runs on the snapshot goroutine.
	keepSnapshot(index uint64, content func(io.Writer) error) (int64, error)
	// snapshotted runs on the snapshot goroutine around the write of the
	// snapshot at index: before, with written false, it makes every record
	// applied durable; after, once the snapshot is durable, with written
	// true. prev is the snapshot before it.
	snapshotted(prev, index uint64, refresh, written bool) error
	// lead returns the node that leads the partition and whether that is
	// this one; barrier returns once reads see every write acknowledged
	// before it (see Coordinator.Barrier).
	lead() (leader uint64, self bool)
	barrier(ctx context.Context) error
}

// pending is a started request's place in its writer: for the local
// writer, the channel its caller waits on (see localWriter.wait), and
// whether the request started its batch (leads it) or joined one.
type pending struct {
	ch    <-chan struct{}
	leads bool
}

// journal is what the partitions need of the commit pipeline
// (log.Committer); tests pace it.
type journal interface {
	Start(t *log.Ticket, entries []log.Entry) error
	Wait(ctx context.Context, done <-chan struct{}) error
	Sync() error
	LastIndex() uint64
}

// request is one call to a partition, built by its writer.
type request struct {
	ctx context.Context
	typ byte
	// readsState marks requests whose build reads the tables (deletes,
	// mapping changes): the writer applies every earlier record before
	// building them, and the next request after applying them, so that
	// each sees the other's effect.
	readsState bool
	// build validates the request against the partition's state and appends
	// the record's payload to dst; out is what the caller gets back in the
	// request's result (with its error, too). An error fails the request,
	// writing nothing. build runs where the writer owns the state; on the
	// replicated writer's goroutine it may run after the caller has given
	// up (its ctx ended), so it must only read what the request owns
	// (inputs are copied when the request is made) and must write nothing
	// but its return values.
	build func(p *partition, dst []byte) (b []byte, out any, err error)
	// commit holds a commit's inputs; a commit request has no build
	// (see record).
	commit commitArgs
	// control, if set, replaces build: it runs on the writer's goroutine
	// with every earlier record applied, and writes nothing.
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

// check builds r's record at the end of dst and checks that it decodes:
// a record that could not be applied must never reach the log, as every
// replay would fail on it. It returns dst with the record, or dst and an
// error that fails r.
func (p *partition) check(r *request, dst []byte) (b []byte, out any, err error) {
	b, out, err = r.record(p, dst)
	if err != nil {
		return dst, out, err
	}
	if err := p.view.decode(r.typ, b[len(dst):]); err != nil {
		return dst, nil, fmt.Errorf("%w: record does not decode: %v", ErrInvalid, err)
	}
	return b, out, nil
}

// result is a request's answer, sent on its done channel: the caller reads
// the request's outcome only from here, never from memory the writer shares.
type result struct {
	index uint64
	out   any // what build returned with the record
	err   error
}

func newPartition(id int, opts Options, switched *signal.Signal) *partition {
	return &partition{
		snapAsked: make(chan struct{}, 1),
		snapLater: make(chan struct{}, 1),
		id:        id,
		logger:    opts.Logger,
		observer:  opts.Observer,
		offsets:   cache.NewOffsets(),
		mappings:  cache.NewMappings(),
		switches:  cache.NewSwitches(),
		txns:      newTxnTable(),
		switched:  switched,
		batchGen:  make(map[string]int32),

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

// noteGeneration records, in batchGen, the generation of the commit in
// payload, if it is one that carries a generation.
func (p *partition) noteGeneration(typ byte, payload []byte) {
	if typ != recCommit || p.view.decode(typ, payload) != nil || p.view.generation < 0 {
		return
	}
	if g, ok := p.batchGen[string(p.view.group)]; !ok || p.view.generation > g {
		p.batchGen[string(p.view.group)] = p.view.generation
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
	// The pending transactional offsets are a snapshot's as of its own
	// index, so every record replayed past it applies to them; the
	// groups' offsets skip what a group's capture already holds.
	switch typ {
	case recTxnCommit, recTxnEnd, recSnapTxn:
		p.sawTxn = true
		if p.state.Load() == stateReady && p.useTxnFormat != nil {
			// A follower's journal already holds the record; the rewrite
			// closes the window for the next ones. A failure is logged:
			// the record is durable and must be applied.
			if err := p.useTxnFormat(); err != nil {
				p.logger.Error("the meta file could not be moved to the format of transactional offsets", "partition", p.id, "err", err)
			}
		}
		p.txns.applyView(p, r, index)
	case recCommit:
		p.txns.applyCommit(r, index)
	case recDeleteGroup:
		p.txns.dropEnded(string(r.group))
	case recExpireGroups:
		for _, g := range r.groups {
			p.txns.dropEnded(string(g))
		}
	}
	switch typ {
	case recCommit, recDeleteOffsets, recDeleteGroup, recTxnEnd:
		if p.skip(r.group, index) {
			return nil
		}
	case recSnapGroup:
		if r.capturedAt > index && p.capturedAt != nil {
			p.capturedAt[string(r.group)] = r.capturedAt
		}
	}
	switch typ {
	case recTxnEnd:
		if r.committed && len(r.offsets) > 0 {
			p.putOffsets(w, index)
		}
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
		p.switched.Fire()
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
