package coordinator

import (
	"context"
	"errors"
	"fmt"

	"sync/atomic"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/log"
)

// Replication, set as Options.Replication, makes every partition a
// replicated log (package cluster does it with Raft): a partition's
// records are then proposed to its replication group instead of appended
// to the journal, and every replica applies the group's committed records,
// in log order, through the same apply path as replay. The index of a
// record, and so the version it gives its group, is its index in the
// group's log. The journal still holds everything the node keeps durably,
// but in the replication's own records.
//
// A replicated partition takes snapshots as a single one does, at indexes
// of its group's log, and then lets its group compact the log (see
// Replica.Compact); a replica that lags behind a leader's compacted log
// receives the leader's snapshot file and applies it whole.
type Replication interface {
	// Replay is handed every journal record, in index order, while the
	// coordinator loads, before the snapshots are read.
	Replay(index uint64, e log.Entry) error
	// Bounds returns, once the journal is replayed, what it holds of
	// partition's log: the first index of its entries (every index
	// before is in a snapshot), and the last index known committed. The
	// partition loads its newest snapshot between the two.
	Bounds(partition int) (first, committed uint64)
	// Start is called once loading is done: from now on the journal is
	// written only through committer. applied holds, per partition, the
	// index its tables hold (that of the snapshot it loaded); the groups
	// hand them their committed entries after it. It returns each
	// partition's replica, in partition order.
	Start(committer *log.Committer, applied []uint64) ([]Replica, error)
}

// Replica is one partition's replicated log, as its writer uses it.
type Replica interface {
	// Propose appends data to the group's log as consecutive entries, if
	// this node leads the group, and returns their term and the index of
	// the first. They are committed when they come back from Committed
	// with that term; entries of a later term at those indexes mean they
	// were not, and never will be.
	Propose(ctx context.Context, data [][]byte) (term, first uint64, err error)
	// Committed delivers the group's committed entries, in log order,
	// each once, and an empty batch when the leader changes; it is closed
	// when the replica stops.
	Committed() <-chan []Committed
	// Lead returns the node that leads the group as this node knows it (0
	// if none), and, when that is this node, the index of the first entry
	// of its term: before that entry is applied, a new leader's tables may
	// miss committed records, so it takes no requests yet.
	Lead() (leader uint64, termStart uint64)
	// ID returns this node's id in the group.
	ID() uint64
	// ReadIndex returns the group's commit index as its leader confirms
	// it with a quorum, after the call began: once this node has applied
	// it, its tables hold every write acknowledged before the call. An
	// error that is ErrNotLeader means this node lost the lead meanwhile.
	ReadIndex(ctx context.Context) (uint64, error)
	// Compact lets the group drop its log up to index, which a durable
	// snapshot of the partition holds, and returns the lowest journal
	// index the group still needs. An index at or below the last
	// compaction drops nothing but moves what the group needs up to the
	// journal's end.
	Compact(ctx context.Context, index uint64) (keepFrom uint64, err error)
	// KeepFrom returns the lowest journal index the group needs.
	KeepFrom() uint64
}

// Committed is one committed entry of a replicated log. Data is nil for
// the entries the replication writes for itself (a new leader's empty
// entry, a configuration change): they take an index and change nothing.
// Snapshot marks a leader's snapshot received in place of the entries up
// to Index: the partition's snapshot file Index, which replaces the
// tables.
type Committed struct {
	Index, Term uint64
	Data        []byte
	Snapshot    bool
}

// ErrNotLeader reports a write sent to a node that does not lead the
// partition's replication group; a *NotLeaderError names the leader.
var ErrNotLeader = errors.New("coordinator: not the partition's leader")

// ErrLeadershipLost reports a replicated write whose node lost the lead
// before it learnt whether the write was committed: it may be, or not.
// Retry it, on the new leader, if writing it twice does no harm (a commit
// of the same offsets does none).
var ErrLeadershipLost = errors.New("coordinator: leadership lost, the write may or may not be committed")

// ErrNotCommitted reports a replicated write that is certainly not in the
// log: leadership changed before it was committed. Retry it.
var ErrNotCommitted = errors.New("coordinator: not committed, leadership changed")

// NotLeaderError is ErrNotLeader with the partition and the node that
// leads it (0 when unknown, during an election).
type NotLeaderError struct {
	Partition int
	Leader    uint64
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("coordinator: partition %d: not the leader (leader %d)", e.Partition, e.Leader)
}

// Unwrap makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// replicaState is what a replicated partition's writer keeps beside the
// single-node state.
type replicaState struct {
	replica Replica
	// waiting holds requests in arrival order that cannot be built yet:
	// the leader has not applied its term's first entry, or the request
	// reads the tables while records are in flight.
	waiting []*request
	// inflight holds the proposed records not yet committed, oldest first.
	inflight []proposed
	data     [][]byte      // the records of batch, for Propose
	batch    []proposed    // built, to propose together
	applied  atomic.Uint64 // the writer's applied, for Barrier
	// progress fires after every batch of entries applied, for Barrier.
	progress *signal
	woken    []log.Entry // scratch: the records applied, for the watchers
}

// proposed is one record a leader proposed: it is committed if the entry
// at index comes back with term.
type proposed struct {
	req         *request
	out         any
	term, index uint64
}

// runReplicated is the writer goroutine of a replicated partition. It
// builds requests against the tables as the single-node writer does, but
// proposes their records to the replication group, and applies whatever
// the group commits, its own records and those of other leaders alike,
// answering its requests as theirs come back. It returns when reqs is
// closed: requests still waiting or in flight then get ErrClosed (a record
// in flight may still be committed by the group). If the replica stops
// first, it answers every request with ErrClosed until reqs is closed.
func (p *partition) runReplicated(stop <-chan struct{}) {
	committed := p.rep.replica.Committed()
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
		case req, ok := <-p.reqs:
			if !ok {
				p.failWaiting(ErrClosed)
				p.failInflight(ErrClosed)
				return
			}
			p.rep.waiting = append(p.rep.waiting, req)
			p.serveWaiting(stop)
		case entries, ok := <-committed:
			if !ok {
				p.failInflight(ErrClosed)
				p.failWaiting(ErrClosed)
				for req := range p.reqs {
					req.done <- result{err: ErrClosed}
				}
				return
			}
			if err := p.applyCommitted(entries); err != nil {
				p.failStopped(err)
				return
			}
			p.maybeSnapshot(stop)
			if leader, _ := p.rep.replica.Lead(); leader != p.rep.replica.ID() {
				// Another leader decides the fate of what is in flight, and
				// this node may not learn it for long (cut off, say).
				p.failInflight(fmt.Errorf("%w: partition %d", ErrLeadershipLost, p.id))
			}
			p.serveWaiting(stop)
		}
	}
}

// failStopped stops a replicated partition that cannot go on (a snapshot
// received that does not read back): it answers every request with err
// until reqs is closed.
func (p *partition) failStopped(err error) {
	err = fmt.Errorf("coordinator: partition %d stopped: %w", p.id, err)
	p.logger.Error("replicated partition stopped", "partition", p.id, "err", err)
	p.loadErr = err
	p.state.Store(stateFailed)
	p.failInflight(err)
	p.failWaiting(err)
	for req := range p.reqs {
		req.done <- result{err: err}
	}
}

// serveWaiting builds and proposes the waiting requests, in order, as far
// as it can.
func (p *partition) serveWaiting(stop <-chan struct{}) {
	rs := p.rep
	n := 0
	for n < len(rs.waiting) {
		r := rs.waiting[n]
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
		leader, start := rs.replica.Lead()
		if leader != rs.replica.ID() {
			r.done <- result{err: &NotLeaderError{Partition: p.id, Leader: leader}}
			n++
			continue
		}
		if start == 0 || p.applied < start || (r.readsState && (len(rs.inflight) > 0 || len(rs.batch) > 0)) {
			break // wait for the next committed entries
		}
		p.build(r)
		n++
		if r.readsState {
			break // later requests must see its effect, which only the tables show
		}
	}
	rs.waiting = rs.waiting[:copy(rs.waiting, rs.waiting[n:])]
	p.proposeBatch()
}

// build builds r's record into the batch to propose, or answers r with its
// error.
func (p *partition) build(r *request) {
	rs := p.rep
	b, out, err := r.record(p, nil)
	if err != nil {
		r.done <- result{out: out, err: err}
		return
	}
	if err := p.view.decode(r.typ, b); err != nil {
		r.done <- result{err: fmt.Errorf("%w: record does not decode: %v", ErrInvalid, err)}
		return
	}
	data := make([]byte, 0, 1+len(b))
	rs.data = append(rs.data, append(append(data, r.typ), b...))
	rs.batch = append(rs.batch, proposed{req: r, out: out})
}

// proposeBatch proposes the records built since the last batch as
// consecutive entries of one proposal: one append, and one fsync, for all.
func (p *partition) proposeBatch() {
	rs := p.rep
	if len(rs.batch) == 0 {
		return
	}
	term, first, err := rs.replica.Propose(context.Background(), rs.data)
	for i, pr := range rs.batch {
		if err != nil {
			// Not appended (a transfer of the lead under way, say).
			pr.req.done <- result{err: fmt.Errorf("%w: partition %d: %v", ErrNotCommitted, p.id, err)}
			continue
		}
		pr.term, pr.index = term, first+uint64(i)
		rs.inflight = append(rs.inflight, pr)
	}
	clear(rs.data)
	rs.data = rs.data[:0]
	clear(rs.batch)
	rs.batch = rs.batch[:0]
}

// applyCommitted applies committed entries to the tables, in order, and
// answers the requests whose records they are, or that they show lost.
func (p *partition) applyCommitted(entries []Committed) error {
	rs := p.rep
	for _, e := range entries {
		if e.Snapshot && e.Index > p.applied {
			if err := p.installSnapshot(e.Index); err != nil {
				return err
			}
		}
	}
	p.offsets.Update(func(w cache.OffsetsWriter) {
		for _, e := range entries {
			if e.Index <= p.applied {
				continue
			}
			if len(e.Data) > 0 {
				if err := p.apply(w, e.Index, e.Data[0], e.Data[1:]); err != nil {
					// The leader decoded it before proposing it.
					panic(fmt.Sprintf("coordinator: partition %d cannot apply committed entry %d: %v", p.id, e.Index, err))
				}
				p.sinceSnapshot += int64(len(e.Data))
				rs.woken = append(rs.woken, log.Entry{Partition: p.id, Type: e.Data[0], Payload: e.Data[1:]})
			}
			p.applied = e.Index
		}
		w.SetApplied(p.applied)
	})
	rs.applied.Store(p.applied)
	p.watchers.wake(rs.woken)
	clear(rs.woken)
	rs.woken = rs.woken[:0]
	n := 0
	for ; n < len(rs.inflight); n++ {
		pr := rs.inflight[n]
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
	rs.inflight = rs.inflight[:copy(rs.inflight, rs.inflight[n:])]
	if len(rs.inflight) == 0 {
		clear(p.batchGen)
	}
	rs.progress.fire()
	return nil
}

// installSnapshot replaces the tables by the partition's snapshot file
// index, a leader's snapshot this node received in place of the entries up
// to index. Readers see the old tables or the new ones, never a mix of
// groups (the offsets change under one write lock).
func (p *partition) installSnapshot(index uint64) error {
	for _, scope := range p.switches.Scopes(nil) {
		p.switches.SetGlobalRead(scope, false) // the snapshot holds those on
	}
	groups := p.offsets.Groups(nil)
	p.capturedAt = make(map[string]uint64)
	var err error
	p.offsets.Update(func(w cache.OffsetsWriter) {
		for _, g := range groups {
			w.DeleteGroup(g)
		}
		err = p.snaps.Read(index, func(typ byte, payload []byte) error {
			return p.apply(w, index, typ, payload)
		})
		w.SetApplied(index)
	})
	if err != nil {
		return fmt.Errorf("snapshot %d received: %w", index, err)
	}
	p.applied = index
	p.prevSnapshot, p.lastSnapshot = 0, index
	p.sinceSnapshot = 0
	p.switched.fire()
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

func (p *partition) failWaiting(err error) {
	for _, r := range p.rep.waiting {
		r.done <- result{err: err}
	}
	p.rep.waiting = p.rep.waiting[:0]
}

func (p *partition) failInflight(err error) {
	for _, pr := range p.rep.inflight {
		pr.req.done <- result{err: err}
	}
	p.rep.inflight = p.rep.inflight[:0]
}

// Barrier returns once this node leads the partition of group and has
// applied every write acknowledged, by any node, before Barrier was
// called: reads of the group that follow it are linearizable. It uses
// Raft's ReadIndex: the leader confirms with a quorum that it still leads,
// then waits to have applied up to its commit index. Without Replication
// it returns at once.
func (c *Coordinator) Barrier(ctx context.Context, group string) error {
	return c.barrier(ctx, c.groupPartition(group))
}

// TopicBarrier is Barrier for the partition of a static topic: reads of
// its mappings and routes that follow it are linearizable.
func (c *Coordinator) TopicBarrier(ctx context.Context, topic string) error {
	return c.barrier(ctx, c.topicPartition(topic))
}

func (c *Coordinator) barrier(ctx context.Context, p *partition) error {
	if err := c.readable(p); err != nil || p.rep == nil {
		return err
	}
	rs := p.rep
	if leader, _ := rs.replica.Lead(); leader != rs.replica.ID() {
		return &NotLeaderError{Partition: p.id, Leader: leader}
	}
	index, err := rs.replica.ReadIndex(ctx)
	if errors.Is(err, ErrNotLeader) {
		// The lead moved while the read waited; Lead may not know where yet.
		leader, _ := rs.replica.Lead()
		if leader == rs.replica.ID() {
			leader = 0
		}
		return &NotLeaderError{Partition: p.id, Leader: leader}
	}
	if err != nil {
		return fmt.Errorf("coordinator: partition %d: %w", p.id, err)
	}
	for {
		changed := rs.progress.wait()
		if rs.applied.Load() >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Leader returns the replication id of the node that leads the partition
// of group, as this node knows it, and whether that is this node; 0 when
// unknown. Without Replication this node always leads, as id 0.
func (c *Coordinator) Leader(group string) (leader uint64, self bool) {
	return c.leader(c.groupPartition(group))
}

// TopicLeader is Leader for the partition of a static topic.
func (c *Coordinator) TopicLeader(topic string) (leader uint64, self bool) {
	return c.leader(c.topicPartition(topic))
}

func (c *Coordinator) leader(p *partition) (leader uint64, self bool) {
	if c.opts.Replication == nil {
		return 0, true
	}
	if p.rep == nil { // loading
		return 0, false
	}
	leader, _ = p.rep.replica.Lead()
	return leader, leader == p.rep.replica.ID()
}

// startReplication gives every loading partition its replica.
func (c *Coordinator) startReplication(loading []*partition) error {
	if c.opts.Replication == nil {
		return nil
	}
	applied := make([]uint64, len(c.parts))
	for _, p := range loading {
		applied[p.id] = p.lastSnapshot
	}
	replicas, err := c.opts.Replication.Start(c.committer, applied)
	if err != nil {
		return err
	}
	if len(replicas) != len(c.parts) {
		return fmt.Errorf("coordinator: replication started %d replicas for %d partitions", len(replicas), len(c.parts))
	}
	for _, p := range loading {
		p.rep = &replicaState{replica: replicas[p.id], progress: newSignal()}
		p.applied = p.lastSnapshot
		p.rep.applied.Store(p.applied)
		p.keepFrom.Store(min(p.rep.replica.KeepFrom(), c.journal.LastIndex()+1))
	}
	return nil
}

// compactReplica lets a replicated partition's group drop its log up to
// the snapshot kept to fall back to, once a newer one is durable; it runs
// on the snapshot goroutine.
func (p *partition) compactReplica(prev uint64) error {
	keep, err := p.rep.replica.Compact(context.Background(), prev)
	if err != nil {
		return err
	}
	p.keepFrom.Store(min(keep, p.committer.LastIndex()+1))
	return nil
}
