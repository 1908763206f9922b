package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaveGroup removes members (one before v3, a batch from v3) and starts
// a rebalance for the rest.
func (h *Handler) leaveGroup(req *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !validName(req.Group) {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if !h.inGroup(req.Group, false, func(g *group) { g.leave(leaving, resp) }) {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	return resp
}

// leave removes the members leaving, answering each in resp.
func (g *group) leave(leaving []kmsg.LeaveGroupRequestMember, resp *kmsg.LeaveGroupResponse) {
	left := false
	for _, l := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = l.MemberID, l.InstanceID
		id := l.MemberID
		if l.InstanceID != nil {
			known, ok := g.static[*l.InstanceID]
			switch {
			case !ok:
				rm.ErrorCode = kerr.UnknownMemberID.Code
			case id != "" && id != known:
				rm.ErrorCode = kerr.FencedInstanceID.Code
			}
			id = known
		}
		if rm.ErrorCode == 0 {
			if m := g.members[id]; m != nil {
				g.answerParked(m, kerr.UnknownMemberID.Code)
				g.removeMember(m)
				left = true
			} else if tm, ok := g.pending[id]; ok {
				g.h.timers.cancel(tm)
				delete(g.pending, id)
			} else {
				rm.ErrorCode = kerr.UnknownMemberID.Code
			}
		}
		resp.Members = append(resp.Members, rm)
	}
	if left {
		g.startRebalance()
	}
}
