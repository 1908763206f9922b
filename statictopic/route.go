package statictopic

import (
	"cmp"
	"fmt"
	"slices"
)

// Role is what a client does with a topic; it decides which queues a route
// shows.
type Role int

const (
	// Producer writes: it sees only its own scope's queues.
	Producer Role = iota + 1
	// Consumer reads: it also sees the queues of scopes in global read.
	Consumer
)

// String returns "producer" or "consumer", or "Role(n)" for any other value.
func (r Role) String() string {
	switch r {
	case Producer:
		return "producer"
	case Consumer:
		return "consumer"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ParseRole parses "producer" or "consumer" (exactly, lower case).
func ParseRole(s string) (Role, error) {
	switch s {
	case "producer":
		return Producer, nil
	case "consumer":
		return Consumer, nil
	}
	return 0, fmt.Errorf("%w: role %q, want producer or consumer", ErrInvalid, s)
}

// MarshalText encodes r as its String, so a Role reads well in JSON.
func (r Role) MarshalText() ([]byte, error) {
	if r != Producer && r != Consumer {
		return nil, fmt.Errorf("%w: role %d", ErrInvalid, int(r))
	}
	return []byte(r.String()), nil
}

// UnmarshalText decodes a Role with ParseRole.
func (r *Role) UnmarshalText(text []byte) error {
	v, err := ParseRole(string(text))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Route is the set of logic queues one client may use for a topic.
type Route struct {
	Topic string `json:"topic"`
	// Epoch is the highest epoch of the mappings the route was built from;
	// routes of equal inputs and equal Epoch are equal.
	Epoch  int64        `json:"epoch"`
	Queues []RouteQueue `json:"queues"`
}

// RouteQueue is one logic queue of a route: the client addresses it as
// (BrokerName, QueueID), and its leader lives on Broker's physical queue
// PhysicalQueueID.
type RouteQueue struct {
	BrokerName      string `json:"brokerName"`
	QueueID         int32  `json:"queueId"`
	Broker          string `json:"broker"`
	PhysicalQueueID int32  `json:"physicalQueueId"`
}

// BuildRoute returns the route of topic for a client in scope client acting as
// role. mappings are the stored mappings of topic, in any scopes; globalRead
// reports whether a scope (its canonical spelling) is in global read, and may
// be nil for none.
//
// A client sees its own mapping: the one whose scope contains the client's
// scope (Scope.Contains), which is the global mapping if there is one. A
// Consumer also sees every other mapping whose scope is in global read, to
// drain what a failed site left; a Producer never does. Queues are sorted by
// (BrokerName, QueueID). Nothing visible is ErrNotFound; more than one own
// mapping (overlapping scopes, see CheckScopeConflict) is ErrScopeConflict; a
// mapping of another topic, a repeated scope, an unknown role or the zero
// client scope is ErrInvalid.
func BuildRoute(topic string, client Scope, role Role, mappings []Mapping, globalRead func(scope string) bool) (Route, error) {
	if client.IsZero() {
		return Route{}, fmt.Errorf("%w: topic %q: zero client scope", ErrInvalid, topic)
	}
	if role != Producer && role != Consumer {
		return Route{}, fmt.Errorf("%w: topic %q: role %d", ErrInvalid, topic, int(role))
	}
	var own, drained []Mapping
	seen := make(map[Scope]bool, len(mappings))
	for _, m := range mappings {
		if m.Topic != topic {
			return Route{}, fmt.Errorf("%w: route of topic %q given a mapping of topic %q", ErrInvalid, topic, m.Topic)
		}
		s, err := ParseScope(m.Scope)
		if err != nil {
			return Route{}, fmt.Errorf("topic %q: %w", topic, err)
		}
		if m.Bname != s.BrokerName() {
			return Route{}, fmt.Errorf("%w: topic %q scope %q: bname %q, want %q", ErrInvalid, topic, s, m.Bname, s.BrokerName())
		}
		if seen[s] {
			return Route{}, fmt.Errorf("%w: topic %q: two mappings in scope %q", ErrInvalid, topic, s)
		}
		seen[s] = true
		switch {
		case s.Contains(client):
			own = append(own, m)
		case role == Consumer && globalRead != nil && globalRead(s.String()):
			drained = append(drained, m)
		}
	}
	if len(own) > 1 {
		return Route{}, fmt.Errorf("%w: topic %q: client scope %q lies in both %q and %q", ErrScopeConflict, topic, client, own[0].Scope, own[1].Scope)
	}
	visible := append(own, drained...)
	if len(visible) == 0 {
		return Route{}, fmt.Errorf("%w: topic %q: no mapping visible to %s in scope %q", ErrNotFound, topic, role, client)
	}
	r := Route{Topic: topic, Epoch: visible[0].Epoch}
	for _, m := range visible {
		r.Epoch = max(r.Epoch, m.Epoch)
		for q := int32(0); q < m.TotalQueues; q++ {
			leader, err := m.Leader(q)
			if err != nil {
				return Route{}, err
			}
			r.Queues = append(r.Queues, RouteQueue{
				BrokerName:      m.Bname,
				QueueID:         q,
				Broker:          leader.Broker,
				PhysicalQueueID: leader.QueueID,
			})
		}
	}
	slices.SortFunc(r.Queues, func(a, b RouteQueue) int {
		return cmp.Or(cmp.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.QueueID, b.QueueID))
	})
	return r, nil
}
