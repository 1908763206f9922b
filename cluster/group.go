package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/offsetd/offsetd/coordinator"
)

// inboxSize bounds the messages waiting for a group; more are dropped, as
// a lossy network would.
const inboxSize = 4096

// maxStepBatch bounds the messages a group steps before it handles what
// they make ready.
const maxStepBatch = 256

// group is one partition's Raft group on this node. Its goroutine (run)
// alone touches rn; everything else talks to it through channels.
type group struct {
	node      *Node
	partition int
	storage   storage
	replayed  replayed // what the journal held, until start
	keeper    keeper
	rn        *raft.RawNode

	inbox   chan *pb.Message
	props   chan proposal
	reads   chan readRequest
	tick    chan struct{}
	handoff chan struct{}           // asks the group to hand its lead to another node
	calls   chan func(failed error) // run on the group's goroutine (failed: why it stopped)

	changing atomic.Bool // a ChangeReplicas runs on this node

	// What the persister delivers once a write is durable.
	stableMu   sync.Mutex
	stable     []stable      // guarded by stableMu
	stableWake chan struct{} // holds a token while stable may be non-empty

	written written // owned by the node's persister

	// Owned by run.
	outbox    []Message
	last      uint64                     // the index of the last entry raft handed out to write
	lastConf  uint64                     // the index of the last configuration change handed out to write
	reading   map[uint64]chan readResult // ReadIndex calls by request id
	nextRead  uint64
	leadTerm  uint64            // the term this node leads, 0 when it does not
	startTerm uint64            // the term whose first committed entry termStart is
	applied   uint64            // the last index handed to the coordinator
	seenLead  uint64            // the last leader this node knew of, for the log
	seenTerm  uint64            // its term
	ticks     uint64            // ticks so far, for heard
	heard     map[uint64]uint64 // while leading: the tick each follower was last seen active
	heardTerm uint64            // the term heard is of
	replayTo  uint64            // the commit index the group restarted with: see replaying

	// replaying is set while a restarted group applies again the entries
	// it had applied before (up to replayTo): its configuration is then
	// one it had on the way, not its last, and says nothing of this
	// node's membership.
	replaying atomic.Bool

	mu        sync.Mutex
	leader    uint64                  // guarded by mu
	termStart uint64                  // guarded by mu; see coordinator.Replica.Lead
	queue     []coordinator.Committed // guarded by mu: committed, not yet taken
	nudge     bool                    // guarded by mu: the leader changed since the last batch
	failed    error                   // guarded by mu
	conf      *pb.ConfState           // guarded by mu: the configuration applied last
	wasMember bool                    // guarded by mu: this node was in the configuration once (a founder always was)
	evicted   bool                    // guarded by mu: the leader says this node is no member, though conf has it
	term      uint64                  // guarded by mu: the term as this node knows it
	commit    uint64                  // guarded by mu: the commit index as this node knows it
	followers []Follower              // guarded by mu: how the followers fare, while this node leads
	delivered atomic.Uint64           // the last index the coordinator's writer took
	wake      chan struct{}           // holds a token while queue may be non-empty
	committed chan []coordinator.Committed
}

type proposal struct {
	data [][]byte
	done chan proposalResult
}

type proposalResult struct {
	term, first uint64
	err         error
}

type readRequest struct {
	done chan readResult
}

type readResult struct {
	index uint64
	err   error
}

// ErrStopped reports a call to a group that stopped: its node closed, or
// its journal failed.
var ErrStopped = errors.New("cluster: stopped")

// errNoLeader reports a proposal or read on a node that does not lead.
var errNoLeader = fmt.Errorf("cluster: this node does not lead the group: %w", coordinator.ErrNotLeader)

func newGroup(n *Node, partition int) *group {
	return &group{
		node:       n,
		partition:  partition,
		storage:    storage{MemoryStorage: raft.NewMemoryStorage()},
		inbox:      make(chan *pb.Message, inboxSize),
		props:      make(chan proposal),
		reads:      make(chan readRequest),
		tick:       make(chan struct{}, 1),
		handoff:    make(chan struct{}, 1),
		stableWake: make(chan struct{}, 1),
		calls:      make(chan func(error)),
		reading:    make(map[uint64]chan readResult),
		wake:       make(chan struct{}, 1),
		committed:  make(chan []coordinator.Committed),
	}
}

// start makes the group's RawNode: a group with nothing stored is a new
// cluster's, bootstrapped with every peer as a voter, unless the node
// joins a running cluster (it then waits for a leader to add it); the
// others restart from what the journal held, with the configuration as of
// applied.
func (g *group) start(applied uint64) error {
	o := g.node.opts
	cs, err := confStateAt(g.storage.MemoryStorage, applied)
	if err != nil {
		return fmt.Errorf("cluster: partition %d: %w", g.partition, err)
	}
	g.storage.conf = cs
	g.conf = cs
	g.wasMember = !o.Join || hasMember(cs, o.ID)
	g.applied = applied
	cfg := &raft.Config{
		Applied:         applied,
		ID:              o.ID,
		ElectionTick:    o.ElectionTicks,
		HeartbeatTick:   o.HeartbeatTicks,
		Storage:         g.storage,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		CheckQuorum:     true,
		PreVote:         true,
		// A leader that a change removes hands the group over at once.
		StepDownOnRemoval: true,
		// See persist.go.
		AsyncStorageWrites: true,
		Logger:             raftLogger{o.Logger.With("partition", g.partition)},
	}
	rn, err := raft.NewRawNode(cfg)
	if err != nil {
		return fmt.Errorf("cluster: partition %d: %w", g.partition, err)
	}
	hs, _, _ := g.storage.InitialState()
	if hs.GetCommit() > applied {
		g.replayTo = hs.GetCommit()
		g.replaying.Store(true)
	}
	last, _ := g.storage.LastIndex()
	g.last = last
	g.written = written{hs: hs, term: hs.GetTerm(), vote: hs.GetVote()}
	if raft.IsEmptyHardState(hs) && last == 0 && !o.Join {
		peers := make([]raft.Peer, len(o.Peers))
		for i, id := range o.Peers {
			peers[i] = raft.Peer{ID: id}
		}
		if err := rn.Bootstrap(peers); err != nil {
			return fmt.Errorf("cluster: partition %d: bootstrap: %w", g.partition, err)
		}
	}
	g.rn = rn
	return nil
}

// run is the group's goroutine: it feeds ticks, messages, proposals and
// reads to the RawNode and handles every Ready they make, until stop.
func (g *group) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			g.fail(ErrStopped)
			return
		case <-g.tick:
			g.rn.Tick()
			g.balance()
			g.noteFollowers()
		case fn := <-g.calls:
			fn(nil)
		case <-g.handoff:
			g.handOff()
		case <-g.stableWake:
			for _, st := range g.takeStable() {
				if err := g.onStable(st); err != nil {
					g.fail(err)
					g.refuse(stop)
					return
				}
			}
		case m := <-g.inbox:
			_ = g.rn.Step(m) // messages of removed or unknown peers are dropped
			// Every message that waits too, so that one Ready, and one
			// fsync, answers them all.
			for range maxStepBatch {
				select {
				case m := <-g.inbox:
					_ = g.rn.Step(m)
					continue
				default:
				}
				break
			}
		case p := <-g.props:
			p.done <- g.propose(p.data)
		case r := <-g.reads:
			if g.rn.BasicStatus().RaftState != raft.StateLeader {
				// The lead was lost before the read got here (Lead, which
				// the caller checked, is updated once the Ready that lost
				// it is handled). raft would drop the read, or send it to
				// a leader, and nothing would answer it while no Ready
				// comes: never, on a node a change just removed.
				r.done <- readResult{err: errNoLeader}
				break
			}
			g.nextRead++
			g.reading[g.nextRead] = r.done
			g.rn.ReadIndex(binary.AppendUvarint(nil, g.nextRead))
		}
		for g.rn.HasReady() {
			if err := g.handle(g.rn.Ready()); err != nil {
				g.node.opts.Logger.Error("raft group stopped", "partition", g.partition, "err", err)
				g.fail(err)
				g.refuse(stop)
				return
			}
		}
	}
}

// preferred returns the node that should lead the group when it is up and
// caught up, 0 while its configuration changes: partitions are dealt out
// over their sorted voters, so that leaders, and the work of coordinating,
// spread over the nodes. Every node that applied the same configuration
// prefers the same node.
func (g *group) preferred() uint64 {
	cs := g.conf // written on this goroutine only
	voters := cs.GetVoters()
	if len(voters) == 0 || len(cs.GetVotersOutgoing()) > 0 || len(cs.GetLearners()) > 0 || g.changing.Load() {
		return 0
	}
	return slices.Sorted(slices.Values(voters))[g.partition%len(voters)]
}

// balance hands the lead to the group's preferred node when this node
// leads in its place and the preferred node is up (heard from since the
// leader last checked its quorum) and has the whole log, so that the
// transfer stalls writes for one round trip at most. It runs every tick:
// RecentActive is false for a tick or so after each check of the quorum.
func (g *group) balance() {
	preferred := g.preferred()
	if preferred == 0 || preferred == g.node.opts.ID {
		return
	}
	st := g.rn.BasicStatus()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 {
		return
	}
	last := g.last
	ready := false
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == preferred {
			ready = pr.RecentActive && pr.Match == last
		}
	})
	if ready {
		g.rn.TransferLeader(preferred)
	}
}

// noteFollowers records, while this node leads, how each follower fares,
// for Stats; once a tick is often enough for an operator. raft clears
// RecentActive at each check of the quorum (every election timeout) and
// sets it again at the follower's next answer, so a follower counts as
// active while it was seen active within the last election timeout; a
// new leader, or a new follower, gets one election timeout to be heard
// from, as raft gives a new leader before it checks its quorum.
func (g *group) noteFollowers() {
	g.ticks++
	var followers []Follower
	if st := g.rn.BasicStatus(); st.RaftState == raft.StateLeader {
		if g.heardTerm != st.GetTerm() {
			g.heardTerm = st.GetTerm()
			clear(g.heard)
		}
		if g.heard == nil {
			g.heard = make(map[uint64]uint64)
		}
		g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id == g.node.opts.ID {
				return
			}
			if _, ok := g.heard[id]; !ok || pr.RecentActive {
				g.heard[id] = g.ticks
			}
			active := g.ticks-g.heard[id] <= uint64(g.node.opts.ElectionTicks)
			followers = append(followers, Follower{ID: id, Active: active, Match: pr.Match})
		})
	}
	g.mu.Lock()
	g.followers = followers
	g.mu.Unlock()
}

// handOff hands the lead, if this node has it, to the node that is up and
// has the most of the log, before this node stops.
func (g *group) handOff() {
	st := g.rn.Status()
	if st.RaftState != raft.StateLeader {
		return
	}
	// A voter heard from lately, with the most of the log; failing that
	// (raft clears RecentActive at each check of the quorum, until the
	// next answer), any voter with the most: this node stops either way.
	var target, match uint64
	active := false
	for id, pr := range st.Progress {
		if id == g.node.opts.ID || pr.IsLearner {
			continue
		}
		if better := pr.RecentActive && !active || pr.RecentActive == active && (target == 0 || pr.Match > match); better {
			target, match, active = id, pr.Match, pr.RecentActive
		}
	}
	if target != 0 {
		g.rn.TransferLeader(target)
	}
}

// propose appends data to the log if this node leads. Every Ready was
// handled before, so the entries take the indexes after the last one raft
// handed out to write.
func (g *group) propose(data [][]byte) proposalResult {
	st := g.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		return proposalResult{err: errNoLeader}
	}
	last := g.last
	ents := make([]*pb.Entry, len(data))
	for i, d := range data {
		ents[i] = &pb.Entry{Data: d}
	}
	err := g.rn.Step(&pb.Message{Type: pb.MsgProp.Enum(), From: new(g.node.opts.ID), Entries: ents})
	if err != nil {
		return proposalResult{err: fmt.Errorf("cluster: partition %d: %w", g.partition, err)}
	}
	return proposalResult{term: st.GetTerm(), first: last + 1}
}

// handle does what one Ready asks: what must become durable goes to the
// node's persister, the messages to other nodes go out at once (see
// persist.go), and the committed entries, which raft hands out only once
// they are durable here, go to the coordinator.
func (g *group) handle(rd raft.Ready) error {
	if n := len(rd.Entries); n > 0 {
		g.last = rd.Entries[n-1].GetIndex()
		for _, e := range rd.Entries {
			if e.GetType() != pb.EntryNormal {
				g.lastConf = e.GetIndex()
			}
		}
	} else if !raft.IsEmptySnap(rd.Snapshot) {
		g.last = rd.Snapshot.GetMetadata().GetIndex()
	}
	var apply *pb.Message
	g.outbox = g.outbox[:0]
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			g.node.persister.put(persistWork{g: g, m: m})
		case raft.LocalApplyThread:
			apply = m
		default:
			if m.GetType() == pb.MsgSnap {
				g.sendSnapshot(m) // streamed; reported once the follower has it
				continue
			}
			g.outbox = append(g.outbox, Message{Partition: g.partition, Raft: m})
		}
	}
	if len(g.outbox) > 0 {
		g.node.opts.Transport.Send(g.outbox)
		clear(g.outbox)
	}
	var out []coordinator.Committed
	for _, rs := range rd.ReadStates {
		id, _ := binary.Uvarint(rs.RequestCtx)
		if done, ok := g.reading[id]; ok {
			done <- readResult{index: rs.Index}
			delete(g.reading, id)
		}
	}
	st := g.rn.BasicStatus()
	if st.RaftState != raft.StateLeader || st.GetTerm() != g.leadTerm {
		// A read asked of a former leader is dropped by raft.
		for id, done := range g.reading {
			done <- readResult{err: errNoLeader}
			delete(g.reading, id)
		}
	}
	g.leadTerm = 0
	if st.RaftState == raft.StateLeader {
		g.leadTerm = st.GetTerm()
	}
	g.mu.Lock()
	termStart := g.termStart
	g.mu.Unlock()
	if g.startTerm != g.leadTerm {
		g.startTerm, termStart = g.leadTerm, 0
	}
	confChanged := false
	for _, e := range apply.GetEntries() {
		c := coordinator.Committed{Index: e.GetIndex(), Term: e.GetTerm()}
		switch e.GetType() {
		case pb.EntryNormal:
			c.Data = e.GetData()
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			cc, err := confChangeOf(e)
			if err != nil {
				return fmt.Errorf("cluster: partition %d: %w", g.partition, err)
			}
			cs := g.rn.ApplyConfChange(cc)
			g.setConf(cs)
			g.node.learnPeer(cc.AsV2())
			g.node.opts.Logger.Info("raft configuration changed", "partition", g.partition, "index", e.GetIndex(),
				"voters", sorted(cs.GetVoters()), "learners", sorted(append(slices.Clone(cs.GetLearners()), cs.GetLearnersNext()...)),
				"outgoing", sorted(cs.GetVotersOutgoing()))
			g.node.checkMembership()
			confChanged = true
		}
		g.applied = e.GetIndex()
		if g.leadTerm != 0 && e.GetTerm() == g.leadTerm && termStart == 0 {
			termStart = e.GetIndex()
		}
		out = append(out, c)
	}
	if g.replaying.Load() && g.applied >= g.replayTo {
		g.endReplay()
		g.node.checkMembership()
	}
	if st.Lead != 0 && (st.Lead != g.seenLead || st.GetTerm() != g.seenTerm) {
		g.node.leaderChanges.Add(1)
		g.node.opts.Logger.Info("raft leader changed", "partition", g.partition, "term", st.GetTerm(), "old", g.seenLead, "new", st.Lead)
		g.seenLead, g.seenTerm = st.Lead, st.GetTerm()
	}
	g.mu.Lock()
	changed := g.leader != st.Lead || g.termStart != termStart
	g.leader, g.termStart = st.Lead, termStart
	g.term, g.commit = st.GetTerm(), st.GetCommit()
	if g.leadTerm == 0 {
		g.followers = nil
	}
	g.queue = append(g.queue, out...)
	g.nudge = g.nudge || changed
	g.mu.Unlock()
	if changed {
		g.node.leaders.Fire()
	}
	if changed || confChanged {
		g.node.progress.Fire()
	}
	if len(out) > 0 || changed {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	// Applied, as raft sees it: the coordinator has them queued in order.
	for _, m := range apply.GetResponses() {
		_ = g.rn.Step(m)
	}
	return nil
}

// endReplay ends the replay of a restarted group once it has applied
// what it had before (a leader's snapshot may take it past that).
func (g *group) endReplay() {
	if g.applied >= g.replayTo {
		g.replaying.Store(false)
	}
}

// forward hands the committed entries to the coordinator's writer, as
// many at a time as have queued, so that the group never waits for it.
// It closes the channel when the group stops.
func (g *group) forward(stop <-chan struct{}) {
	defer close(g.committed)
	for {
		select {
		case <-g.wake:
		case <-stop:
			return
		}
		g.mu.Lock()
		batch, nudge := g.queue, g.nudge
		g.queue, g.nudge = nil, false
		g.mu.Unlock()
		if len(batch) == 0 && !nudge {
			continue
		}
		if batch == nil {
			batch = []coordinator.Committed{} // a change of leader: the writer looks again
		}
		select {
		case g.committed <- batch:
			if len(batch) > 0 {
				g.delivered.Store(batch[len(batch)-1].Index)
			}
		case <-stop:
			return
		}
	}
}

// fail records why the group stopped and answers the reads waiting.
func (g *group) fail(err error) {
	g.mu.Lock()
	if g.failed == nil {
		g.failed = err
	}
	g.leader, g.termStart = 0, 0
	g.nudge = true
	g.mu.Unlock()
	g.node.leaders.Fire()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	for id, done := range g.reading {
		done <- readResult{err: err}
		delete(g.reading, id)
	}
}

// refuse answers the calls made to a failed group until stop.
func (g *group) refuse(stop <-chan struct{}) {
	g.mu.Lock()
	err := g.failed
	g.mu.Unlock()
	for {
		select {
		case <-stop:
			return
		case <-g.tick:
		case <-g.inbox:
		case fn := <-g.calls:
			fn(err)
		case p := <-g.props:
			p.done <- proposalResult{err: err}
		case r := <-g.reads:
			r.done <- readResult{err: err}
		}
	}
}

// replica is a group as the coordinator sees it.
type replica struct{ g *group }

var _ coordinator.Replica = replica{}

func (r replica) Propose(ctx context.Context, data [][]byte) (term, first uint64, err error) {
	done := make(chan proposalResult, 1)
	select {
	case r.g.props <- proposal{data: data, done: done}:
	case <-r.g.node.stop:
		return 0, 0, ErrStopped
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	res := <-done
	return res.term, res.first, res.err
}

func (r replica) Committed() <-chan []coordinator.Committed { return r.g.committed }

func (r replica) Lead() (leader, termStart uint64) {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	return r.g.leader, r.g.termStart
}

func (r replica) ID() uint64 { return r.g.node.opts.ID }

func (r replica) ReadIndex(ctx context.Context) (uint64, error) {
	done := make(chan readResult, 1)
	select {
	case r.g.reads <- readRequest{done: done}:
	case <-r.g.node.stop:
		return 0, ErrStopped
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case res := <-done:
		return res.index, res.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
