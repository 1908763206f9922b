package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/statictopic"
)

// gateClock is a clock that, once armed, holds the goroutine that builds
// the next request inside its build (every build reads the clock) until released, so
// a test can end the caller's context while its request is being built.
type gateClock struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newGateClock() *gateClock {
	return &gateClock{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gateClock) now() time.Time {
	if g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.release
	}
	return time.Now()
}

// TestCancelWhileBuilding ends a caller's context while the writer builds
// its request, then has the caller reuse its inputs, as a caller that gave
// up may. The writer must neither write memory the caller reads (go test
// -race reports that) nor read the caller's reused inputs: what it writes is
// what was asked.
func TestCancelWhileBuilding(t *testing.T) {
	cases := []struct {
		name string
		// call makes the request with ctx, then returns a func that
		// reuses the request's inputs as a caller may after giving up.
		call func(ctx context.Context, c *Coordinator) (func(), error)
		// check verifies that what was written is what was asked.
		check func(t *testing.T, c *Coordinator)
	}{
		{
			name: "remap",
			call: func(ctx context.Context, c *Coordinator) (func(), error) {
				moves := []statictopic.QueueMove{{QueueID: 0, ToBroker: "b3", OldLeaderMaxOffset: 10}}
				m, err := c.RemapStaticTopic(ctx, "orders", "clusterA", moves)
				return func() { moves[0].ToBroker = "b9"; m.Epoch++ }, err
			},
			check: func(t *testing.T, c *Coordinator) {
				items := mustMapping(t, c, "orders", "clusterA").Queues[0]
				if len(items) != 2 || items[1].Broker != "b3" {
					t.Fatalf("queue 0 items = %+v, want a move to b3", items)
				}
			},
		},
		{
			name: "create",
			call: func(ctx context.Context, c *Coordinator) (func(), error) {
				brokers := []string{"c1", "c2"}
				m, err := c.CreateStaticTopic(ctx, "fresh", "clusterA", 2, brokers)
				return func() { brokers[0], brokers[1] = "x1", "x2"; m.TotalQueues++ }, err
			},
			check: func(t *testing.T, c *Coordinator) {
				m := mustMapping(t, c, "fresh", "clusterA")
				if m.Queues[0][0].Broker != "c1" || m.Queues[1][0].Broker != "c2" {
					t.Fatalf("queues = %+v, want them on c1 and c2", m.Queues)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gate := newGateClock()
			opts := testOptions()
			opts.Partitions = 2
			opts.Now = gate.now
			opts.Retention = KeepForever // the sweeper would read the clock too
			c := mustOpen(t, t.TempDir(), opts)
			defer c.Close()
			bg := context.Background()
			if _, err := c.CreateStaticTopic(bg, "orders", "clusterA", 2, []string{"b1", "b2"}); err != nil {
				t.Fatal(err)
			}

			ctx, cancel := context.WithCancel(bg)
			gate.armed.Store(true)
			type answer struct {
				err   error
				reuse func()
			}
			answered := make(chan answer, 1)
			go func() {
				reuse, err := tc.call(ctx, c)
				answered <- answer{err, reuse}
			}()
			<-gate.entered // the writer is building the request
			cancel()
			a := <-answered
			if !errors.Is(a.err, context.Canceled) {
				t.Fatalf("call returned %v, want context.Canceled", a.err)
			}
			a.reuse()
			close(gate.release)
			// A snapshot is queued behind the request, so once it is done
			// the request has been written and applied.
			if err := c.Snapshot(bg); err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// TestCancelWhileQueued cancels remaps and commits while they wait in the
// writer's queue or are being built, and reuses their inputs at once, as
// callers that give up do; go test -race must find no shared memory.
func TestCancelWhileQueued(t *testing.T) {
	opts := testOptions()
	opts.Partitions = 1
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	bg := context.Background()
	if _, err := c.CreateStaticTopic(bg, "orders", "clusterA", 8, []string{"b0"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				ctx, cancel := context.WithCancel(bg)
				go cancel() // ends the call at some point of its way
				moves := []statictopic.QueueMove{{QueueID: int32(w), ToBroker: fmt.Sprintf("b%d", i+1), OldLeaderMaxOffset: int64(i)}}
				m, err := c.RemapStaticTopic(ctx, "orders", "clusterA", moves)
				moves[0].ToBroker, m.Epoch = "", 0
				offsets := []OffsetCommit{{Topic: "t", Partition: int32(w), Offset: int64(i)}}
				_, err2 := c.CommitGeneration(ctx, "g", NoGeneration, offsets)
				offsets[0].Topic = ""
				for _, err := range []error{err, err2} {
					if err != nil && !errors.Is(err, context.Canceled) {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestCommitsGivenUpAndReused: committers that give up at random points
// (before their batch is written, while it syncs, while it is applied)
// and overwrite their offsets at once, as callers do, must leave every key
// at a value its own committer sent, no older than its last acknowledged
// commit: commit requests are reused once answered, so one that went back
// too early would carry another commit's record.
func TestCommitsGivenUpAndReused(t *testing.T) {
	opts := testOptions()
	opts.Partitions = 2
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	bg := context.Background()
	const committers, rounds = 16, 60
	acked := make([]int64, committers)
	var wg sync.WaitGroup
	for w := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := fmt.Sprintf("g%d", w%4)
			offsets := make([]OffsetCommit, 2)
			for i := range rounds {
				ctx, cancel := context.WithCancel(bg)
				if i%3 != 0 {
					go cancel() // ends the call at some point of its way
				}
				for p := range offsets {
					offsets[p] = OffsetCommit{Topic: "t", Partition: int32(w*2 + p), Offset: int64(i), Metadata: fmt.Sprintf("w%d-%d", w, i)}
				}
				err := c.Commit(ctx, group, offsets)
				cancel()
				clear(offsets) // the caller's slice is its own again
				switch {
				case err == nil:
					acked[w] = int64(i)
					// Acknowledged means applied: read it back at once.
					for p := range 2 {
						if o, ok, _ := c.Fetch(group, "t", int32(w*2+p)); !ok || o.Offset != int64(i) {
							t.Errorf("committer %d: commit %d acknowledged, partition %d reads %+v %v", w, i, p, o, ok)
						}
					}
				case !errors.Is(err, context.Canceled):
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := c.Snapshot(bg); err != nil { // every batch written is applied
		t.Fatal(err)
	}
	for w := range committers {
		for p := range 2 {
			o, ok, err := c.Fetch(fmt.Sprintf("g%d", w%4), "t", int32(w*2+p))
			if err != nil || !ok {
				t.Fatalf("committer %d partition %d: %v %v", w, p, ok, err)
			}
			if o.Offset < acked[w] || o.Offset >= rounds || o.Metadata != fmt.Sprintf("w%d-%d", w, o.Offset) {
				t.Errorf("committer %d partition %d holds offset %d metadata %q; its last acknowledged offset is %d", w, p, o.Offset, o.Metadata, acked[w])
			}
		}
	}
}
