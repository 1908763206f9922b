package coordinator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/statictopic"
)

// heldJournal is the partitions' journal with the first Wait after arm
// held until release: its caller has queued a batch and not yet waited for
// it, as a caller that went on to start its next commit.
type heldJournal struct {
	journal
	armed   atomic.Bool
	entered chan struct{} // closed when the Wait is held
	release chan struct{}
}

func (j *heldJournal) Wait(ctx context.Context, done <-chan struct{}) error {
	if j.armed.CompareAndSwap(true, false) {
		close(j.entered)
		<-j.release
	}
	return j.journal.Wait(ctx, done)
}

// holdCommitMany has c's only partition's journal hold the first wait of
// a CommitMany of groups a and b, and returns its results once both
// commits are queued, in one batch nobody appends.
func holdCommitMany(t *testing.T, ctx context.Context, c *Coordinator) (*heldJournal, <-chan []CommitResult) {
	t.Helper()
	j := &heldJournal{entered: make(chan struct{}), release: make(chan struct{})}
	c.wrapJournal(func(inner journal) journal { j.journal = inner; return j })
	j.armed.Store(true)
	results := make(chan []CommitResult, 1)
	go func() {
		results <- c.CommitMany(ctx, []GroupCommit{
			{Group: "a", Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Offset: 10}}},
			{Group: "b", Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Offset: 20}}},
		})
	}()
	<-j.entered
	return j, results
}

// A delete settles its partition (waits for every batch in flight, then
// applies them) while the caller that queued the batch has not waited for
// it yet, and would not before it gets the partition's lock for its next
// commit: the delete appends the batch itself, and returns while that
// caller is still held.
func TestSettleAppendsABatchNobodyWaitsFor(t *testing.T) {
	opts := testOptions()
	opts.Partitions = 1
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	bg := context.Background()
	if err := c.Commit(bg, "old", []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Second) // a deadlock ends with it
	defer cancel()
	j, results := holdCommitMany(t, ctx, c)
	if err := c.DeleteGroup(ctx, "old"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for _, g := range []string{"a", "b"} {
		if _, ok, _ := c.Fetch(g, "t", 0); !ok {
			t.Errorf("group %s not applied by the delete's settle", g)
		}
	}
	close(j.release)
	for i, r := range <-results {
		if r.Err != nil {
			t.Errorf("commit %d: %v", i, r.Err)
		}
	}
	if _, ok, _ := c.Fetch("old", "t", 0); ok {
		t.Error("group old not deleted")
	}
}

// TestCloseAppendsABatchNobodyWaitsFor: Close comes while the caller that
// queued a batch has not waited for it: Close appends and applies it,
// returns while that caller is still held, and the caller then gets its
// acknowledgements; a commit after is refused, and a reopen finds the
// acknowledged ones.
func TestCloseAppendsABatchNobodyWaitsFor(t *testing.T) {
	opts := testOptions()
	opts.Partitions = 1
	dir := t.TempDir()
	c := mustOpen(t, dir, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a deadlock ends with it
	defer cancel()
	j, results := holdCommitMany(t, ctx, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	close(j.release)
	for i, r := range <-results {
		if r.Err != nil {
			t.Errorf("commit %d, started before Close: %v", i, r.Err)
		}
	}
	if err := c.Commit(ctx, "late", []OffsetCommit{{Topic: "t", Offset: 1}}); !errors.Is(err, ErrClosed) {
		t.Errorf("a commit after Close: %v, want ErrClosed", err)
	}
	c = mustOpen(t, dir, opts)
	defer c.Close()
	for g, want := range map[string]int64{"a": 10, "b": 20} {
		if o, ok, _ := c.Fetch(g, "t", 0); !ok || o.Offset != want {
			t.Errorf("the acknowledged commit of %s after a reopen: %+v %v", g, o, ok)
		}
	}
}

var mixRounds = flag.Int("mix.rounds", 60, "rounds of each worker of TestCommitMix")

// TestCommitMix runs, at once, what meets in the commit pipeline:
// commits made alone, CommitMany calls over several partitions (a group
// twice in one call, too), callers that give up at random points, deletes
// and mapping changes that settle their partition, snapshots that sync the
// journal. Nothing may hang; an acknowledged commit is read back at once
// and after a reopen, at a version above the caller's earlier ones.
func TestCommitMix(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Partitions = 3
	opts.Retention = KeepForever
	c := mustOpen(t, dir, opts)
	bg := context.Background()
	if _, err := c.CreateStaticTopic(bg, "orders", "clusterA", 4, []string{"b0"}); err != nil {
		t.Fatal(err)
	}
	const workers, groups = 6, 3
	rounds := *mixRounds
	if testing.Short() {
		rounds = min(rounds, 20)
	}
	// acked and tried hold, per worker and group, the last offset
	// acknowledged and the last one sent.
	acked := make([][groups]int64, workers)
	tried := make([][groups]int64, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			group := func(k int) string { return fmt.Sprintf("w%d-g%d", w, k) }
			versions := make([]uint64, groups)
			commit := func(k int, off int64) GroupCommit {
				tried[w][k] = max(tried[w][k], off)
				return GroupCommit{Group: group(k), Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Partition: int32(k), Offset: off}}}
			}
			check := func(k int, off int64, v uint64, err error) error {
				switch {
				case err == nil:
					if v <= versions[k] {
						return fmt.Errorf("worker %d: %s acknowledged at version %d after %d", w, group(k), v, versions[k])
					}
					versions[k], acked[w][k] = v, off
					if o, ok, _ := c.Fetch(group(k), "t", int32(k)); !ok || o.Offset < off {
						return fmt.Errorf("worker %d: %s acknowledged %d, reads %+v %v", w, group(k), off, o, ok)
					}
				case !errors.Is(err, context.Canceled):
					return fmt.Errorf("worker %d: %s: %w", w, group(k), err)
				}
				return nil
			}
			for i := range rounds {
				ctx, cancel := context.WithCancel(bg)
				if rng.IntN(4) == 0 {
					go cancel() // ends the call at some point of its way
				}
				off := int64(i + 1)
				switch op := rng.IntN(8); {
				case op < 3:
					k := rng.IntN(groups)
					gc := commit(k, off)
					v, err := c.CommitGeneration(ctx, gc.Group, gc.Generation, gc.Offsets)
					if err := check(k, off, v, err); err != nil {
						errs <- err
						cancel()
						return
					}
				case op < 6:
					var commits []GroupCommit
					var ks []int
					for range 1 + rng.IntN(4) {
						k := rng.IntN(groups)
						commits, ks = append(commits, commit(k, off)), append(ks, k)
					}
					for j, r := range c.CommitMany(ctx, commits) {
						if err := check(ks[j], off, r.Version, r.Err); err != nil {
							errs <- err
							cancel()
							return
						}
					}
				case op == 6:
					victim := fmt.Sprintf("victim%d", rng.IntN(4))
					_ = c.Commit(ctx, victim, []OffsetCommit{{Topic: "t", Offset: off}})
					if err := c.DeleteGroup(ctx, victim); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, context.Canceled) {
						errs <- err
						cancel()
						return
					}
				default:
					if rng.IntN(2) == 0 {
						if err := c.Snapshot(ctx); err != nil && !errors.Is(err, context.Canceled) {
							errs <- err
							cancel()
							return
						}
					} else {
						moves := []statictopic.QueueMove{{QueueID: int32(rng.IntN(4)), ToBroker: fmt.Sprintf("b%d-%d", w, i), OldLeaderMaxOffset: int64(i)}}
						if _, err := c.RemapStaticTopic(ctx, "orders", "clusterA", moves); err != nil && !errors.Is(err, context.Canceled) {
							errs <- err
							cancel()
							return
						}
					}
				}
				cancel()
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("the mix hangs:\n%s", buf[:runtime.Stack(buf, true)])
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkAll := func(c *Coordinator) {
		for w := range workers {
			for k := range groups {
				g := fmt.Sprintf("w%d-g%d", w, k)
				o, ok, err := c.Fetch(g, "t", int32(k))
				if err != nil || !ok && acked[w][k] > 0 || ok && (o.Offset < acked[w][k] || o.Offset > tried[w][k]) {
					t.Errorf("%s: %+v %v %v; acknowledged %d, sent up to %d", g, o, ok, err, acked[w][k], tried[w][k])
				}
			}
		}
	}
	checkAll(c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, dir, opts)
	defer c.Close()
	checkAll(c)
}

// Close while commits, alone and batched, and CommitMany calls
// run: every call returns, acknowledged or refused as closed, and what
// was acknowledged is there after a reopen.
func TestCloseDuringDirectCommits(t *testing.T) {
	for round := range 5 {
		dir := t.TempDir()
		opts := testOptions()
		opts.Partitions = 2
		c := mustOpen(t, dir, opts)
		const workers = 8
		acked := make([]int64, workers)
		var wg sync.WaitGroup
		started := make(chan struct{}, workers)
		for w := range workers {
			wg.Go(func() {
				group := fmt.Sprintf("w%d", w)
				for off := int64(1); ; off++ {
					if off == 3 {
						started <- struct{}{}
					}
					var err error
					if (int(off)+w+round)%2 == 0 {
						gc := GroupCommit{Group: group, Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Offset: off}}}
						rs := c.CommitMany(context.Background(), []GroupCommit{gc, {Group: "other", Generation: NoGeneration, Offsets: gc.Offsets}, gc})
						err = errors.Join(rs[0].Err, rs[2].Err)
					} else {
						err = c.Commit(context.Background(), group, []OffsetCommit{{Topic: "t", Offset: off}})
					}
					switch {
					case err == nil:
						acked[w] = off
					case errors.Is(err, ErrClosed):
						return
					default:
						t.Errorf("worker %d: %v", w, err)
						return
					}
				}
			})
		}
		for range workers {
			<-started
		}
		closed := make(chan error, 1)
		go func() { closed <- c.Close() }()
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("calls hang across Close:\n%s", buf[:runtime.Stack(buf, true)])
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		c = mustOpen(t, dir, opts)
		for w := range workers {
			if o, ok, _ := c.Fetch(fmt.Sprintf("w%d", w), "t", 0); acked[w] > 0 && (!ok || o.Offset < acked[w]) {
				t.Errorf("worker %d acknowledged %d, reads %+v %v", w, acked[w], o, ok)
			}
		}
		c.Close()
	}
}
