package kafka

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
)

// inGroup runs fn under the lock of the group named name and reports
// whether there was one; with create, a group with no membership state is
// made Empty first. Every change of a group runs in an inGroup call (or a
// timer or storage callback that takes the group's lock): fn decides and
// changes memory only, and never waits for storage, so that heartbeats and
// timers never wait behind a write. What fn decides to write is written
// after it returns, and its outcome is applied under the lock again.
func (h *Handler) inGroup(name string, create bool, fn func(g *group)) bool {
	for {
		h.mu.Lock()
		g := h.groups[name]
		if g == nil && create {
			g = newGroup(h, name)
			h.groups[name] = g
		}
		h.mu.Unlock()
		if g == nil {
			return false
		}
		g.mu.Lock()
		switch {
		case g.state == stateDead:
			// Deleted or dropped meanwhile: look again.
			g.mu.Unlock()
		case g.outlived():
			g.drop()
			g.mu.Unlock()
			h.mu.Lock() // h.mu is taken before g.mu, never after
			if h.groups[g.name] == g {
				delete(h.groups, g.name)
			}
			h.mu.Unlock()
		default:
			fn(g)
			g.mu.Unlock()
			return true
		}
	}
}

// settled waits, outside every lock, for a write that a group's request
// must follow (a deletion of its offsets). It returns the code that
// answers the request when it cannot wait any longer, or 0.
func (h *Handler) settled(ctx context.Context, done <-chan struct{}) int16 {
	select {
	case <-done:
		return 0
	case <-ctx.Done():
		return kerr.RequestTimedOut.Code
	case <-h.closing:
		return kerr.CoordinatorNotAvailable.Code
	}
}

// findCoordinator answers each group with the broker that coordinates it.
func (h *Handler) findCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	answer := func(key string) (b Broker, c int16, msg *string) {
		switch {
		case req.CoordinatorType != 0:
			return b, kerr.InvalidRequest.Code, kmsg.StringPtr("offsetd coordinates consumer groups only")
		case !validName(key):
			return b, kerr.InvalidGroupID.Code, nil
		}
		b, c = h.coordinatorOf(key)
		return b, c, nil
	}
	if req.Version < 4 {
		var b Broker
		b, resp.ErrorCode, resp.ErrorMessage = answer(req.CoordinatorKey)
		if resp.ErrorCode == 0 {
			resp.NodeID, resp.Host, resp.Port = b.NodeID, b.Host, b.Port
		} else {
			resp.NodeID, resp.Port = -1, -1
		}
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key = key
		var b Broker
		b, rc.ErrorCode, rc.ErrorMessage = answer(key)
		if rc.ErrorCode == 0 {
			rc.NodeID, rc.Host, rc.Port = b.NodeID, b.Host, b.Port
		} else {
			rc.NodeID, rc.Port = -1, -1
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	return resp
}

// listGroups lists the groups with offsets (Empty, unless members are
// joined) and the groups with members.
func (h *Handler) listGroups(req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if !h.c.Ready() {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp
	}
	type listed struct{ protocolType, state, typ string }
	all := map[string]listed{}
	for _, name := range h.c.Groups() {
		all[name] = listed{state: stateEmpty.String(), typ: "classic"}
	}
	h.mu.Lock()
	groups := make([]*group, 0, len(h.groups))
	for _, g := range h.groups {
		groups = append(groups, g)
	}
	h.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		switch {
		case g.state == stateDead:
		case g.cg != nil:
			all[g.name] = listed{protocolType: "consumer", state: g.cg.state(), typ: "consumer"}
		default:
			all[g.name] = listed{protocolType: g.protocolType, state: g.state.String(), typ: "classic"}
		}
		g.mu.Unlock()
	}
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if _, self := h.c.Leader(name); !self {
			continue // in a cluster, each node lists the groups it coordinates
		}
		l := all[name]
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, l.state) }) {
			continue
		}
		if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(s string) bool { return strings.EqualFold(s, l.typ) }) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = name, l.protocolType, l.state, l.typ
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// describeGroups describes each group asked: its members when it has
// some, Empty when it has only offsets, Dead when it has neither.
func (h *Handler) describeGroups(req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = name
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = allGroupOperations
		}
		if rg.ErrorCode = h.describable(name); rg.ErrorCode == 0 && !h.inGroup(name, false, func(g *group) { g.describe(&rg) }) {
			_, ok, err := h.c.Group(name)
			switch {
			case err != nil:
				rg.ErrorCode = code(err)
			case ok:
				rg.State = stateEmpty.String()
			default:
				rg.State = stateDead.String()
				if req.Version >= 6 {
					rg.ErrorCode = kerr.GroupIDNotFound.Code
				}
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// describable returns the code that refuses to describe the group named
// name here, or 0.
func (h *Handler) describable(name string) int16 {
	switch {
	case !validName(name):
		return kerr.InvalidGroupID.Code
	case !h.coordinates(name):
		return kerr.NotCoordinator.Code
	}
	return 0
}

// allGroupOperations is the ACL operations bitfield of a group with no
// ACLs: READ, DELETE and DESCRIBE (bits 3, 6 and 8).
const allGroupOperations = 1<<3 | 1<<6 | 1<<8

// deleteGroups deletes groups that have no members: their membership
// state and all their offsets.
func (h *Handler) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		rg.ErrorCode = h.deleteGroup(ctx, name)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (h *Handler) deleteGroup(ctx context.Context, name string) int16 {
	if !validName(name) {
		return kerr.InvalidGroupID.Code
	}
	if !h.coordinates(name) {
		return kerr.NotCoordinator.Code
	}
	if _, _, err := h.c.Group(name); err != nil {
		return code(err)
	}
	for {
		var c int16
		var wait <-chan struct{}
		var g *group
		hadMembers := false
		h.inGroup(name, true, func(in *group) {
			switch {
			case !in.empty():
				c = kerr.NonEmptyGroup.Code
			case len(in.deleting) > 0:
				wait = in.anyDeletion()
			default:
				g, hadMembers = in, in.joins > 0 || in.cg != nil
				in.startDeletion("")
			}
		})
		if wait != nil {
			if c = h.settled(ctx, wait); c != 0 {
				return c
			}
			continue
		}
		if c != 0 {
			return c
		}
		err := g.awaitCommits(ctx, "deletion", func() bool { return g.commits > 0 })
		if err == nil {
			err = h.c.DeleteGroup(ctx, name)
		}
		g.mu.Lock()
		dead := err == nil || errors.Is(err, coordinator.ErrNotFound)
		if dead {
			g.state = stateDead // its membership state goes with its offsets
		}
		g.endDeletion("")
		g.mu.Unlock()
		if dead {
			h.mu.Lock()
			if h.groups[name] == g {
				delete(h.groups, name)
			}
			h.mu.Unlock()
		}
		if errors.Is(err, coordinator.ErrNotFound) {
			if hadMembers {
				return 0
			}
			return kerr.GroupIDNotFound.Code
		}
		return code(err)
	}
}
