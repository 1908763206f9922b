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
	key, value := largeKeys()

	// read times get on scattered keys.
	read := func(b *testing.B, get func(group, topic string, partition int32) (Offset, bool)) {
		b.ReportAllocs()
		b.ResetTimer()
		i := 0
		for b.Loop() {
			i = (i + stride) % largeKeyCount
			g, t, p := key(i)
			if v, ok := get(g, t, p); !ok || v.Offset != int64(i) {
				b.Fatalf("key %d: %v %v", i, v, ok)
			}
		}
	}
	b.Run("table=offsets", func(b *testing.B) {
		tab := NewOffsets()
		tab.Update(func(w OffsetsWriter) {
			for i := range largeKeyCount {
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
		for i := range largeKeyCount {
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
		for i := range largeKeyCount {
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

// The large key space of BenchmarkGetLarge and BenchmarkPutLarge: 10,000
// groups × 8 topics × 16 partitions, as bench/'s.
const (
	largeGroups, largeTopics, largeParts = 10000, 8, 16
	largeKeyCount                        = largeGroups * largeTopics * largeParts
	// A prime stride visits every key in a scattered order.
	stride = 1_000_003
)

// largeKeys returns the names of key i of the large key space, and the
// value a benchmark stores for it.
func largeKeys() (key func(i int) (string, string, int32), value func(i int) Offset) {
	groupNames := make([]string, largeGroups)
	for i := range groupNames {
		groupNames[i] = fmt.Sprintf("g-%06d", i)
	}
	topicNames := make([]string, largeTopics)
	for i := range topicNames {
		topicNames[i] = fmt.Sprintf("orders-%d", i)
	}
	key = func(i int) (string, string, int32) {
		return groupNames[i/(largeTopics*largeParts)], topicNames[i/largeParts%largeTopics], int32(i % largeParts)
	}
	value = func(i int) Offset {
		return Offset{Offset: int64(i), LeaderEpoch: 1, Metadata: "consumer-07-host", CommitTime: 1}
	}
	return key, value
}

// BenchmarkPutLarge overwrites scattered keys of a table of 1.28M offsets
// one Update each, as a replayed or committed record does, from the group's
// name in the record's bytes: RecordTopic, and the two lookups it saves.
func BenchmarkPutLarge(b *testing.B) {
	key, value := largeKeys()
	tab := NewOffsets()
	tab.Update(func(w OffsetsWriter) {
		for i := range largeKeyCount {
			g, t, p := key(i)
			w.Put(g, 1, TopicPartition{t, p}, value(i))
		}
	})
	// The records' bytes, made up front.
	groups := make([][]byte, largeGroups)
	for i := range groups {
		g, _, _ := key(i * largeTopics * largeParts)
		groups[i] = []byte(g)
	}
	for _, bc := range []struct {
		name   string
		writer func(w OffsetsWriter, group []byte, topic string) TopicWriter
	}{
		{"lookup=record-topic", func(w OffsetsWriter, group []byte, topic string) TopicWriter {
			return w.RecordTopic(group, topic, 2)
		}},
		{"lookup=group-then-topic", func(w OffsetsWriter, group []byte, topic string) TopicWriter {
			return w.Topic(w.GroupName(group), topic, 2)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i = (i + stride) % largeKeyCount
				_, t, p := key(i)
				name := groups[i/(largeTopics*largeParts)]
				tab.Update(func(w OffsetsWriter) {
					tw := bc.writer(w, name, t)
					tw.Put(p, value(i))
				})
			}
			g, t, p := key(i)
			if v, ok := tab.Get(g, t, p); !ok || v.Offset != int64(i) {
				b.Fatalf("key %d after the run: %v %v", i, v, ok)
			}
		})
	}
}
