package bench

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/offsetd/offsetd/coordinator"
)

// committer is what the commit benchmark needs of a system.
type committer interface {
	// Commit stores the offsets of one group as one write and returns once
	// they are on stable storage (for a durable system).
	Commit(ctx context.Context, group string, offsets []coordinator.OffsetCommit) error
	Close() error
}

// reader is what the read and restart benchmarks need of a system.
type reader interface {
	Fetch(group, topic string, partition int32) (coordinator.Offset, bool, error)
	// FetchGroup returns a new slice of every offset of group, sorted by
	// topic then partition.
	FetchGroup(group string) ([]coordinator.PartitionOffset, error)
}

// system is one store under test.
type system struct {
	name string
	// durable is false for the memory floor, which keeps nothing.
	durable bool
	// reads says whether open's committer is also a reader.
	reads bool
	// network is true for a server in another process reached over
	// loopback (the Kafka floor): its commits' latency is measured though
	// it is not durable.
	network bool
	// skipRestart leaves a reader out of BenchmarkRestart: its restart is
	// another system's (offsetd-http's is offsetd's plus a listener).
	skipRestart bool
	// open opens a store in dir. For a durable system, a Commit that
	// returned nil is on stable storage. writers says how many goroutines
	// will commit at once (readers may be more).
	open func(dir string, writers int) (committer, error)
	// load fills dir with rounds of the whole key space as fast as the
	// system allows (no sync per commit: only the result counts), then
	// closes it, so that open finds it. Nil for a system with nothing to
	// reopen.
	load func(dir string, ks *keySpace, rounds int) error
}

// systems lists every system, in the order the report shows them.
var systems = []system{
	offsetdSystem,
	offsetdHTTPSystem,
	offsetdKafkaSystem,
	kafkaFloorSystem,
	pebbleSystem,
	boltSystem,
	floorGroupSystem,
	floorPreallocSystem,
	floorSyncSystem,
	memorySystem,
}

// offHeap is implemented by a system that keeps part of its memory outside
// the Go heap (Pebble's block cache and memtables, with cgo).
type offHeap interface {
	offHeapBytes() uint64
}

// loadParallel sends rounds of the key space to commit, one commit per topic
// of a group (all its partitions), from workers goroutines. A group always
// goes to the same worker, which sends its rounds in order, so every key
// ends with the last round's value.
func loadParallel(ks *keySpace, rounds, workers int, commit func(group string, offsets []coordinator.OffsetCommit) error) error {
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			dst := make([]coordinator.OffsetCommit, partitionsPerTopic)
			for r := range rounds {
				for g := w; g < len(ks.groups); g += workers {
					for t := range topicsPerGroup {
						if err := commit(ks.fill(dst, g, t, r), dst); err != nil {
							errs[w] = fmt.Errorf("round %d group %d topic %d: %w", r, g, t, err)
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// loaded remembers the data directories already loaded in this process, so
// that repeated runs of a benchmark (-count, and the testing package's own
// calibration runs) load each once.
var loaded struct {
	mu   sync.Mutex
	dirs map[string]string // guarded by mu; "name/keyspace/rounds" → directory
}

// loadedDir returns a directory holding rounds of the run's key space,
// written by sys and closed.
func loadedDir(tb testing.TB, sys system, rounds int) string {
	tb.Helper()
	return loadedDirOf(tb, sys, workload, rounds)
}

// loadedDirOf returns a directory holding rounds of key space ks, written
// by sys and closed. It logs how long writing it took.
func loadedDirOf(tb testing.TB, sys system, ks *keySpace, rounds int) string {
	tb.Helper()
	loaded.mu.Lock()
	defer loaded.mu.Unlock()
	id := fmt.Sprintf("%s/%s/%d", sys.name, ks.name, rounds)
	if dir, ok := loaded.dirs[id]; ok {
		return dir
	}
	dir := filepath.Join(dataRoot, fmt.Sprintf("%s-%s-%d", sys.name, ks.name, rounds))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	if err := sys.load(dir, ks, rounds); err != nil {
		tb.Fatalf("loading %s: %v", sys.name, err)
	}
	tb.Logf("%s: wrote %d keys × %d rounds in %v", sys.name, ks.keys(), rounds, time.Since(start).Round(time.Millisecond))
	if loaded.dirs == nil {
		loaded.dirs = make(map[string]string)
	}
	loaded.dirs[id] = dir
	return dir
}

// diskUsage returns the bytes of disk the files under dir take.
func diskUsage(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += allocatedBytes(fi)
		return nil
	})
	return n, err
}

// liveHeap returns the bytes of Go heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
