package bench

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/offsetd/offsetd/coordinator"
)

// The workload every system runs: an offset commit names a group g-NNNNNN,
// a topic orders-N and partitions of it, each with a value of offset, leader
// epoch and 16 bytes of metadata (the store adds the commit time).
const (
	// topicsPerGroup and partitionsPerTopic shape every key space; only the
	// group count changes between the small and the large one.
	topicsPerGroup     = 8
	partitionsPerTopic = 16
	smallGroups        = 1000
	largeGroups        = 10000
	// metadata is what a consumer keeps beside its offset, typically the
	// member that committed it.
	metadata = "consumer-07-host"
)

// keySpace is the set of keys a run commits and reads. A key's index i
// orders keys by group, then topic, then partition:
// i = (group × topicsPerGroup + topic) × partitionsPerTopic + partition.
type keySpace struct {
	name   string
	groups []string
	topics []string
}

// newKeySpace returns a key space of n groups, its names made up front so
// that benchmarks build no strings while they measure.
func newKeySpace(name string, n int) *keySpace {
	ks := &keySpace{name: name, groups: make([]string, n), topics: make([]string, topicsPerGroup)}
	for i := range ks.groups {
		ks.groups[i] = fmt.Sprintf("g-%06d", i)
	}
	for i := range ks.topics {
		ks.topics[i] = fmt.Sprintf("orders-%d", i)
	}
	return ks
}

// workloadKeySpace returns the key space the environment asks for:
// BENCH_GROUPS=N groups if set, else the large one if BENCH_FULL=1, else the
// small one.
func workloadKeySpace() (*keySpace, error) {
	if s := os.Getenv("BENCH_GROUPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 999999 {
			return nil, fmt.Errorf("BENCH_GROUPS=%q: want a group count from 1 to 999999", s)
		}
		return newKeySpace("custom", n), nil
	}
	if os.Getenv("BENCH_FULL") == "1" {
		return newKeySpace("large", largeGroups), nil
	}
	return newKeySpace("small", smallGroups), nil
}

// keys returns the number of keys.
func (ks *keySpace) keys() int { return len(ks.groups) * topicsPerGroup * partitionsPerTopic }

// key returns the names of key i.
func (ks *keySpace) key(i int) (group, topic string, partition int32) {
	return ks.groups[i/(topicsPerGroup*partitionsPerTopic)],
		ks.topics[i/partitionsPerTopic%topicsPerGroup],
		int32(i % partitionsPerTopic)
}

// offset is the offset committed for key i in round r. Both are in it, so a
// read that returns another key's value or an older round's is caught.
func offset(i, round int) int64 { return int64(round)<<32 | int64(i) }

// leaderEpoch is the leader epoch committed in round r.
func leaderEpoch(round int) int32 { return int32(round + 1) }

// slots returns how many distinct commits of parts partitions the key
// space holds: a commit covers parts consecutive partitions of one topic.
func (ks *keySpace) slots(parts int) int {
	return len(ks.groups) * topicsPerGroup * (partitionsPerTopic / parts)
}

// commit fills dst (of length parts, a divisor of partitionsPerTopic) with
// the n-th commit of the stream a commit benchmark sends, and returns its
// group. The stream visits every group before it returns to one (so
// consecutive commits spread over the key space, as they do when many
// consumers commit), then every topic, then every block of partitions; after
// the last slot it starts again one round later.
func (ks *keySpace) commit(dst []coordinator.OffsetCommit, n int) string {
	parts := len(dst)
	slot, round := n%ks.slots(parts), n/ks.slots(parts)
	g := slot % len(ks.groups)
	t := slot / len(ks.groups) % topicsPerGroup
	first := slot / len(ks.groups) / topicsPerGroup * parts
	base := (g*topicsPerGroup + t) * partitionsPerTopic
	for j := range dst {
		p := first + j
		dst[j] = coordinator.OffsetCommit{
			Topic:       ks.topics[t],
			Partition:   int32(p),
			Offset:      offset(base+p, round),
			LeaderEpoch: leaderEpoch(round),
			Metadata:    metadata,
		}
	}
	return ks.groups[g]
}

// fill fills dst (of length partitionsPerTopic) with round r of topic t of
// group g: the commits that load a store.
func (ks *keySpace) fill(dst []coordinator.OffsetCommit, g, t, round int) string {
	base := (g*topicsPerGroup + t) * partitionsPerTopic
	for p := range dst {
		dst[p] = coordinator.OffsetCommit{
			Topic:       ks.topics[t],
			Partition:   int32(p),
			Offset:      offset(base+p, round),
			LeaderEpoch: leaderEpoch(round),
			Metadata:    metadata,
		}
	}
	return ks.groups[g]
}

// keyBytes is the bytes of names in an average key: group plus topic.
func (ks *keySpace) keyBytes() int { return len(ks.groups[0]) + len(ks.topics[0]) }

// stride steps through key or group indexes in a scattered order that still
// visits every one: a prime is coprime with any count it does not divide,
// and no count here is a multiple of it.
const stride = 1_000_003

// checkOffset reports whether o is what round r wrote for key i.
func checkOffset(o coordinator.Offset, i, round int) error {
	if o.Offset != offset(i, round) || o.LeaderEpoch != leaderEpoch(round) || o.Metadata != metadata {
		return fmt.Errorf("key %d: got offset %#x epoch %d metadata %q, want %#x %d %q",
			i, o.Offset, o.LeaderEpoch, o.Metadata, offset(i, round), leaderEpoch(round), metadata)
	}
	return nil
}

func TestKeySpaceCommitStream(t *testing.T) {
	ks := newKeySpace("test", 3)
	for _, parts := range []int{1, 2, 16} {
		seen := make(map[int]int) // key → times committed
		dst := make([]coordinator.OffsetCommit, parts)
		for n := range 2 * ks.slots(parts) {
			group := ks.commit(dst, n)
			for _, o := range dst {
				i := int(o.Offset & 0xffffffff)
				g, topic, p := ks.key(i)
				if g != group || topic != o.Topic || p != o.Partition {
					t.Fatalf("parts=%d n=%d: offset names key %d (%s %s %d), commit has %s %s %d",
						parts, n, i, g, topic, p, group, o.Topic, o.Partition)
				}
				if round := int(o.Offset >> 32); round != n/ks.slots(parts) {
					t.Fatalf("parts=%d n=%d: round %d", parts, n, round)
				}
				seen[i]++
			}
		}
		if len(seen) != ks.keys() {
			t.Fatalf("parts=%d: stream covers %d keys, want %d", parts, len(seen), ks.keys())
		}
		for i, c := range seen {
			if c != 2 {
				t.Fatalf("parts=%d: key %d committed %d times in two rounds", parts, i, c)
			}
		}
	}
}

func TestKeySpaceFromEnvironment(t *testing.T) {
	tests := []struct {
		full, groups string
		want         int
		wantErr      bool
	}{
		{"", "", smallGroups, false},
		{"1", "", largeGroups, false},
		{"1", "20", 20, false},
		{"", "0", 0, true},
		{"", "many", 0, true},
	}
	for _, tt := range tests {
		t.Setenv("BENCH_FULL", tt.full)
		t.Setenv("BENCH_GROUPS", tt.groups)
		ks, err := workloadKeySpace()
		if tt.wantErr {
			if err == nil {
				t.Errorf("BENCH_FULL=%q BENCH_GROUPS=%q: no error", tt.full, tt.groups)
			}
			continue
		}
		if err != nil || len(ks.groups) != tt.want {
			t.Errorf("BENCH_FULL=%q BENCH_GROUPS=%q: %v groups, err %v; want %d", tt.full, tt.groups, len(ks.groups), err, tt.want)
		}
	}
	if got := newKeySpace("large", largeGroups).keys(); got != 1_280_000 {
		t.Errorf("large key space has %d keys, want 1,280,000", got)
	}
}
