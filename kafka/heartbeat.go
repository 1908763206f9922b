package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// heartbeat keeps a member's session alive and tells it of a rebalance.
func (h *Handler) heartbeat(req *kmsg.HeartbeatRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !validName(req.Group) {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	resp.ErrorCode = kerr.UnknownMemberID.Code
	h.inGroup(req.Group, false, func(g *group) { resp.ErrorCode = g.heartbeatFrom(req) })
	return resp
}

// heartbeatFrom answers a member's Heartbeat.
func (g *group) heartbeatFrom(req *kmsg.HeartbeatRequest) int16 {
	m, c := g.fenceMember(req.MemberID, req.InstanceID, req.Generation)
	if c != 0 {
		return c
	}
	switch g.state {
	case statePreparingRebalance:
		if m.join == nil {
			g.heartbeat(m)
		}
		return kerr.RebalanceInProgress.Code
	case stateCompletingRebalance, stateStable:
		g.heartbeat(m)
		return 0
	}
	return kerr.UnknownMemberID.Code
}
