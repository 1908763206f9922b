package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Stats is what a node knows of its groups and peers, for metrics and
// operators: read at once, without waiting for any group.
type Stats struct {
	// Partitions holds each partition's group as this node sees it, in
	// partition order.
	Partitions []PartitionStats
	// LeaderChanges counts the times this node learnt of a new leader
	// (another node, or a new term), over every group, since it started.
	LeaderChanges uint64
	// ProposalsPending is the number of entries the groups this node leads
	// have appended and not yet committed.
	ProposalsPending uint64
	// SnapshotsSent and SnapshotsReceived count the leader's snapshots
	// this node sent to lagging followers (streamed whole: the follower
	// answered), and received from a leader.
	SnapshotsSent, SnapshotsReceived uint64
	// Peers holds every other node of the cluster (the members of its
	// groups' configurations, or its Options.Peers while it has none), by
	// id.
	Peers []PeerStats
	// Membership is where this node stands in the cluster.
	Membership Membership
}

// PartitionStats is one partition's group as a node sees it.
type PartitionStats struct {
	Partition int
	// Leader is the leader this node knows (0 if none); Term and Commit
	// are the term and commit index as this node knows them.
	Leader, Term, Commit uint64
	// Applied is the last index of the group's log that the partition's
	// tables have taken in.
	Applied uint64
	// Followers, while this node leads the group, says how each other
	// replica fares as the leader sees it.
	Followers []Follower
}

// Follower is a replica as its group's leader sees it.
type Follower struct {
	ID uint64
	// Active is true when the leader heard from it within the last
	// election timeout.
	Active bool
	// Match is the last index the leader knows it holds durably.
	Match uint64
}

// PeerStats is another node as this node's transport sees it.
type PeerStats struct {
	ID uint64
	// Reachable is true while messages to the peer arrive: the transport
	// delivered to it recently and its last attempt did not fail.
	Reachable bool
	// Sent and Dropped count Raft messages delivered to the peer (over
	// HTTP: written to its stream, or POSTed and answered), and lost on
	// the way (a full queue, a failed delivery).
	Sent, Dropped uint64
}

// peerStatser is a Transport that knows how its peers fare; both the HTTP
// transport and the tests' in-process one do. A node whose transport does
// not reports its peers unreachable.
type peerStatser interface {
	Peer(id uint64) (PeerStats, bool)
}

// Membership is where a node stands in its cluster, as the configurations
// of its partitions' groups, as it applied them, say.
type Membership int

const (
	// Member is a voter of at least one partition.
	Member Membership = iota
	// Learner holds replicas being added (learners), none as a voter yet.
	Learner
	// Joining is a node started with Options.Join that no partition has
	// added yet.
	Joining
	// Removed was removed from every partition it held: it serves
	// nothing.
	Removed
)

func (m Membership) String() string {
	switch m {
	case Member:
		return "member"
	case Learner:
		return "learner"
	case Joining:
		return "joining"
	case Removed:
		return "removed"
	}
	return fmt.Sprintf("Membership(%d)", int(m))
}

// ErrRemoved reports a node that was removed from the cluster: it holds no
// replica of any partition, and serves nothing. Stop it; a node that is to
// come back needs an empty data directory and a new id.
var ErrRemoved = errors.New("cluster: this node was removed from the cluster")

// ErrNotAdded reports a node that joins a running cluster and has not
// been added, as a voter, to any partition yet.
var ErrNotAdded = errors.New("cluster: this node has not been added to the cluster yet")

// Stats returns what the node knows of its groups and peers.
func (n *Node) Stats() Stats {
	st := Stats{
		LeaderChanges:     n.leaderChanges.Load(),
		SnapshotsSent:     n.snapshotsSent.Load(),
		SnapshotsReceived: n.snapshotsReceived.Load(),
	}
	if !n.started.Load() {
		return st
	}
	st.Partitions = make([]PartitionStats, len(n.groups))
	for i, g := range n.groups {
		g.mu.Lock()
		ps := PartitionStats{Partition: i, Leader: g.leader, Term: g.term, Commit: g.commit, Followers: slices.Clone(g.followers)}
		g.mu.Unlock()
		ps.Applied = g.delivered.Load()
		if ps.Leader == n.opts.ID {
			if last, err := g.storage.LastIndex(); err == nil && last > ps.Commit {
				st.ProposalsPending += last - ps.Commit
			}
		}
		st.Partitions[i] = ps
	}
	ps, _ := n.opts.Transport.(peerStatser)
	for _, id := range n.peers() {
		p := PeerStats{ID: id}
		if ps != nil {
			if got, ok := ps.Peer(id); ok {
				p = got
				p.ID = id
			}
		}
		st.Peers = append(st.Peers, p)
	}
	st.Membership = Membership(n.member.Load())
	return st
}

// peers returns every other node of the cluster as this node knows it,
// sorted: the members of its groups' configurations, or, while it has
// none (a joining node), its Options.Peers. A node removed from every
// partition is none of them.
func (n *Node) peers() []uint64 {
	var ids []uint64
	for _, g := range n.groups {
		g.mu.Lock()
		cs := g.conf
		g.mu.Unlock()
		ids = append(ids, cs.GetVoters()...)
		ids = append(ids, cs.GetLearners()...)
		ids = append(ids, cs.GetLearnersNext()...)
		ids = append(ids, cs.GetVotersOutgoing()...)
	}
	if len(ids) == 0 {
		ids = slices.Clone(n.opts.Peers)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return slices.DeleteFunc(ids, func(id uint64) bool { return id == n.opts.ID })
}

// Ready returns nil once the node is a voter of a partition, and
// otherwise why it serves nothing: ErrNotAdded while it waits to be added
// (or catches up as a learner), ErrRemoved once it was removed.
func (n *Node) Ready() error {
	if !n.started.Load() {
		return ErrNotAdded
	}
	if Membership(n.member.Load()) == Member {
		return nil // the hot path: servers ask before every request
	}
	m, detail := n.memberState()
	switch m {
	case Removed:
		return fmt.Errorf("%w (node %d; %s): it serves nothing; stop it", ErrRemoved, n.opts.ID, detail)
	case Joining:
		return fmt.Errorf("%w: node %d waits to be added; run %s against a node of the cluster", ErrNotAdded, n.opts.ID, n.addCommand())
	case Learner:
		return fmt.Errorf("%w: node %d catches up as a learner of partitions %s", ErrNotAdded, n.opts.ID, detail)
	}
	return nil
}

// memberState derives the node's membership from its groups'
// configurations, with a detail for the log: the partitions it learns, or
// the voters of the partitions that removed it.
func (n *Node) memberState() (Membership, string) {
	var learning []string
	var removedFrom []string
	id := n.opts.ID
	for i, g := range n.groups {
		g.mu.Lock()
		cs, was, evicted := g.conf, g.wasMember, g.evicted
		g.mu.Unlock()
		switch {
		case evicted:
			removedFrom = append(removedFrom, fmt.Sprintf("partition %d's leader says this node is not a member", i))
		case slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetVotersOutgoing(), id):
			return Member, ""
		case slices.Contains(cs.GetLearners(), id) || slices.Contains(cs.GetLearnersNext(), id):
			learning = append(learning, fmt.Sprint(i))
		case was && len(cs.GetVoters()) > 0:
			removedFrom = append(removedFrom, fmt.Sprintf("partition %d has voters %v", i, sorted(cs.GetVoters())))
		}
	}
	switch {
	case len(learning) > 0:
		return Learner, strings.Join(learning, ",")
	case len(removedFrom) > 0:
		if len(removedFrom) > 3 {
			removedFrom = append(removedFrom[:3], "...")
		}
		return Removed, strings.Join(removedFrom, ", ")
	case !n.opts.Join:
		return Member, "" // a founder whose groups have not applied their first configuration yet
	}
	// Nothing yet, or only the configurations a joining node replays on its
	// way to the one that adds it.
	return Joining, ""
}

// addCommand is the command that adds this node to every partition.
func (n *Node) addCommand() string {
	if n.opts.Address == "" {
		return fmt.Sprintf("offsetd cluster add-node %d", n.opts.ID)
	}
	return fmt.Sprintf("offsetd cluster add-node -raft-addr %s %d", n.opts.Address, n.opts.ID)
}

// notMemberOf returns the partitions of msgs, sent by node from, that this
// node leads, having applied every entry before its term, and whose
// configuration does not have from: their leader's word that from was
// removed (a leader applies a change that adds a node before it sends it
// anything).
func (n *Node) notMemberOf(from uint64, msgs []Message) []int {
	if !n.started.Load() {
		return nil
	}
	var out []int
	for _, m := range msgs {
		if m.Partition < 0 || m.Partition >= len(n.groups) || slices.Contains(out, m.Partition) {
			continue
		}
		g := n.groups[m.Partition]
		g.mu.Lock()
		current := g.leader == n.opts.ID && g.termStart != 0 && g.delivered.Load() >= g.termStart
		member := hasMember(g.conf, from)
		g.mu.Unlock()
		if current && !member {
			out = append(out, m.Partition)
		}
	}
	return out
}

// toldNotMember records the word of partitions' leaders that this node is
// no member of them, though it never applied the change that removed it
// (it was cut off as it was committed).
func (n *Node) toldNotMember(partitions []int) {
	changed := false
	for _, p := range partitions {
		if p < 0 || p >= len(n.groups) {
			continue
		}
		g := n.groups[p]
		g.mu.Lock()
		news := !g.evicted
		g.evicted = true
		g.mu.Unlock()
		if news {
			changed = true
			n.opts.Logger.Warn("the leader of a partition says this node is not a member of it", "partition", p)
		}
	}
	if changed {
		n.checkMembership()
	}
}

// checkMembership logs a change of the node's membership: its removal
// above all, which it learns from the configuration change that removes it
// from its last partition.
func (n *Node) checkMembership() {
	n.memberMu.Lock()
	defer n.memberMu.Unlock()
	replaying := slices.ContainsFunc(n.groups, func(g *group) bool { return g.replaying.Load() })
	if replaying && n.memberSet {
		return // judged again once every group has applied what it had before
	}
	m, detail := n.memberState() // under memberMu: the last to look stores what it saw
	n.memberSet = true
	if replaying {
		// At start, while groups apply again what they had: what they show
		// is a configuration passed on the way, to serve by until they are
		// done, not to log (a node added long ago is no joiner).
		n.membership = m
		n.member.Store(int32(m))
		return
	}
	first := !n.memberKnown
	if !first && m == n.membership {
		return
	}
	n.membership, n.memberKnown = m, true
	n.member.Store(int32(m))
	l := n.opts.Logger
	switch m {
	case Removed:
		l.Warn("this node was removed from the cluster", "node", n.opts.ID, "detail", detail,
			"action", "it serves nothing: stop it, and delete its data directory before the machine serves again")
	case Joining:
		l.Warn("this node waits to be added to the cluster", "node", n.opts.ID,
			"run", n.addCommand(), "against", "any node of the cluster")
	case Learner:
		l.Info("this node catches up as a learner", "node", n.opts.ID, "partitions", detail)
	case Member:
		if !first {
			l.Info("this node is a voter of the cluster", "node", n.opts.ID)
		}
	}
}

// checkPeers logs each peer that becomes unreachable, and reachable
// again, as the transport sees them; the ticker calls it.
func (n *Node) checkPeers() {
	ps, ok := n.opts.Transport.(peerStatser)
	if !ok {
		return
	}
	if n.unreachable == nil {
		n.unreachable = make(map[uint64]bool)
	}
	for _, id := range n.peers() {
		p, _ := ps.Peer(id)
		switch {
		case !p.Reachable && !n.unreachable[id]:
			n.unreachable[id] = true
			n.opts.Logger.Warn("raft peer unreachable", "peer", id)
		case p.Reachable && n.unreachable[id]:
			delete(n.unreachable, id)
			n.opts.Logger.Info("raft peer reachable again", "peer", id)
		}
	}
}
