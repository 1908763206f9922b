package statictopic

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// validMapping returns a small valid mapping: queue 0 moved from b1 to b2,
// queue 1 still on its first item.
func validMapping() Mapping {
	return Mapping{
		Version:     MappingVersion,
		Topic:       "T",
		Scope:       "clusterA",
		TotalQueues: 2,
		Epoch:       1000,
		Bname:       "__logic__clusterA",
		Queues: map[int32][]MappingItem{
			0: {
				{Gen: 0, QueueID: 0, Broker: "b1", LogicOffset: 0, StartOffset: 0, EndOffset: 100, TimeOfStart: 1, TimeOfEnd: 2},
				{Gen: 1, QueueID: 0, Broker: "b2", LogicOffset: 10000, StartOffset: 0, EndOffset: -1, TimeOfStart: 2, TimeOfEnd: -1},
			},
			1: {
				{Gen: 0, QueueID: 1, Broker: "b2", LogicOffset: 0, StartOffset: 0, EndOffset: -1, TimeOfStart: 1, TimeOfEnd: -1},
			},
		},
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m *Mapping)
	}{
		{"as built", func(*Mapping) {}},
		{"newest undecided while open", func(m *Mapping) { m.Queues[0][1].LogicOffset = -1 }},
		{"one offset between logic ranges", func(m *Mapping) { m.Queues[0][1].LogicOffset = 101 }},
		{"empty sealed item", func(m *Mapping) { m.Queues[0][0].EndOffset = 0 }},
		{"sealed last item", func(m *Mapping) { m.Queues[1][0].EndOffset = 7 }},
		{"start offset above zero", func(m *Mapping) { m.Queues[0][0].StartOffset = 50 }},
		{"multi-cluster scope", func(m *Mapping) { m.Scope, m.Bname = "c1,c2", "__logic__c1_c2" }},
		{"global scope", func(m *Mapping) { m.Scope, m.Bname = "global", "__logic__global" }},
		{"epoch zero", func(m *Mapping) { m.Epoch = 0 }},
		{"older item open, as RocketMQ keeps an old leader", func(m *Mapping) { m.Queues[0][0].EndOffset = -1 }},
		{"open old leader, undecided new leader", func(m *Mapping) {
			m.Queues[0][0].EndOffset, m.Queues[0][1].LogicOffset = -1, -1
		}},
		{"reserved queue ids", func(m *Mapping) { m.Reserved = []ReservedQueueIDs{{"b1", 3}, {"b9", 1}} }},
		{"topic of 255 bytes", func(m *Mapping) { m.Topic = strings.Repeat("t", MaxTopicLen) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validMapping()
			tt.mutate(&m)
			if err := m.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m *Mapping)
	}{
		{"version", func(m *Mapping) { m.Version = "2" }},
		{"empty topic", func(m *Mapping) { m.Topic = "" }},
		{"long topic", func(m *Mapping) { m.Topic = strings.Repeat("t", MaxTopicLen+1) }},
		{"bad scope", func(m *Mapping) { m.Scope = "a_b" }},
		{"scope not canonical", func(m *Mapping) { m.Scope, m.Bname = "c2,c1", "__logic__c1_c2" }},
		{"bname not the scope's", func(m *Mapping) { m.Bname = "__logic__clusterB" }},
		{"negative epoch", func(m *Mapping) { m.Epoch = -1 }},
		{"no queues", func(m *Mapping) { m.TotalQueues = 0 }},
		{"too many queues", func(m *Mapping) { m.TotalQueues = MaxTotalQueues + 1 }},
		{"queue id outside", func(m *Mapping) { m.Queues[5] = m.Queues[1] }},
		{"queue id missing", func(m *Mapping) { m.TotalQueues = 3 }},
		{"empty item list", func(m *Mapping) { m.Queues[1] = nil }},
		{"negative gen", func(m *Mapping) { m.Queues[1][0].Gen = -1 }},
		{"negative physical queue id", func(m *Mapping) { m.Queues[1][0].QueueID = -1 }},
		{"empty broker", func(m *Mapping) { m.Queues[1][0].Broker = "" }},
		{"logic broker as physical broker", func(m *Mapping) { m.Queues[1][0].Broker = "__logic__clusterA" }},
		{"negative start offset", func(m *Mapping) { m.Queues[1][0].StartOffset = -1 }},
		{"end below start", func(m *Mapping) { m.Queues[0][0].StartOffset, m.Queues[0][0].EndOffset = 10, 5 }},
		{"end below -1", func(m *Mapping) { m.Queues[1][0].EndOffset = -2 }},
		{"logic offset below -1", func(m *Mapping) { m.Queues[1][0].LogicOffset = -2 }},
		{"older item undecided", func(m *Mapping) { m.Queues[0][0].LogicOffset = -1 }},
		{"sealed item undecided", func(m *Mapping) { m.Queues[1][0].LogicOffset, m.Queues[1][0].EndOffset = -1, 10 }},
		{"logic range overflows", func(m *Mapping) { m.Queues[0][0].LogicOffset = math.MaxInt64 - 10 }},
		{"gen does not increase", func(m *Mapping) { m.Queues[0][1].Gen = 0 }},
		{"logic offset does not increase", func(m *Mapping) { m.Queues[0][1].LogicOffset = 0 }},
		{"logic ranges touch", func(m *Mapping) { m.Queues[0][1].LogicOffset = 100 }},
		{"logic ranges overlap", func(m *Mapping) { m.Queues[0][1].LogicOffset = 50 }},
		{"physical queue reused across logic queues", func(m *Mapping) { m.Queues[1][0].QueueID = 0 }},
		{"physical queue reused within a logic queue", func(m *Mapping) { m.Queues[0][1].Broker = "b1" }},
		{"reserved id negative", func(m *Mapping) { m.Reserved = []ReservedQueueIDs{{"b1", -1}} }},
		{"reserved out of order", func(m *Mapping) { m.Reserved = []ReservedQueueIDs{{"b2", 1}, {"b1", 1}} }},
		{"reserved twice", func(m *Mapping) { m.Reserved = []ReservedQueueIDs{{"b1", 1}, {"b1", 2}} }},
		{"reserved id of a logic broker", func(m *Mapping) { m.Reserved = []ReservedQueueIDs{{"__logic__x", 1}} }},
	}
	seen := make(map[string]string)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validMapping()
			tt.mutate(&m)
			err := m.Validate()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			if other, dup := seen[err.Error()]; dup {
				t.Errorf("same message as %q: %v", other, err)
			}
			seen[err.Error()] = tt.name
		})
	}
}
