package kafka

// GroupDescription is the live membership of a classic group, for
// operators.
type GroupDescription struct {
	// State is Kafka's name of the group's state: Empty,
	// PreparingRebalance, CompletingRebalance or Stable.
	State        string
	ProtocolType string
	// Protocol is the protocol (assignor) the members agreed on.
	Protocol   string
	Generation int32
	Leader     string
	Members    []MemberDescription
}

// MemberDescription is one member of a group.
type MemberDescription struct {
	MemberID string
	// InstanceID is a static member's group.instance.id, or "".
	InstanceID string
	ClientID   string
	ClientHost string
}

// Describe returns the membership of group; ok is false when the group
// has none (only offsets, or nothing).
func (h *Handler) Describe(group string) (d GroupDescription, ok bool) {
	g := h.lookup(group)
	if g == nil {
		return GroupDescription{}, false
	}
	defer g.mu.Unlock()
	d = GroupDescription{State: g.state.String(), ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation, Leader: g.leader}
	for _, m := range g.members {
		md := MemberDescription{MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost}
		if m.instanceID != nil {
			md.InstanceID = *m.instanceID
		}
		d.Members = append(d.Members, md)
	}
	return d, true
}
