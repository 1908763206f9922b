package coordinator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCommit measures durable commits (fsync before every ack) with 1
// and 64 concurrent committers, each committing 1 or 16 partitions of its
// own group: 64 groups spread over the 16 internal partitions, each of
// which batches and fsyncs on its own. Run it with -benchtime=3s or more:
// group commit needs a steady stream to batch.
func BenchmarkCommit(b *testing.B) {
	for _, writers := range []int{1, 64, 256} {
		for _, parts := range []int{1, 16} {
			b.Run(fmt.Sprintf("writers=%d/partitions=%d", writers, parts), func(b *testing.B) {
				benchCommit(b, writers, parts, false)
			})
		}
	}
}

// BenchmarkCommitOneGroup is BenchmarkCommit with the 64 committers as the
// members of one consumer group, each committing its own partitions: every
// commit goes to the same internal partition and one fsync covers all of
// them that wait.
func BenchmarkCommitOneGroup(b *testing.B) {
	for _, parts := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=64/partitions=%d", parts), func(b *testing.B) {
			benchCommit(b, 64, parts, true)
		})
	}
}

func benchCommit(b *testing.B, writers, parts int, oneGroup bool) {
	opts := testOptions()
	counter := &batchCounter{}
	opts.Observer = counter
	c := mustOpen(b, b.TempDir(), opts)
	defer c.Close()
	ctx := context.Background()
	var next atomic.Int64
	cpu := cpuTime()
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := fmt.Sprintf("g-%06d", w)
			if oneGroup {
				group = "g-000000"
			}
			offs := make([]OffsetCommit, parts)
			for i := range offs {
				offs[i] = OffsetCommit{Topic: "orders-1", Partition: int32(w*parts + i), LeaderEpoch: 5, Metadata: "consumer-1-host-a"}
			}
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				for i := range offs {
					offs[i].Offset = n
				}
				if err := c.Commit(ctx, group, offs); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
	if n := counter.batches.Load(); n > 0 {
		b.ReportMetric(float64(counter.records.Load())/float64(n), "commits/fsync")
		b.ReportMetric(float64(counter.took.Load())/float64(n)/1e3, "fsync-µs")
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e3, "cpu-µs/op")
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// warmStore opens a store holding groups × 128 keys (8 topics × 16
// partitions per group), written without fsync to keep set-up short.
func warmStore(b *testing.B, groups int) *Coordinator {
	opts := testOptions()
	opts.UnsafeNoSync = true
	c := mustOpen(b, b.TempDir(), opts)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offs := make([]OffsetCommit, 128)
			for g := w; g < groups; g += 16 {
				for i := range offs {
					offs[i] = OffsetCommit{Topic: fmt.Sprintf("orders-%d", i/16), Partition: int32(i % 16), Offset: int64(g + i), LeaderEpoch: 1, Metadata: "consumer-1-host-a"}
				}
				if err := c.Commit(ctx, fmt.Sprintf("g-%06d", g), offs); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return c
}

// BenchmarkFetch measures a point read on a warm store of 1.28M keys from
// every CPU at once.
func BenchmarkFetch(b *testing.B) {
	const groups = 10000
	c := warmStore(b, groups)
	defer c.Close()
	names := make([]string, groups)
	for i := range names {
		names[i] = fmt.Sprintf("g-%06d", i)
	}
	topics := []string{"orders-0", "orders-1", "orders-2", "orders-3", "orders-4", "orders-5", "orders-6", "orders-7"}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if _, ok, err := c.Fetch(names[i%groups], topics[i%8], int32(i%16)); !ok || err != nil {
				b.Error("miss", err)
				return
			}
		}
	})
}

// BenchmarkFetchGroup measures reading all 128 offsets of a group.
func BenchmarkFetchGroup(b *testing.B) {
	const groups = 1000
	c := warmStore(b, groups)
	defer c.Close()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		got, err := c.FetchGroup(fmt.Sprintf("g-%06d", i%groups))
		if err != nil || len(got) != 128 {
			b.Fatal(len(got), err)
		}
	}
}

// BenchmarkReplay measures Open of a store whose logs hold 2M offset
// records (125k commits of 16 offsets, about 6 writes per key), reporting
// replayed records per second.
func BenchmarkReplay(b *testing.B) {
	const (
		commits   = 125000
		perCommit = 16
		groups    = 20000
	)
	dir := b.TempDir()
	opts := testOptions()
	opts.UnsafeNoSync = true
	c := mustOpen(b, dir, opts)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offs := make([]OffsetCommit, perCommit)
			for n := w; n < commits; n += 16 {
				for i := range offs {
					offs[i] = OffsetCommit{Topic: "orders-1", Partition: int32(i), Offset: int64(n), LeaderEpoch: 1, Metadata: "consumer-1-host-a"}
				}
				if err := c.Commit(ctx, fmt.Sprintf("g-%06d", n%groups), offs); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	c.Close()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		c := mustOpen(b, dir, opts)
		c.Close()
	}
	b.ReportMetric(float64(commits*perCommit*b.N)/time.Since(start).Seconds(), "records/s")
}
