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

// lookup returns the group named name, locked, or nil when it has no
// membership state.
func (h *Handler) lookup(name string) *group {
	for {
		h.mu.Lock()
		g := h.groups[name]
		h.mu.Unlock()
		if g == nil {
			return nil
		}
		if g = h.lock(g); g != nil {
			return g
		}
	}
}

// lookupOrCreate returns the group named name, locked, creating it Empty.
func (h *Handler) lookupOrCreate(name string) *group {
	for {
		h.mu.Lock()
		g := h.groups[name]
		if g == nil {
			g = newGroup(h, name)
			h.groups[name] = g
		}
		h.mu.Unlock()
		if g = h.lock(g); g != nil {
			return g
		}
	}
}

// lock locks g and returns it, or nil when it was deleted meanwhile or
// another coordinator ran it since (outlived): the caller looks again.
func (h *Handler) lock(g *group) *group {
	g.mu.Lock()
	if g.state == stateDead {
		g.mu.Unlock()
		return nil
	}
	if !g.outlived() {
		return g
	}
	g.drop()
	g.mu.Unlock()
	h.mu.Lock() // h.mu is taken before g.mu, never after
	if h.groups[g.name] == g {
		delete(h.groups, g.name)
	}
	h.mu.Unlock()
	return nil
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
	type listed struct{ protocolType, state string }
	all := map[string]listed{}
	for _, name := range h.c.Groups() {
		all[name] = listed{state: stateEmpty.String()}
	}
	h.mu.Lock()
	groups := make([]*group, 0, len(h.groups))
	for _, g := range h.groups {
		groups = append(groups, g)
	}
	h.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		if g.state != stateDead {
			all[g.name] = listed{protocolType: g.protocolType, state: g.state.String()}
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
		if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(s string) bool { return strings.EqualFold(s, "classic") }) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = name, l.protocolType, l.state, "classic"
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
		switch {
		case !validName(name):
			rg.ErrorCode = kerr.InvalidGroupID.Code
		case !h.coordinates(name):
			rg.ErrorCode = kerr.NotCoordinator.Code
		default:
			if g := h.lookup(name); g != nil {
				g.describe(&rg)
				g.mu.Unlock()
				break
			}
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
	hadMembers := false
	h.mu.Lock()
	if g := h.groups[name]; g != nil {
		g.mu.Lock()
		if g.state != stateEmpty && g.state != stateDead {
			g.mu.Unlock()
			h.mu.Unlock()
			return kerr.NonEmptyGroup.Code
		}
		g.state = stateDead
		g.mu.Unlock()
		delete(h.groups, name)
		hadMembers = true
	}
	h.mu.Unlock()
	err := h.c.DeleteGroup(ctx, name)
	if errors.Is(err, coordinator.ErrNotFound) {
		if hadMembers {
			return 0
		}
		return kerr.GroupIDNotFound.Code
	}
	return code(err)
}
