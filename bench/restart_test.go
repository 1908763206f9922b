package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/offsetd/offsetd/coordinator"
)

// restartWrites is how many times the restart benchmark writes every key
// before it restarts: the log holds that much history.
const restartWrites = 6

// restartProfile names a file to write a CPU profile of the restarts to:
// the restarts, not the loading before them.
// Samples of the restart carry the label phase=restart (pprof -tagfocus).
var restartProfile = flag.String("restart.cpuprofile", "", "write a CPU profile of BenchmarkRestart's restarts to `file`")

// BenchmarkRestart measures a restart: the time from opening a store that
// holds the whole key space, each key written restartWrites times, to its
// first correct Fetch. offsetd runs with its default options, so it restarts
// as a user's would: today by replaying every log entry, and from a snapshot
// and the log's tail once snapshots exist and are on by default.
//
// Besides ns/op (open to first fetch), it reports the Go heap held after the
// open, per live key and in all (for Pebble, plus the block cache and
// memtables it allocates outside the Go heap), the disk the store takes, and
// for offsetd how many log entries it replayed.
//
// The store's files are in the page cache, as after a process restart;
// offsetd's replay is CPU-bound, so a cold cache changes little for it.
func BenchmarkRestart(b *testing.B) {
	for _, sys := range systems {
		if sys.load == nil || !sys.reads || sys.skipRestart {
			continue
		}
		b.Run(fmt.Sprintf("sys=%s/writes=%d", sys.name, restartWrites), func(b *testing.B) {
			benchRestart(b, sys, workload, restartWrites)
		})
	}
	if os.Getenv("BENCH_FULL") == "1" {
		// A store ten times larger than the key space of the rest, written
		// once: restart time and heap follow the live keys.
		ks := newKeySpace("10M", restartLargeKeys/(topicsPerGroup*partitionsPerTopic))
		b.Run("sys=offsetd/keys=10M/writes=1", func(b *testing.B) {
			benchRestart(b, offsetdSystem, ks, 1)
		})
	}
}

// restartLargeKeys is the live keys of the full run's large restart.
const restartLargeKeys = 10_000_000

func benchRestart(b *testing.B, sys system, ks *keySpace, writes int) {
	dir := loadedDirOf(b, sys, ks, writes)
	keys := ks.keys()
	step := stride % keys
	var heap uint64
	replayed := 0
	if *restartProfile != "" {
		f, err := os.Create(*restartProfile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		probe := (i + 1) * step % keys
		group, topic, partition := ks.key(probe)
		before := liveHeap()

		b.StartTimer()
		var (
			s   committer
			o   coordinator.Offset
			ok  bool
			err error
		)
		// The label marks the restart's own goroutines (they inherit it) in
		// the profile, apart from the collections liveHeap forces.
		pprof.Do(context.Background(), pprof.Labels("phase", "restart"), func(context.Context) {
			if s, err = sys.open(dir, 1); err != nil {
				return
			}
			o, ok, err = s.(reader).Fetch(group, topic, partition)
			if errors.Is(err, coordinator.ErrLoading) {
				// Options that load in the background answer "loading" until
				// the partition is ready: wait, then fetch again.
				if w, canWait := s.(interface{ WaitReady(context.Context) error }); canWait {
					if err = w.WaitReady(context.Background()); err == nil {
						o, ok, err = s.(reader).Fetch(group, topic, partition)
					}
				}
			}
		})
		b.StopTimer()
		if s == nil {
			b.Fatal(err)
		}

		if err != nil || !ok {
			b.Fatalf("first fetch after open: ok %v, err %v", ok, err)
		}
		if err := checkOffset(o, probe, writes-1); err != nil {
			b.Fatal(err)
		}
		after := liveHeap()
		if oh, ok := s.(offHeap); ok {
			after += oh.offHeapBytes()
		}
		if after > before {
			heap += after - before
		}
		if r, ok := s.(interface{ replayed() int }); ok {
			replayed += r.replayed()
		}
		runtime.KeepAlive(s)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	disk, err := diskUsage(dir)
	if err != nil {
		b.Fatal(err)
	}
	perRestart := float64(heap) / float64(b.N)
	b.ReportMetric(perRestart/float64(keys), "heap-B/key")
	b.ReportMetric(perRestart/(1<<20), "heap-MiB")
	b.ReportMetric(float64(disk)/float64(keys), "disk-B/key")
	b.ReportMetric(float64(disk)/(1<<20), "disk-MiB")
	if replayed > 0 {
		b.ReportMetric(float64(replayed)/float64(b.N), "replayed/op")
	}
}
