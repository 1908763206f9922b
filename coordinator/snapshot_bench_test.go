package coordinator

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"
)

// fillPartition writes keys offsets into a one-partition store as commits
// of 128 offsets (8 topics × 16 partitions per group), without fsync to
// keep the set-up short, and rounds overwrites of each.
func fillPartition(b *testing.B, dir string, keys, rounds int, opts Options) {
	b.Helper()
	opts.UnsafeNoSync = true
	c := mustOpen(b, dir, opts)
	defer c.Close()
	groups := keys / 128
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offs := make([]OffsetCommit, 128)
			for r := range rounds {
				for g := w; g < groups; g += 8 {
					for i := range offs {
						offs[i] = OffsetCommit{Topic: fmt.Sprintf("orders-%d", i/16), Partition: int32(i % 16), Offset: int64(r*1000 + g), LeaderEpoch: 1, Metadata: "consumer-1-host-a"}
					}
					if err := c.Commit(context.Background(), fmt.Sprintf("g-%06d", g), offs); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkCommitDuringSnapshot measures the latency of durable commits to
// a partition holding 1M keys, without and while snapshots of it are being
// written back to back, and reports percentiles.
func BenchmarkCommitDuringSnapshot(b *testing.B) {
	const keys = 1 << 20
	dir := b.TempDir()
	opts := testOptions()
	opts.Partitions = 1
	opts.SnapshotBytes = -1 // only the snapshots this benchmark asks for
	fillPartition(b, dir, keys, 1, opts)
	for _, during := range []bool{false, true} {
		b.Run(fmt.Sprintf("snapshotting=%v", during), func(b *testing.B) {
			c := mustOpen(b, dir, opts)
			defer c.Close()
			ctx := context.Background()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			snapshots := 0
			if during {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := c.Snapshot(ctx); err != nil {
							b.Error(err)
							return
						}
						snapshots++
						// Each snapshot needs something new to capture.
						c.Commit(ctx, "snapshot-marker", []OffsetCommit{{Topic: "t", Offset: int64(snapshots)}})
					}
				}()
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				if err := c.Commit(ctx, "latency", []OffsetCommit{{Topic: "t", Offset: int64(i)}}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			reportPercentiles(b, lat)
			if during {
				b.ReportMetric(float64(snapshots), "snapshots")
			}
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(0.999), "p999-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkRestartHistory measures Open of a one-partition store with 64k
// live keys after 1×, 10× and 50× as many writes, with snapshots (the
// default) and without: with them, restart time follows the live state,
// not the history.
func BenchmarkRestartHistory(b *testing.B) {
	const keys = 64 << 10
	for _, snapshots := range []bool{true, false} {
		for _, history := range []int{1, 10, 50} {
			b.Run(fmt.Sprintf("snapshots=%v/history=%dx", snapshots, history), func(b *testing.B) {
				dir := b.TempDir()
				opts := testOptions()
				opts.Partitions = 1
				if !snapshots {
					opts.SnapshotBytes = -1 // only the snapshots this benchmark asks for
				}
				fillPartition(b, dir, keys, history, opts)
				b.ResetTimer()
				var replayed int
				for range b.N {
					c := mustOpen(b, dir, opts)
					replayed = c.parts[0].loadRecords
					c.Close()
				}
				b.StopTimer()
				b.ReportMetric(float64(replayed), "log-records")
				b.ReportMetric(float64(dirSize(b, dir))/(1<<20), "disk-MiB")
			})
		}
	}
}

// BenchmarkSnapshotWrite writes snapshots of a partition holding 80k keys
// (one sixteenth of bench/'s large key space) back to back and reports what
// one costs per offset: under steady load each partition rewrites its whole
// state about once a SnapshotInterval, so this is the price of that state
// in CPU. Run it with TMPDIR on tmpfs to leave the disk out.
func BenchmarkSnapshotWrite(b *testing.B) {
	const keys = 80 << 10
	dir := b.TempDir()
	opts := testOptions()
	opts.Partitions = 1
	opts.SnapshotBytes = NoSnapshots
	fillPartition(b, dir, keys, 1, opts)
	c := mustOpen(b, dir, opts)
	defer c.Close()
	p := c.parts[0]
	stop := make(chan struct{})
	index := c.d.journal.LastIndex()
	for b.Loop() {
		index++ // a snapshot file per index; the journal is not read
		if _, err := c.d.snapshots[0].Write(index, func(w io.Writer) error { return p.writeSnapshot(w, p.txns.copyAll(), stop) }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/keys, "ns/offset")
}
