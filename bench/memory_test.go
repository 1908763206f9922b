package bench

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/offsetd/offsetd/coordinator"
)

// memorySystem is the memory floor: a Go map per group under one
// read-write mutex. It keeps nothing, so it bounds what any store can do
// from memory.
var memorySystem = system{
	name:  "memory",
	reads: true,
	open: func(string, int) (committer, error) {
		return &memoryStore{groups: make(map[string]map[topicPartition]coordinator.Offset)}, nil
	},
}

type topicPartition struct {
	topic     string
	partition int32
}

type memoryStore struct {
	mu     sync.RWMutex
	groups map[string]map[topicPartition]coordinator.Offset // guarded by mu
}

func (m *memoryStore) Commit(_ context.Context, group string, offsets []coordinator.OffsetCommit) error {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[group]
	if g == nil {
		g = make(map[topicPartition]coordinator.Offset)
		m.groups[group] = g
	}
	for _, o := range offsets {
		g[topicPartition{o.Topic, o.Partition}] = coordinator.Offset{
			Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTime: now,
		}
	}
	return nil
}

func (m *memoryStore) Fetch(group, topic string, partition int32) (coordinator.Offset, bool, error) {
	m.mu.RLock()
	o, ok := m.groups[group][topicPartition{topic, partition}]
	m.mu.RUnlock()
	return o, ok, nil
}

func (m *memoryStore) FetchGroup(group string) ([]coordinator.PartitionOffset, error) {
	m.mu.RLock()
	g := m.groups[group]
	out := make([]coordinator.PartitionOffset, 0, len(g))
	for k, o := range g {
		out = append(out, coordinator.PartitionOffset{Topic: k.topic, Partition: k.partition, Offset: o})
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b coordinator.PartitionOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, nil
}

func (m *memoryStore) Close() error { return nil }
