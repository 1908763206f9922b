package cache

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestOffsetsModel applies random puts, deletes and group deletes, in
// random batches, to a table and to a plain map, and checks after each
// batch that the two hold the same offsets: partitions dense, sparse and
// negative, metadata shared and freed, topics and groups appearing and
// going.
func TestOffsetsModel(t *testing.T) {
	type key struct {
		group, topic string
		partition    int32
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tab := NewOffsets()
	model := map[key]Offset{}
	groups := []string{"a", "b", "c", "d"}
	topics := []string{"t0", "t1", "t2"}
	mds := []string{"", "m1", "m2", "consumer-7", "x"}
	partition := func() int32 {
		switch rng.IntN(10) {
		case 0:
			return rng.Int32N(1 << 20) // far beyond the live count
		case 1:
			return -rng.Int32N(5) - 1
		default:
			return rng.Int32N(40)
		}
	}
	for step := range 3000 {
		tab.Update(func(w OffsetsWriter) {
			for range 1 + rng.IntN(8) {
				g, tp := groups[rng.IntN(len(groups))], topics[rng.IntN(len(topics))]
				k := key{g, tp, partition()}
				switch op := rng.IntN(20); {
				case op < 14:
					v := Offset{Offset: rng.Int64(), LeaderEpoch: rng.Int32N(3) - 1, Metadata: mds[rng.IntN(len(mds))], CommitTime: rng.Int64N(1000)}
					switch rng.IntN(4) {
					case 0:
						// As a snapshot loads: room first, then the offset.
						tw := w.Topic(g, tp, uint64(step))
						tw.Reserve(max(0, int(k.partition)+1), 1+rng.IntN(4))
						tw.Put(k.partition, v)
					case 1:
						// As a commit record applies: the group's name in its bytes.
						tw := w.RecordTopic([]byte(g), tp, uint64(step))
						tw.Put(k.partition, v)
					default:
						w.Put(g, uint64(step), TopicPartition{tp, k.partition}, v)
					}
					model[k] = v
				case op < 19:
					// A partition that exists, most of the time.
					for mk := range model {
						if rng.IntN(3) == 0 {
							k = mk
							break
						}
					}
					w.Delete(k.group, uint64(step), TopicPartition{k.topic, k.partition})
					delete(model, k)
				default:
					w.DeleteGroup(g)
					for mk := range model {
						if mk.group == g {
							delete(model, mk)
						}
					}
				}
			}
		})
		// Each group and topic's entry in the lookup points at its group,
		// as the table holds it now (RecordTopic trusts it).
		for gt, r := range tab.topics {
			if g := tab.groups[gt.group]; r.g == nil || r.g != g || !slices.Contains(g.topics, r.ps) {
				t.Fatalf("step %d: the lookup's entry for %v points at group %p, the table holds %p", step, gt, r.g, g)
			}
		}
		keys, ngroups, _ := tab.Sizes()
		live := map[string]bool{}
		perGroup := map[string][]Entry{}
		used := map[string]bool{}
		for k, v := range model {
			live[k.group] = true
			perGroup[k.group] = append(perGroup[k.group], Entry{TopicPartition{k.topic, k.partition}, v})
			used[v.Metadata] = true
			if got, ok := tab.Get(k.group, k.topic, k.partition); !ok || got != v {
				t.Fatalf("step %d: Get(%v) = %+v %v, want %+v", step, k, got, ok, v)
			}
		}
		if keys != len(model) || ngroups != len(live) {
			t.Fatalf("step %d: %d keys in %d groups, want %d in %d", step, keys, ngroups, len(model), len(live))
		}
		for g, want := range perGroup {
			slices.SortFunc(want, func(a, b Entry) int {
				if a.Topic != b.Topic {
					return strings.Compare(a.Topic, b.Topic)
				}
				return int(a.Partition) - int(b.Partition)
			})
			got, info, ok := tab.Group(g, nil)
			if !ok || !slices.Equal(got, want) || info.Offsets != len(want) {
				t.Fatalf("step %d: Group(%s) = %v (%+v), want %v", step, g, got, info, want)
			}
		}
		delete(used, "")
		if n := tab.md.len(); n != len(used) {
			t.Fatalf("step %d: the table holds %d metadata strings, the live offsets %d", step, n, len(used))
		}
	}
}
