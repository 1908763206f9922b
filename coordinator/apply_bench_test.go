package coordinator

import (
	"fmt"
	"testing"

	"github.com/offsetd/offsetd/cache"
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
	groupNames := make([]string, groups)
	for i := range groupNames {
		groupNames[i] = fmt.Sprintf("g-%06d", i)
	}
	topicNames := make([]string, topics)
	for i := range topicNames {
		topicNames[i] = fmt.Sprintf("orders-%d", i)
	}
	const keys = groups * topics * parts
	pt, err := partitioner.New(internal)
	if err != nil {
		b.Fatal(err)
	}
	offs := make([]OffsetCommit, 1)
	// Commit n of the stream: group, then topic, then partition vary.
	record := func(dst []byte, n int) (int, []byte) {
		g, t, p := n%groups, n/groups%topics, n/(groups*topics)%parts
		offs[0] = OffsetCommit{Topic: topicNames[t], Partition: int32(p), Offset: int64(n), LeaderEpoch: 1, Metadata: "consumer-07-host"}
		return pt.Group(groupNames[g]), encodeCommit(dst, groupNames[g], NoGeneration, 1, offs)
	}
	newTables := func() []*partition {
		ps := make([]*partition, internal)
		for i := range ps {
			ps[i] = newPartition(i, testOptions(), newSignal(), nil)
		}
		return ps
	}
	apply := func(b *testing.B, ps []*partition, n int, buf []byte) []byte {
		i, rec := record(buf[:0], n)
		p := ps[i]
		p.offsets.Update(func(w cache.OffsetsWriter) {
			if err := p.apply(w, uint64(n+1), recCommit, rec); err != nil {
				b.Fatal(err)
			}
		})
		return rec
	}
	b.Run("pass=insert", func(b *testing.B) {
		var ps []*partition
		var buf []byte
		n := keys
		b.ReportAllocs()
		for b.Loop() {
			if n == keys {
				b.StopTimer()
				ps, n = newTables(), 0
				b.StartTimer()
			}
			buf = apply(b, ps, n, buf)
			n++
		}
	})
	b.Run("pass=overwrite", func(b *testing.B) {
		ps := newTables()
		var buf []byte
		for n := range keys {
			buf = apply(b, ps, n, buf)
		}
		n := keys
		b.ReportAllocs()
		for b.Loop() {
			buf = apply(b, ps, n, buf)
			n++
		}
	})
}
