package statictopic

import (
	"cmp"
	"fmt"
	"slices"
)

// RocketMQGlobalScope is how RocketMQ spells the global scope in a
// TopicQueueMappingDetail; Export writes it and Import reads it (as it reads
// "global" and an absent scope).
const RocketMQGlobalScope = "__global__"

// Detail is one broker's share of a static topic in the shape of RocketMQ's
// TopicQueueMappingDetail, as each RocketMQ broker stores it and its admin
// tools read and write it: the topic's name, scope, epoch and queue count,
// Bname the (physical) broker holding the detail, HostedQueues the item
// lists of every logic queue that has an item on that broker, and CurrIDMap
// the logic queues the broker leads, with their physical queue ids.
//
// Version and Reserved are offsetd's: RocketMQ's JSON has no
// version (Import takes an absent one as MappingVersion) and keeps no trimmed
// queue ids (RocketMQ's broker never reuses a queue id of its own).
type Detail struct {
	Version      string                  `json:"version,omitempty"`
	Topic        string                  `json:"topic"`
	Scope        string                  `json:"scope,omitempty"`
	TotalQueues  int32                   `json:"totalQueues"`
	Bname        string                  `json:"bname"`
	Epoch        int64                   `json:"epoch"`
	Dirty        bool                    `json:"dirty"`
	CurrIDMap    map[int32]int32         `json:"currIdMap"`
	HostedQueues map[int32][]MappingItem `json:"hostedQueues"`
	Reserved     []ReservedQueueIDs      `json:"reserved,omitempty"`
}

// Export returns m as RocketMQ's brokers would hold it: one Detail per
// broker that any item uses, sorted by broker name. Import of the result
// gives m back.
func Export(m Mapping) []Detail {
	scope := m.Scope
	if scope == GlobalScope {
		scope = RocketMQGlobalScope
	}
	byBroker := make(map[string]*Detail)
	for q := int32(0); q < m.TotalQueues; q++ {
		items := m.Queues[q]
		for _, it := range items {
			d := byBroker[it.Broker]
			if d == nil {
				d = &Detail{
					Version: m.Version, Topic: m.Topic, Scope: scope, TotalQueues: m.TotalQueues,
					Bname: it.Broker, Epoch: m.Epoch,
					CurrIDMap: map[int32]int32{}, HostedQueues: map[int32][]MappingItem{},
					Reserved: slices.Clone(m.Reserved),
				}
				byBroker[it.Broker] = d
			}
			d.HostedQueues[q] = slices.Clone(items)
		}
		if len(items) > 0 {
			leader := items[len(items)-1]
			byBroker[leader.Broker].CurrIDMap[q] = leader.QueueID
		}
	}
	out := make([]Detail, 0, len(byBroker))
	for _, d := range byBroker {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b Detail) int { return cmp.Compare(a.Bname, b.Bname) })
	return out
}

// Import builds a mapping from the Details of every broker of one static
// topic, as RocketMQ's admin tools gather them: each logic queue's items are
// taken from the detail of the broker that leads it (its newest item's
// broker), like RocketMQ's checkAndBuildMappingItems; the lists other
// brokers hold of it are ignored.
//
// The details must agree on topic, scope, epoch and queue count, none may be
// dirty, each logic queue must be led in exactly one detail, and a CurrIDMap
// entry must name the queue's leader. Items are taken as RocketMQ stores
// them: an old leader whose end is not known yet (EndOffset -1) is kept
// open, and a new leader may have LogicOffset -1. The result is validated.
// Every failure is ErrInvalid.
func Import(details []Detail) (Mapping, error) {
	if len(details) == 0 {
		return Mapping{}, fmt.Errorf("%w: import of no details", ErrInvalid)
	}
	first := details[0]
	scope, err := importScope(first.Scope)
	if err != nil {
		return Mapping{}, fmt.Errorf("topic %q: %w", first.Topic, err)
	}
	m := Mapping{
		Version:     MappingVersion,
		Topic:       first.Topic,
		Scope:       scope.String(),
		TotalQueues: first.TotalQueues,
		Epoch:       first.Epoch,
		Bname:       scope.BrokerName(),
		Queues:      make(map[int32][]MappingItem),
	}
	ledBy := make(map[int32]string)
	for _, d := range details {
		errf := func(format string, args ...any) error {
			return fmt.Errorf("%w: topic %q: detail of broker %q: "+format, append([]any{ErrInvalid, m.Topic, d.Bname}, args...)...)
		}
		if d.Version != "" && d.Version != MappingVersion {
			return Mapping{}, errf("version %q, want %q", d.Version, MappingVersion)
		}
		sc, err := importScope(d.Scope)
		if err != nil {
			return Mapping{}, fmt.Errorf("topic %q: detail of broker %q: %w", m.Topic, d.Bname, err)
		}
		switch {
		case d.Topic != m.Topic:
			return Mapping{}, errf("topic %q differs", d.Topic)
		case sc.String() != m.Scope:
			return Mapping{}, errf("scope %q differs from %q", d.Scope, first.Scope)
		case d.Epoch != m.Epoch:
			return Mapping{}, errf("epoch %d differs from %d", d.Epoch, m.Epoch)
		case d.TotalQueues != m.TotalQueues:
			return Mapping{}, errf("totalQueues %d differs from %d", d.TotalQueues, m.TotalQueues)
		case d.Dirty:
			return Mapping{}, errf("marked dirty")
		}
		if err := checkBrokerName(d.Bname); err != nil {
			return Mapping{}, fmt.Errorf("topic %q: detail bname: %w", m.Topic, err)
		}
		for q, items := range d.HostedQueues {
			if len(items) == 0 || items[len(items)-1].Broker != d.Bname {
				continue // not the leader's list
			}
			if other, dup := ledBy[q]; dup {
				return Mapping{}, errf("logic queue %d also led in the detail of broker %q", q, other)
			}
			ledBy[q] = d.Bname
			m.Queues[q] = slices.Clone(items)
		}
		for q, id := range d.CurrIDMap {
			items, ok := d.HostedQueues[q]
			if !ok || items[len(items)-1].Broker != d.Bname || items[len(items)-1].QueueID != id {
				return Mapping{}, errf("currIdMap says it leads logic queue %d on physical queue %d; its items do not", q, id)
			}
		}
		for _, r := range d.Reserved {
			m.reserve(r.Broker, r.Below)
		}
	}
	if err := m.Validate(); err != nil {
		return Mapping{}, err
	}
	return m, nil
}

// importScope reads a scope as RocketMQ or offsetd spells it.
func importScope(s string) (Scope, error) {
	if s == "" || s == RocketMQGlobalScope || s == GlobalScope {
		return Global(), nil
	}
	return ParseScope(s)
}
