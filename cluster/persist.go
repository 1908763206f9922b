package cluster

import (
	"runtime"
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/log"
)

// The groups run raft with asynchronous storage writes (raft's
// Config.AsyncStorageWrites): a group's goroutine sends its messages to
// the other nodes as soon as raft makes them, and hands what must become
// durable (entries, hard state, a leader's snapshot: a MsgStorageAppend)
// to its node's persister. The persister takes what every group handed it
// since its last write, writes it as one journal batch with one sync, and
// only then delivers the responses raft attached to each message: the
// acknowledgements to the leader, the votes, and the message to the group
// itself that its entries are stable. A leader thus replicates while it
// writes, and counts itself towards a quorum only once its own write is
// durable (raft sends itself that acknowledgement after the write); raft
// hands out committed entries to apply only once they are durable here.

// persistWork is one piece of a group's storage work: a MsgStorageAppend,
// or a compaction.
type persistWork struct {
	g       *group
	m       *pb.Message
	compact *compaction
}

// persister is a node's one writer of the journal: see above.
type persister struct {
	n       *Node
	mu      sync.Mutex
	queue   []persistWork // guarded by mu
	wake    chan struct{} // holds a token while queue may be non-empty
	records []log.Entry   // scratch, owned by run
	outbox  []Message     // scratch, owned by run
	failed  error         // owned by run: the journal failed
}

func newPersister(n *Node) *persister {
	return &persister{n: n, wake: make(chan struct{}, 1)}
}

// put queues w; it never blocks.
func (p *persister) put(w persistWork) {
	p.mu.Lock()
	p.queue = append(p.queue, w)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run writes what the groups hand over, until stop.
func (p *persister) run(stop <-chan struct{}) {
	var batch []persistWork
	for {
		select {
		case <-stop:
			return
		case <-p.wake:
		}
		// The groups that are ready to run (woken by the same frame of
		// messages, say) queue their writes first: one sync then covers
		// them all, where each would have waited for the one before.
		runtime.Gosched()
		p.mu.Lock()
		batch, p.queue = p.queue, batch[:0]
		p.mu.Unlock()
		// Appends are written together; a compaction writes the hard
		// state as of the appends before it, so it waits for them.
		from := 0
		for i, w := range batch {
			if w.compact == nil {
				continue
			}
			p.appendAll(batch[from:i])
			from = i + 1
			err := p.failed
			if err == nil {
				err = w.g.compact(p, w.compact.index)
			}
			w.compact.done <- err
		}
		p.appendAll(batch[from:])
		clear(batch)
	}
}

// written is what a persister keeps of a group: its latest hard state
// (raft's MemoryStorage keeps one too, but reads it without a lock), and
// the term and vote it last wrote, to skip a write that would change only
// the commit index. Owned by the persister.
type written struct {
	hs         *pb.HardState
	term, vote uint64
	// stopped: the group failed to take a leader's snapshot, and stopped;
	// the persister writes nothing more of it.
	stopped bool
}

// appendAll makes the MsgStorageAppends of batch durable, as one journal
// batch, and then delivers their responses.
func (p *persister) appendAll(batch []persistWork) {
	if len(batch) == 0 {
		return
	}
	if p.failed != nil {
		return // the groups were told; they refuse everything
	}
	p.records = p.records[:0]
	// Where each message's records begin: -1 when it writes none, skipped
	// when its group stopped.
	const skipped = -2
	starts := make([]int, len(batch))
	for i, w := range batch {
		starts[i] = -1
		g, m := w.g, w.m
		if g.written.stopped {
			starts[i] = skipped
			continue
		}
		if m.GetSnapshot() != nil {
			// A leader's snapshot replaces the log: its state becomes the
			// partition's snapshot file first, then the journal says so.
			// A snapshot that cannot be made the partition's stops its
			// group alone: the journal is sound.
			if err := g.receive(m.GetSnapshot()); err != nil {
				g.written.stopped = true
				starts[i] = skipped
				p.n.opts.Logger.Error("raft group stopped: a leader's snapshot could not be taken", "partition", g.partition, "err", err)
				g.deliver(stable{err: err})
				continue
			}
		}
		var hs *pb.HardState
		if m.Term != nil {
			hs = &pb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
			// raft reads it back only when it restarts: setting it before
			// it is durable is safe, and what is written below is this one.
			if err := g.storage.SetHardState(hs); err != nil {
				p.fail(err)
				return
			}
			g.written.hs = hs
		}
		// A change of the commit index alone need not be durable before
		// anything (raft's MustSync): it is written with the next entries,
		// vote or snapshot, and before every snapshot of the partition (see
		// compact), so that no snapshot is ahead of the commit index the
		// journal holds. This saves a write on most heartbeats.
		if len(m.GetEntries()) == 0 && m.GetSnapshot() == nil &&
			(hs == nil || hs.GetTerm() == g.written.term && hs.GetVote() == g.written.vote) {
			continue
		}
		starts[i] = len(p.records)
		var err error
		if snap := m.GetSnapshot(); snap != nil {
			var r log.Entry
			r, err = snapshotRecord(g.partition, snapReceived, snap.GetMetadata())
			p.records = append(p.records, r)
		}
		if err == nil {
			p.records, err = appendRecords(p.records, g.partition, m.GetEntries(), g.written.hs)
		}
		if err != nil {
			p.fail(err)
			return
		}
	}
	var first uint64
	if len(p.records) > 0 {
		var err error
		first, _, err = p.n.committer.Commit(p.records)
		clear(p.records)
		if err != nil {
			p.fail(err)
			return
		}
	}
	p.outbox = p.outbox[:0]
	for i, w := range batch {
		g, m := w.g, w.m
		if starts[i] == skipped {
			continue
		}
		var received *pb.SnapshotMetadata
		if starts[i] >= 0 {
			j := first + uint64(starts[i])
			if snap := m.GetSnapshot(); snap != nil {
				received = snap.GetMetadata()
				g.keeper.add(j, placed{typ: recSnapshot, index: received.GetIndex(), kind: snapReceived})
				j++
				if err := g.storage.ApplySnapshot(&pb.Snapshot{Metadata: received}); err != nil {
					p.fail(err)
					return
				}
			}
			for _, e := range m.GetEntries() {
				g.keeper.add(j, placed{typ: recEntry, index: e.GetIndex()})
				j++
			}
			g.keeper.add(j, placed{typ: recHardState})
			if err := g.storage.Append(m.GetEntries()); err != nil {
				p.fail(err)
				return
			}
			g.written.term, g.written.vote = g.written.hs.GetTerm(), g.written.hs.GetVote()
		}
		var local []*pb.Message
		for _, r := range m.GetResponses() {
			if r.GetTo() == p.n.opts.ID {
				local = append(local, r)
			} else {
				p.outbox = append(p.outbox, Message{Partition: g.partition, Raft: r})
			}
		}
		g.deliver(stable{msgs: local, snapshot: received})
	}
	if len(p.outbox) > 0 {
		p.n.opts.Transport.Send(p.outbox)
		clear(p.outbox)
	}
}

// fail stops every group: the journal failed, so nothing more is durable.
func (p *persister) fail(err error) {
	if p.failed != nil {
		return
	}
	p.failed = err
	p.n.opts.Logger.Error("raft groups stopped: the journal failed", "err", err)
	for _, g := range p.n.groups {
		g.deliver(stable{err: err})
	}
}

// stable is what the persister hands back to a group once a write is
// durable: the responses raft attached to it for this node (the group
// steps them), the metadata of a leader's snapshot that became the
// partition's (the group applies it first), or why the journal failed.
type stable struct {
	msgs     []*pb.Message
	snapshot *pb.SnapshotMetadata
	err      error
}

// deliver queues s for the group's goroutine; it never blocks.
func (g *group) deliver(s stable) {
	g.stableMu.Lock()
	g.stable = append(g.stable, s)
	g.stableMu.Unlock()
	select {
	case g.stableWake <- struct{}{}:
	default:
	}
}

// takeStable returns what the persister delivered since the last call.
func (g *group) takeStable() []stable {
	g.stableMu.Lock()
	defer g.stableMu.Unlock()
	s := g.stable
	g.stable = nil
	return s
}

// onStable does, on the group's goroutine, what a durable write allows: a
// leader's snapshot is applied, then raft hears of the write. It returns
// the journal's failure, if that is what was delivered.
func (g *group) onStable(s stable) error {
	if s.err != nil {
		return s.err
	}
	if meta := s.snapshot; meta != nil {
		g.mu.Lock()
		g.queue = append(g.queue, coordinator.Committed{Index: meta.GetIndex(), Term: meta.GetTerm(), Snapshot: true})
		g.mu.Unlock()
		g.setConf(meta.GetConfState())
		g.applied = meta.GetIndex()
		g.endReplay()
		g.node.snapshotsReceived.Add(1)
		g.node.opts.Logger.Info("raft snapshot received", "partition", g.partition, "index", meta.GetIndex(), "term", meta.GetTerm())
		g.node.checkMembership()
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	for _, m := range s.msgs {
		_ = g.rn.Step(m) // a response of an older term is dropped
	}
	return nil
}
