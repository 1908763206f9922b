package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// In a cluster the coordinator of a group is the node that leads the
// group's partition, as in Kafka the leader of the group's
// __consumer_offsets partition is. Membership lives in the memory of that
// node only: when the lead moves, the new coordinator starts the group
// afresh and the members rejoin, as after a coordinator failover in Kafka.
// Generations stay fenced across the move because each rebalance stores
// its generation (replicated) before the members learn it.

// coordinatorOf returns the broker that coordinates group, or
// COORDINATOR_NOT_AVAILABLE while its partition has no known leader.
func (h *Handler) coordinatorOf(group string) (Broker, int16) {
	if h.opts.Brokers == nil {
		return h.opts.Broker, 0
	}
	if leader, _ := h.c.Leader(group); leader != 0 {
		for _, b := range h.opts.Brokers {
			if uint64(b.NodeID) == leader {
				return b, 0
			}
		}
	}
	return Broker{}, kerr.CoordinatorNotAvailable.Code
}

// coordinates reports whether this node coordinates group. A group whose
// coordinator moved away loses the membership it had here: its waiting
// requests are answered NOT_COORDINATOR, so that its members find the new
// coordinator and rejoin there.
func (h *Handler) coordinates(group string) bool {
	if _, self := h.c.Leader(group); self {
		return true
	}
	h.release(group)
	return false
}

// release drops the membership state of group, if any.
func (h *Handler) release(name string) {
	h.mu.Lock()
	g := h.groups[name]
	delete(h.groups, name)
	h.mu.Unlock()
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.drop()
}

// drop ends a group's membership here: parked requests are answered
// NOT_COORDINATOR, timers stop, and the group is Dead to whoever waits for
// its lock. The caller removes it from h.groups.
func (g *group) drop() {
	for _, m := range g.members {
		g.answerParked(m, kerr.NotCoordinator.Code)
		g.h.timers.cancel(m.session)
	}
	for _, tm := range g.pending {
		g.h.timers.cancel(tm)
	}
	g.h.timers.cancel(g.rebalance)
	g.clearPendingSync()
	g.members, g.pending, g.static = map[string]*member{}, map[string]*timer{}, map[string]string{}
	g.rebalance, g.joining = nil, 0
	if g.cg != nil {
		for _, m := range g.cg.members {
			g.h.timers.cancel(m.session)
			g.h.timers.cancel(m.revocation)
		}
		g.cg = nil
	}
	g.state = stateDead
}

// outlived reports, in a cluster, a group whose membership here is from
// before another node coordinated it: that node stored a higher
// generation. The group starts afresh. A group that has not rebalanced here
// yet has nothing from before.
func (g *group) outlived() bool {
	if g.h.opts.Brokers == nil || g.generation == 0 {
		return false
	}
	info, ok, err := g.h.c.Group(g.name)
	return err == nil && ok && info.Generation > g.generation
}

// routed answers a request for one group that this node does not
// coordinate with NOT_COORDINATOR; nil means this node serves it. Requests
// for several groups (OffsetFetch from v8, DescribeGroups, DeleteGroups)
// are answered group by group instead.
func (h *Handler) routed(req kmsg.Request) kmsg.Response {
	var group string
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		group = r.Group
	case *kmsg.OffsetFetchRequest:
		if r.Version >= 8 {
			return nil
		}
		group = r.Group
	case *kmsg.OffsetDeleteRequest:
		group = r.Group
	case *kmsg.TxnOffsetCommitRequest:
		group = r.Group
	case *kmsg.JoinGroupRequest:
		group = r.Group
	case *kmsg.SyncGroupRequest:
		group = r.Group
	case *kmsg.HeartbeatRequest:
		group = r.Group
	case *kmsg.LeaveGroupRequest:
		group = r.Group
	case *kmsg.ConsumerGroupHeartbeatRequest:
		group = r.Group
	default:
		return nil
	}
	if !validName(group) || h.coordinates(group) {
		return nil // a bad name gets its own error from the request's handler
	}
	return refuse(req, kerr.NotCoordinator.Code)
}
