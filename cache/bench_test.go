package cache

import (
	"fmt"
	"testing"
)

// BenchmarkGetLarge reads scattered keys of a table of 1.28M offsets
// (10,000 groups × 8 topics × 16 partitions, as bench/'s large key space)
// beside bare Go maps of the same keys and values: one map of whole keys,
// and a map of groups holding maps of topic and partition.
func BenchmarkGetLarge(b *testing.B) {
	const groups, topics, parts = 10000, 8, 16
	groupNames := make([]string, groups)
	for i := range groupNames {
		groupNames[i] = fmt.Sprintf("g-%06d", i)
	}
	topicNames := make([]string, topics)
	for i := range topicNames {
		topicNames[i] = fmt.Sprintf("orders-%d", i)
	}
	const keys = groups * topics * parts
	key := func(i int) (string, string, int32) {
		return groupNames[i/(topics*parts)], topicNames[i/parts%topics], int32(i % parts)
	}
	value := func(i int) Offset {
		return Offset{Offset: int64(i), LeaderEpoch: 1, Metadata: "consumer-07-host", CommitTime: 1}
	}
	// A prime stride visits every key in a scattered order.
	const stride = 1_000_003

	// read times get on scattered keys.
	read := func(b *testing.B, get func(group, topic string, partition int32) (Offset, bool)) {
		b.ReportAllocs()
		b.ResetTimer()
		i := 0
		for b.Loop() {
			i = (i + stride) % keys
			g, t, p := key(i)
			if v, ok := get(g, t, p); !ok || v.Offset != int64(i) {
				b.Fatalf("key %d: %v %v", i, v, ok)
			}
		}
	}
	b.Run("table=offsets", func(b *testing.B) {
		tab := NewOffsets()
		tab.Update(func(w OffsetsWriter) {
			for i := range keys {
				g, t, p := key(i)
				w.Put(g, 1, TopicPartition{t, p}, value(i))
			}
		})
		read(b, tab.Get)
	})
	b.Run("table=map", func(b *testing.B) {
		type k struct {
			group, topic string
			partition    int32
		}
		m := make(map[k]Offset)
		for i := range keys {
			g, t, p := key(i)
			m[k{g, t, p}] = value(i)
		}
		read(b, func(g, t string, p int32) (Offset, bool) {
			v, ok := m[k{g, t, p}]
			return v, ok
		})
	})
	b.Run("table=map-of-maps", func(b *testing.B) {
		m := make(map[string]map[TopicPartition]Offset)
		for i := range keys {
			g, t, p := key(i)
			if m[g] == nil {
				m[g] = make(map[TopicPartition]Offset)
			}
			m[g][TopicPartition{t, p}] = value(i)
		}
		read(b, func(g, t string, p int32) (Offset, bool) {
			v, ok := m[g][TopicPartition{t, p}]
			return v, ok
		})
	})
}
