package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/offsetd/offsetd/coordinator"
)

// ErrChangePending reports a configuration change asked of a partition
// while another is under way: a joint configuration not yet left, a
// change not yet applied, a node being added (a learner), or another
// ChangeReplicas running on the leader. Changes go one at a time; retry
// once it is done (or finish the one under way: asking for it again
// resumes it).
var ErrChangePending = errors.New("cluster: a change of the partition's replicas is under way")

// Replicas is a partition's configuration as a node knows it.
type Replicas struct {
	Partition int
	// Voters are the nodes whose votes make a quorum.
	Voters []uint64
	// Learners receive the log without voting: nodes being added.
	Learners []uint64
	// Outgoing are the voters of the previous configuration while a joint
	// change is under way: a quorum of each set is then needed.
	Outgoing []uint64
	// Leader is the leader as the node knows it, 0 if none.
	Leader uint64
}

// Replicas returns partition's configuration as this node last applied
// it.
func (n *Node) Replicas(partition int) (Replicas, error) {
	if !n.started.Load() {
		return Replicas{}, fmt.Errorf("%w: partition %d", coordinator.ErrLoading, partition)
	}
	if partition < 0 || partition >= len(n.groups) {
		return Replicas{}, fmt.Errorf("%w: partition %d of %d", ErrInvalid, partition, len(n.groups))
	}
	g := n.groups[partition]
	g.mu.Lock()
	cs, leader := g.conf, g.leader
	g.mu.Unlock()
	return Replicas{
		Partition: partition,
		Voters:    sorted(cs.GetVoters()),
		Learners:  sorted(append(slices.Clone(cs.GetLearners()), cs.GetLearnersNext()...)),
		Outgoing:  sorted(cs.GetVotersOutgoing()),
		Leader:    leader,
	}, nil
}

func sorted(ids []uint64) []uint64 { return slices.Sorted(slices.Values(ids)) }

// ReplicaChange is one change of a partition's replicas: Add alone adds
// a node, Remove alone removes one, both move the replica from Remove to
// Add. AddAddress, the host:port of Add's Raft listener, rides in the
// configuration change: every node that applies it passes it to its
// transport's AddPeer.
type ReplicaChange struct {
	// Add is the node to add, 0 for none.
	Add uint64
	// AddAddress is where the other nodes reach Add (its Raft listener,
	// host:port), for those that do not know it yet.
	AddAddress string
	// Remove is the node to remove, 0 for none.
	Remove uint64
}

// ChangeReplicas changes partition's replicas, on the node that leads it
// (others answer a *coordinator.NotLeaderError naming the leader), through
// Raft configuration changes, each committed by the log like any write:
//
//  1. Add joins as a learner, which receives the log (or the leader's
//     snapshot) without voting; ChangeReplicas waits until it holds every
//     entry committed when it joined.
//  2. If this node is Remove, it hands its lead to another voter and
//     answers a *coordinator.NotLeaderError naming it: call again there.
//  3. One change promotes Add and removes Remove: with both, a joint
//     configuration (a quorum of the old voters and one of the new decide
//     together) that raft leaves by itself once committed.
//
// It returns once the configuration has Add as a voter and not Remove.
// Called again after an interruption (a new leader, a cancelled ctx), it
// resumes where the change stopped; called for a change already made, it
// returns nil. While a change is under way, another is refused with
// ErrChangePending; removing the learner of an addition that cannot finish
// (its node never came) abandons it.
//
// No acknowledged write is lost on the way: each change commits on a
// quorum of the configuration before it, and every quorum of the new
// configuration (of both halves of a joint one) overlaps every quorum of
// the old, so whichever leader it elects holds every acknowledged write.
func (n *Node) ChangeReplicas(ctx context.Context, partition int, ch ReplicaChange) error {
	if !n.started.Load() {
		return fmt.Errorf("%w: partition %d", coordinator.ErrLoading, partition)
	}
	if partition < 0 || partition >= len(n.groups) {
		return fmt.Errorf("%w: partition %d of %d", ErrInvalid, partition, len(n.groups))
	}
	if ch.Add == ch.Remove {
		return fmt.Errorf("%w: a change adds a node, removes one, or both (add %d, remove %d)", ErrInvalid, ch.Add, ch.Remove)
	}
	g := n.groups[partition]
	if !g.changing.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: partition %d: another change runs on this node", ErrChangePending, partition)
	}
	defer g.changing.Store(false)
	c := changer{ReplicaChange: ch, first: true}
	for {
		wake := n.progress.Wait()
		var res stepResult
		err := g.call(ctx, func(failed error) {
			if failed != nil {
				res = stepResult{err: failed}
				return
			}
			res = c.step(g)
		})
		if err == nil {
			err = res.err
		}
		var nle *coordinator.NotLeaderError
		if errors.As(err, &nle) && nle.Leader == 0 && !c.first {
			// This node handed its lead off: name the new leader, where
			// the change goes on, once this node hears of it.
			wait, cancel := context.WithTimeout(ctx, 2*time.Duration(n.opts.ElectionTicks)*n.opts.TickInterval)
			nle.Leader, _ = n.AwaitLeader(wait, partition, n.opts.ID)
			cancel()
		}
		if err != nil || res.done {
			return err
		}
		c.first = false
		if res.snapshot {
			// A new node needs a snapshot that has it in its configuration;
			// the next step sees whether this one does.
			if err := n.coord.Snapshot(ctx); err != nil {
				return err
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stop:
			return ErrStopped
		}
	}
}

// call runs fn on the group's goroutine and waits for it.
func (g *group) call(ctx context.Context, fn func(failed error)) error {
	done := make(chan struct{})
	select {
	case g.calls <- func(failed error) { fn(failed); close(done) }:
	case <-g.node.stop:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	<-done
	return nil
}

// changer is one ChangeReplicas under way.
type changer struct {
	ReplicaChange
	first    bool   // the first step: check the change may start
	caughtUp uint64 // the commit index Add must reach, once it is a learner
}

type stepResult struct {
	done     bool
	snapshot bool // the partition must take a snapshot for Add
	err      error
}

// step looks at the group's state on its goroutine and takes the change's
// next step, if it can: the caller calls again on the next tick or
// configuration change.
func (c *changer) step(g *group) stepResult {
	st := g.rn.Status()
	if st.RaftState != raft.StateLeader {
		return stepResult{err: &coordinator.NotLeaderError{Partition: g.partition, Leader: st.Lead}}
	}
	g.mu.Lock()
	termStart := g.termStart
	g.mu.Unlock()
	cfg := st.Config
	voters, outgoing, learners := cfg.Voters[0], cfg.Voters[1], cfg.Learners
	pending := len(outgoing) > 0 || termStart == 0 || g.applied < termStart || g.confPending() || st.LeadTransferee != 0
	_, addVoter := voters[c.Add]
	_, addLearner := learners[c.Add]
	_, removeVoter := voters[c.Remove]
	_, removeLearner := learners[c.Remove]
	adding := c.Add != 0 && !addVoter
	removing := c.Remove != 0 && (removeVoter || removeLearner || isMember(outgoing, c.Remove))
	if c.first {
		if c.Remove != 0 && !removeVoter && !removeLearner && c.Add != 0 && !addVoter && !addLearner {
			return stepResult{err: fmt.Errorf("%w: partition %d: node %d is not a voter", ErrInvalid, g.partition, c.Remove)}
		}
		if !adding && !removing {
			return stepResult{done: true}
		}
		// A joint configuration this very change entered (before a leader
		// changed) is left by raft: wait for it. Any other is another's.
		ours := len(outgoing) > 0 && (c.Add == 0 || addVoter) && (c.Remove == 0 || !removeVoter)
		if (len(outgoing) > 0 && !ours) || g.confPending() {
			return stepResult{err: fmt.Errorf("%w: partition %d: configuration %v", ErrChangePending, g.partition, cfg)}
		}
		for id := range learners {
			if id != c.Add && id != c.Remove { // removing a learner abandons its addition
				return stepResult{err: fmt.Errorf("%w: partition %d: node %d is being added", ErrChangePending, g.partition, id)}
			}
		}
		if removeVoter && !adding && len(voters) == 1 {
			return stepResult{err: fmt.Errorf("%w: partition %d: node %d is its last voter", ErrInvalid, g.partition, c.Remove)}
		}
	}
	if pending {
		if len(outgoing) > 0 && !cfg.AutoLeave && !g.confPending() {
			return c.propose(g, &pb.ConfChangeV2{}) // leave a joint configuration entered explicitly
		}
		return stepResult{} // raft leaves a joint configuration by itself
	}
	if !adding && !removing {
		return stepResult{done: true}
	}
	if adding && !addLearner {
		cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: new(c.Add)}}}
		if c.AddAddress != "" {
			cc.Context = []byte(c.AddAddress)
		}
		return c.propose(g, cc)
	}
	if adding {
		if c.caughtUp == 0 {
			c.caughtUp = st.GetCommit()
		}
		pr, ok := st.Progress[c.Add]
		if !ok || pr.Match < c.caughtUp {
			// A node that lacks what the log still holds catches up only
			// from a snapshot.
			if first, _ := g.storage.FirstIndex(); ok && pr.Match+1 < first && !g.snapshotHas(c.Add) {
				return stepResult{snapshot: true}
			}
			return stepResult{}
		}
	}
	if removing && c.Remove == g.node.opts.ID {
		// Hand the lead to the voter that stays and has the most of the log.
		var to, match uint64
		for id := range voters {
			if pr, ok := st.Progress[id]; id != c.Remove && ok && pr.RecentActive && (to == 0 || pr.Match > match) {
				to, match = id, pr.Match
			}
		}
		if to != 0 {
			g.rn.TransferLeader(to)
		}
		return stepResult{}
	}
	cc := &pb.ConfChangeV2{}
	if adding {
		cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: pb.ConfChangeAddNode.Enum(), NodeId: new(c.Add)})
	}
	if removing {
		cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: pb.ConfChangeRemoveNode.Enum(), NodeId: new(c.Remove)})
	}
	return c.propose(g, cc)
}

func isMember(set map[uint64]struct{}, id uint64) bool {
	_, ok := set[id]
	return ok
}

// propose appends a configuration change to the log. raft may still turn
// it into an empty entry (it refuses a change while one is pending); the
// next step then sees the configuration unchanged and proposes it again.
func (c *changer) propose(g *group, cc *pb.ConfChangeV2) stepResult {
	if err := g.rn.ProposeConfChange(cc); err != nil {
		return stepResult{err: fmt.Errorf("cluster: partition %d: conf change: %w", g.partition, err)}
	}
	return stepResult{}
}

// confPending reports whether the log holds a configuration change after
// the last entry applied.
func (g *group) confPending() bool {
	if g.lastConf > g.applied {
		return true // handed out to write, perhaps not yet in storage
	}
	last, _ := g.storage.LastIndex()
	if last <= g.applied {
		return false
	}
	ents, err := g.storage.Entries(g.applied+1, last+1, math.MaxUint64)
	if err != nil {
		return true // compacted past applied: cannot tell, so wait
	}
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal {
			return true
		}
	}
	return false
}

// snapshotHas reports whether the snapshot the group sends a lagging
// node has id in its configuration: raft drops one that does not.
func (g *group) snapshotHas(id uint64) bool {
	snap, err := g.storage.MemoryStorage.Snapshot()
	if err != nil {
		return false
	}
	at, _ := g.storage.snapshotIndex(snap.GetMetadata().GetIndex())
	cs, err := confStateAt(g.storage.MemoryStorage, at)
	if err != nil {
		return false
	}
	return slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetLearners(), id) || slices.Contains(cs.GetLearnersNext(), id)
}

// setConf records the configuration the group applied last.
func (g *group) setConf(cs *pb.ConfState) {
	g.mu.Lock()
	g.conf = proto.CloneOf(cs)
	g.wasMember = g.wasMember || hasMember(cs, g.node.opts.ID)
	g.mu.Unlock()
}

// hasMember reports whether id is a voter or learner of cs.
func hasMember(cs *pb.ConfState, id uint64) bool {
	return slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetVotersOutgoing(), id) ||
		slices.Contains(cs.GetLearners(), id) || slices.Contains(cs.GetLearnersNext(), id)
}

// peerAdder is a Transport that can learn a new node's address.
type peerAdder interface {
	AddPeer(id uint64, addr string)
}

// learnPeer passes the Raft address a change that adds a node carries to
// the transport.
func (n *Node) learnPeer(cc *pb.ConfChangeV2) {
	if len(cc.GetContext()) == 0 {
		return
	}
	for _, c := range cc.GetChanges() {
		switch c.GetType() {
		case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode:
			n.addPeer(c.GetNodeId(), string(cc.GetContext()))
			return
		}
	}
}

// addPeer tells the transport, if it can learn addresses, where node id's
// Raft listener is.
func (n *Node) addPeer(id uint64, addr string) {
	if pa, ok := n.opts.Transport.(peerAdder); ok && id != n.opts.ID {
		pa.AddPeer(id, addr)
	}
}
