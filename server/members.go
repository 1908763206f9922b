package server

import (
	"net/http"
	"slices"
	"strings"
)

// Membership reports the live members of consumer groups, as offsetd's
// Kafka listener holds them in memory. The server declares it so that it
// does not depend on the Kafka side.
type Membership interface {
	// GroupMembers returns group's membership; ok is false when it has
	// none.
	GroupMembers(group string) (m GroupMembers, ok bool)
}

// GroupMembers is the body of GET /v1/groups/{group}/members.
type GroupMembers struct {
	Group string `json:"group"`
	// State is Kafka's name of the group state; "" when the group has no
	// members.
	State        string        `json:"state"`
	ProtocolType string        `json:"protocolType"`
	Protocol     string        `json:"protocol"`
	Generation   int32         `json:"generation"`
	Leader       string        `json:"leader"`
	Members      []GroupMember `json:"members"`
}

// GroupMember is one member of a group.
type GroupMember struct {
	MemberID   string `json:"memberId"`
	InstanceID string `json:"instanceId,omitempty"`
	ClientID   string `json:"clientId"`
	ClientHost string `json:"clientHost"`
}

// getGroupMembers is GET /v1/groups/{group}/members.
func (s *Server) getGroupMembers(w http.ResponseWriter, r *http.Request) {
	if _, e := parseQuery(r); e != nil {
		writeError(w, e)
		return
	}
	group := r.PathValue("group")
	if _, _, err := s.c.Group(group); err != nil { // checks the name and readiness
		s.fail(w, r, err)
		return
	}
	out := GroupMembers{Group: group, Generation: -1}
	if s.opts.Membership != nil {
		if m, ok := s.opts.Membership.GroupMembers(group); ok {
			out = m
			out.Group = group
		}
	}
	if out.Members == nil {
		out.Members = []GroupMember{}
	}
	slices.SortFunc(out.Members, func(a, b GroupMember) int { return strings.Compare(a.MemberID, b.MemberID) })
	writeJSON(w, http.StatusOK, out)
}
