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
	g := h.lookup(req.Group)
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	defer g.mu.Unlock()
	m, c := g.fenceMember(req.MemberID, req.InstanceID, req.Generation)
	if c != 0 {
		resp.ErrorCode = c
		return resp
	}
	switch g.state {
	case statePreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		if m.join == nil {
			g.heartbeat(m)
		}
	case stateCompletingRebalance, stateStable:
		g.heartbeat(m)
	default:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	}
	return resp
}
