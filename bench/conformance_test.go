package bench

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/offsetd/offsetd/coordinator"
)

// TestSystemsKeepWhatTheyAcknowledge checks every system against the
// workload before it is measured: concurrent commits read back (point and
// whole-group, sorted), survive a reopen, and load leaves what open finds;
// the floors' files hold one whole record per commit.
func TestSystemsKeepWhatTheyAcknowledge(t *testing.T) {
	ks := newKeySpace("test", 5)
	const parts = 4
	for _, sys := range systems {
		t.Run(sys.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := sys.open(dir, 8)
			if err != nil {
				t.Fatal(err)
			}
			// Two rounds of the commit stream, the second overwriting the
			// first; within a round every commit names other keys, so
			// their order does not matter.
			slots := ks.slots(parts)
			for round := range 2 {
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Go(func() {
						dst := make([]coordinator.OffsetCommit, parts)
						for n := round*slots + w; n < (round+1)*slots; n += 8 {
							if err := s.Commit(context.Background(), ks.commit(dst, n), dst); err != nil {
								t.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			}
			if r, ok := s.(reader); ok {
				checkAll(t, r, ks, 1)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if !sys.durable {
				return
			}
			if !sys.reads {
				n, err := countRecords(filepath.Join(dir, "floor.log"))
				if err != nil || n != 2*slots {
					t.Fatalf("floor file holds %d whole records (err %v), want %d", n, err, 2*slots)
				}
				return
			}
			reopened, err := sys.open(dir, 1)
			if err != nil {
				t.Fatal(err)
			}
			checkAll(t, reopened.(reader), ks, 1)
			if err := reopened.Close(); err != nil {
				t.Fatal(err)
			}

			if sys.load == nil {
				return
			}
			dir = t.TempDir()
			if err := sys.load(dir, ks, 3); err != nil {
				t.Fatal(err)
			}
			loaded, err := sys.open(dir, 1)
			if err != nil {
				t.Fatal(err)
			}
			checkAll(t, loaded.(reader), ks, 2)
			if err := loaded.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkAll checks that r holds round's value of every key of ks.
func checkAll(t *testing.T, r reader, ks *keySpace, round int) {
	t.Helper()
	for i := range ks.keys() {
		group, topic, partition := ks.key(i)
		o, ok, err := r.Fetch(group, topic, partition)
		if err != nil || !ok {
			t.Fatalf("Fetch key %d: ok %v, err %v", i, ok, err)
		}
		if err := checkOffset(o, i, round); err != nil {
			t.Fatal(err)
		}
	}
	const perGroup = topicsPerGroup * partitionsPerTopic
	for g, group := range ks.groups {
		got, err := r.FetchGroup(group)
		if err != nil || len(got) != perGroup {
			t.Fatalf("FetchGroup %s: %d offsets, err %v; want %d", group, len(got), err, perGroup)
		}
		for j, po := range got {
			i := g*perGroup + j
			_, topic, partition := ks.key(i)
			if po.Topic != topic || po.Partition != partition {
				t.Fatalf("FetchGroup %s entry %d is %s/%d, want %s/%d (sorted)", group, j, po.Topic, po.Partition, topic, partition)
			}
			if err := checkOffset(po.Offset, i, round); err != nil {
				t.Fatal(err)
			}
		}
	}
}
