package kafka

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
)

// syncGroup takes the leader's assignment, or waits for it.
func (h *Handler) syncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if !validName(req.Group) {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	var ch chan kmsg.Response
	if !h.inGroup(req.Group, false, func(g *group) { ch = g.sync(req, resp) }) {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil
	}
	if ch == nil {
		return resp, nil
	}
	return h.wait(ctx, req, ch)
}

func (g *group) sync(req *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) chan kmsg.Response {
	m, c := g.fenceMember(req.MemberID, req.InstanceID, req.Generation)
	switch {
	case c != 0:
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		c = kerr.InconsistentGroupProtocol.Code
	case g.state == statePreparingRebalance:
		c = kerr.RebalanceInProgress.Code
	case g.state == stateCompletingRebalance:
		delete(g.pendingSync, m.id)
		if m.sync != nil { // a repeated sync replaces the first
			r := m.sync.ResponseKind().(*kmsg.SyncGroupResponse)
			r.ErrorCode = kerr.RebalanceInProgress.Code
			m.syncCh <- r
		}
		m.sync, m.syncCh = req, make(chan kmsg.Response, 1)
		ch := m.syncCh
		if m.id == g.leader {
			g.completeSync(req)
		}
		return ch
	case g.state == stateStable:
		resp.ProtocolType = kmsg.StringPtr(g.protocolType)
		resp.Protocol = kmsg.StringPtr(g.protocol)
		resp.MemberAssignment = m.assignment
		g.heartbeat(m)
	default:
		c = kerr.UnknownMemberID.Code
	}
	resp.ErrorCode = c
	return nil
}

// completeSync stores the leader's assignment and makes the group Stable.
// The assignment bytes are passed through untouched: clients assign.
func (g *group) completeSync(req *kmsg.SyncGroupRequest) {
	for _, m := range g.members {
		m.assignment = nil
	}
	for _, a := range req.GroupAssignment {
		if m := g.members[a.MemberID]; m != nil {
			m.assignment = bytes.Clone(a.MemberAssignment)
		}
	}
	for _, m := range g.members {
		if m.assignment == nil && g.protocolType == "consumer" {
			// Followers decode what they get: give them an empty
			// assignment rather than no bytes.
			a := kmsg.NewConsumerMemberAssignment()
			m.assignment = a.AppendTo(nil)
		}
		if m.sync != nil {
			r := m.sync.ResponseKind().(*kmsg.SyncGroupResponse)
			r.ProtocolType = kmsg.StringPtr(g.protocolType)
			r.Protocol = kmsg.StringPtr(g.protocol)
			r.MemberAssignment = m.assignment
			m.syncCh <- r
			m.sync, m.syncCh = nil, nil
			g.heartbeat(m)
		}
	}
	g.state = stateStable
	g.clearPendingSync()
}

// fenceMember checks that a request comes from a current member of the
// current generation.
func (g *group) fenceMember(memberID string, instanceID *string, generation int32) (*member, int16) {
	if c := g.checkInstance(instanceID, memberID); c != 0 {
		return nil, c
	}
	m := g.members[memberID]
	switch {
	case m == nil:
		return nil, kerr.UnknownMemberID.Code
	case generation != g.generation:
		return nil, kerr.IllegalGeneration.Code
	}
	return m, 0
}

// fenceCommit checks an OffsetCommit against the group's membership, as
// Kafka does: a group without members takes only simple commits
// (generation -1); a group with members takes commits from its members at
// its generation, and none while it waits for the leader's assignment. No
// commit is taken while the next generation is stored: it waits for the
// commits in flight (storeGeneration), and one taken after that wait could
// land after the generation.
func (g *group) fenceCommit(memberID string, instanceID *string, generation int32) (*member, int16) {
	if g.storing {
		return nil, kerr.RebalanceInProgress.Code
	}
	if len(g.members) == 0 {
		if generation != coordinator.NoGeneration {
			return nil, kerr.IllegalGeneration.Code
		}
		return nil, 0
	}
	m, c := g.fenceMember(memberID, instanceID, generation)
	if c != 0 {
		return nil, c
	}
	if g.state == stateCompletingRebalance {
		return nil, kerr.RebalanceInProgress.Code
	}
	return m, 0
}
