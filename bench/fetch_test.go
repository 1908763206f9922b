package bench

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/offsetd/offsetd/coordinator"
)

// fetchReaders are the reader counts every system is measured with: 64 is
// the many clients a server answers at once.
var fetchReaders = []int{1, 8, 64}

// BenchmarkFetch measures a point read of one offset from a warm store
// holding the whole key space, by readers goroutines at once, visiting keys
// in a scattered order. Each read is checked. ns/op is wall time per read.
func BenchmarkFetch(b *testing.B) {
	warm := &warmStores{}
	b.Cleanup(warm.close)
	keys := workload.keys()
	for _, sys := range systems {
		if !sys.reads {
			continue
		}
		for _, readers := range fetchReaders {
			b.Run(fmt.Sprintf("sys=%s/readers=%d", sys.name, readers), func(b *testing.B) {
				r := warm.get(b, sys)
				benchRead(b, readers, keys, func(i int) error {
					group, topic, partition := workload.key(i)
					o, ok, err := r.Fetch(group, topic, partition)
					if err != nil {
						return err
					}
					if !ok {
						return fmt.Errorf("key %d: %w", i, errMissing)
					}
					if o.Offset != offset(i, 0) {
						return checkOffset(o, i, 0)
					}
					return nil
				})
			})
		}
	}
}

// BenchmarkFetchGroup measures reading every offset of one group (8 topics
// × 16 partitions), sorted, from a warm store holding the whole key space.
func BenchmarkFetchGroup(b *testing.B) {
	warm := &warmStores{}
	b.Cleanup(warm.close)
	groups := len(workload.groups)
	const perGroup = topicsPerGroup * partitionsPerTopic
	for _, sys := range systems {
		if !sys.reads {
			continue
		}
		for _, readers := range fetchReaders {
			b.Run(fmt.Sprintf("sys=%s/readers=%d", sys.name, readers), func(b *testing.B) {
				r := warm.get(b, sys)
				benchRead(b, readers, groups, func(g int) error {
					got, err := r.FetchGroup(workload.groups[g])
					if err != nil {
						return err
					}
					if len(got) != perGroup {
						return fmt.Errorf("group %d: %d offsets, want %d", g, len(got), perGroup)
					}
					if last := got[perGroup-1]; last.Offset.Offset != offset((g+1)*perGroup-1, 0) {
						return checkOffset(last.Offset, (g+1)*perGroup-1, 0)
					}
					return nil
				})
			})
		}
	}
}

var errMissing = errors.New("bench: offset missing")

// benchRead runs b.N calls of read, split between readers goroutines, over
// indexes 0..count-1 in a scattered order.
func benchRead(b *testing.B, readers, count int, read func(i int) error) {
	step := stride % count
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for r := range readers {
		n := b.N / readers
		if r < b.N%readers {
			n++
		}
		wg.Go(func() {
			i := r * count / readers
			for range n {
				if err := read(i); err != nil {
					b.Error(err)
					return
				}
				if i += step; i >= count {
					i -= count
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fetches/s")
}

// warmStores keeps the last store a read benchmark opened, so that the
// sub-benchmarks of one system (and the repeats of each, which run one
// after the other) share it. Only one is open at a time: a second store's
// heap would slow the garbage collector for the one being measured.
type warmStores struct {
	name  string
	store committer
}

// get returns sys's store holding round 0 of the whole key space.
func (w *warmStores) get(b *testing.B, sys system) reader {
	b.Helper()
	if w.store != nil && w.name == sys.name {
		return w.store.(reader)
	}
	w.close()
	var s committer
	var err error
	if sys.load != nil {
		s, err = sys.open(loadedDir(b, sys, 1), 1)
	} else {
		s, err = sys.open(b.TempDir(), 1)
		if err == nil {
			err = loadParallel(workload, 1, 4, func(group string, offsets []coordinator.OffsetCommit) error {
				return s.Commit(b.Context(), group, offsets)
			})
		}
	}
	if err != nil {
		b.Fatalf("opening a warm %s: %v", sys.name, err)
	}
	w.name, w.store = sys.name, s
	return s.(reader)
}

func (w *warmStores) close() {
	if w.store != nil {
		w.store.Close()
		w.store = nil
	}
}
