package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupDescription is the live membership of a group, for operators.
type GroupDescription struct {
	// State is Kafka's name of the group's state: Empty,
	// PreparingRebalance, CompletingRebalance or Stable for a classic
	// group; Empty, Assigning, Reconciling or Stable for a group on the
	// consumer protocol.
	State        string
	ProtocolType string
	// Protocol is the protocol (assignor) the members agreed on; for a
	// group on the consumer protocol, the server-side assignor.
	Protocol string
	// Generation is a classic group's generation, or a consumer group's
	// epoch.
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

// Describe returns the membership of the group named name; ok is false when the group
// has none (only offsets, or nothing).
func (h *Handler) Describe(name string) (d GroupDescription, ok bool) {
	ok = h.inGroup(name, false, func(g *group) {
		if g.cg != nil {
			d = GroupDescription{State: g.cg.state(), ProtocolType: "consumer", Protocol: g.cg.assignor, Generation: g.cg.epoch}
			for _, m := range g.cg.members {
				md := MemberDescription{MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost}
				if m.instanceID != nil {
					md.InstanceID = *m.instanceID
				}
				d.Members = append(d.Members, md)
			}
			return
		}
		d = GroupDescription{State: g.state.String(), ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation, Leader: g.leader}
		for _, m := range g.members {
			md := MemberDescription{MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost}
			if m.instanceID != nil {
				md.InstanceID = *m.instanceID
			}
			d.Members = append(d.Members, md)
		}
	})
	return d, ok
}

// describe fills a DescribeGroups answer from the group's membership. A
// consumer group is described by ConsumerGroupDescribe: DescribeGroups
// answers GROUP_ID_NOT_FOUND for it, as Kafka does.
func (g *group) describe(rg *kmsg.DescribeGroupsResponseGroup) {
	if g.cg != nil {
		rg.ErrorCode = kerr.GroupIDNotFound.Code
		rg.ErrorMessage = kmsg.StringPtr("the group is a consumer group")
		return
	}
	rg.State = g.state.String()
	rg.ProtocolType = g.protocolType
	if g.state == stateStable {
		rg.Protocol = g.protocol
	}
	for _, m := range g.members {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		if g.state == stateStable {
			rm.ProtocolMetadata = m.metadata(g.protocol)
			rm.MemberAssignment = m.assignment
		}
		rg.Members = append(rg.Members, rm)
	}
}

// subscribed returns whether the members of a consumer group subscribe
// to a topic, read from their join metadata. When a member's metadata
// cannot be read every topic counts as subscribed: better to refuse a
// delete than to delete offsets in use.
func (g *group) subscribed() func(topic string) bool {
	topics := map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadata(g.protocol)); err != nil {
			return func(string) bool { return true }
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return func(topic string) bool { return topics[topic] }
}
