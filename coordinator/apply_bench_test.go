package coordinator

import (
	"fmt"
	"testing"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/internal/signal"
	"github.com/offsetd/offsetd/partitioner"
)

// BenchmarkApplyCommits measures what a durable commit of one offset costs
// its partition after the fsync: decoding the record and putting it into
// the table, with no disk and no goroutines. The key space is bench/'s
// large one (10,000 groups × 8 topics × 16 partitions over 16 internal
// partitions), committed in bench/'s order, which visits every group
// before it returns to one: "insert" is the first pass, where every key is
// new, "overwrite" a later one.
func BenchmarkApplyCommits(b *testing.B) {
	const groups, topics, parts, internal = 10000, 8, 16, 16
	const keys = groups * topics * parts
	pt, err := partitioner.New(internal)
	if err != nil {
		b.Fatal(err)
	}
	// The records of one pass, made up front: commit n names group n mod
	// groups, then the topic, then the partition.
	records := make([][]byte, keys)
	owners := make([]int, keys)
	for n := range records {
		group := fmt.Sprintf("g-%06d", n%groups)
		offs := []OffsetCommit{{Topic: fmt.Sprintf("orders-%d", n/groups%topics), Partition: int32(n / (groups * topics)), Offset: int64(n), LeaderEpoch: 1, Metadata: "consumer-07-host"}}
		owners[n], records[n] = pt.Group(group), encodeCommit(nil, group, NoGeneration, 1, offs)
	}
	newTables := func() []*partition {
		ps := make([]*partition, internal)
		for i := range ps {
			ps[i] = newPartition(i, testOptions(), signal.New())
		}
		return ps
	}
	apply := func(b *testing.B, ps []*partition, n int) {
		p := ps[owners[n%keys]]
		p.offsets.Update(func(w cache.OffsetsWriter) {
			if err := p.apply(w, uint64(n+1), recCommit, records[n%keys]); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.Run("pass=insert", func(b *testing.B) {
		var ps []*partition
		n := keys
		b.ReportAllocs()
		for b.Loop() {
			if n == keys {
				b.StopTimer()
				ps, n = newTables(), 0
				b.StartTimer()
			}
			apply(b, ps, n)
			n++
		}
	})
	b.Run("pass=overwrite", func(b *testing.B) {
		ps := newTables()
		for n := range keys {
			apply(b, ps, n)
		}
		n := keys
		b.ReportAllocs()
		for b.Loop() {
			apply(b, ps, n)
			n++
		}
	})
}
