package coordinator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offsetd/offsetd/statictopic"
)

// writerIdle waits until p's writer goroutine waits for work in its
// select, holding no lock: after a call it answered, the writer takes the
// lock once more before it gets there.
func writerIdle(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "[select") && strings.Contains(g, "(*partition).run(") {
				return
			}
		}
		runtime.Gosched()
	}
	t.Fatal("the writer never went idle")
}

// writerWaitsForLock waits until p's writer goroutine is blocked on the
// partition's lock after the call whose goroutine blocks in state with
// frame on its stack (DeleteGroup waiting for its answer, Close for the
// writers) has reached it: no hook marks that moment, the goroutines'
// stacks do.
func writerWaitsForLock(t *testing.T, p *partition, state, frame string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if len(p.reqs) == 0 {
			n := runtime.Stack(buf, true)
			writer, caller := false, false
			for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
				writer = writer || strings.Contains(g, "[chan send") && strings.Contains(g, "(*partition).run(") && strings.Contains(g, "writeLock.lock")
				caller = caller || strings.Contains(g, "["+state) && strings.Contains(g, frame)
			}
			if writer && caller {
				return
			}
		}
		runtime.Gosched()
	}
	t.Fatal("the writer never waited for the partition's lock")
}

// gatedOptions are the options of a store of one partition whose clock
// is gate.
func gatedOptions(gate *gateClock) Options {
	opts := testOptions()
	opts.Partitions = 1
	opts.Now = gate.now
	opts.Retention = KeepForever // the sweeper would read the clock too
	return opts
}

// commitManyHeld waits until c's only partition's writer is up and idle
// (a snapshot answered), starts a CommitMany of groups a and b, and
// returns once its first commit is being built under the partition's
// lock, held there until gate is released: the journal is idle then, as
// when a commit made alone goes lone.
func commitManyHeld(t *testing.T, ctx context.Context, c *Coordinator, gate *gateClock) <-chan []CommitResult {
	t.Helper()
	if err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	writerIdle(t)
	gate.armed.Store(true)
	results := make(chan []CommitResult, 1)
	go func() {
		results <- c.CommitMany(ctx, []GroupCommit{
			{Group: "a", Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Offset: 10}}},
			{Group: "b", Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Offset: 20}}},
		})
	}()
	<-gate.entered
	return results
}

// A CommitMany whose first commit finds the journal idle and whose next
// commit waits for the partition's lock, held by the writer settling
// before a delete, which waits for the first commit's batch: were that
// batch left to its caller to append (lone), in wait, after starting the
// next, the writer and the caller would wait for each other. The commits
// of a CommitMany of several never go lone.
func TestCommitManyLoneAndSettle(t *testing.T) {
	gate := newGateClock()
	opts := gatedOptions(gate)
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	bg := context.Background()
	if err := c.Commit(bg, "old", []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	p := c.parts[0]
	ctx, cancel := context.WithTimeout(bg, 20*time.Second) // a deadlock ends with it
	defer cancel()
	results := commitManyHeld(t, ctx, c, gate)
	deleted := make(chan error, 1)
	go func() { deleted <- c.DeleteGroup(ctx, "old") }()
	writerWaitsForLock(t, p, "select", "(*Coordinator).DeleteGroup(")
	// The first commit is handed to the journal; the writer takes the
	// lock next and settles, and the second commit waits for it.
	close(gate.release)
	for i, r := range <-results {
		if r.Err != nil {
			t.Errorf("commit %d: %v", i, r.Err)
		}
	}
	if err := <-deleted; err != nil {
		t.Errorf("delete: %v", err)
	}
	for _, g := range []string{"a", "b"} {
		if _, ok, _ := c.Fetch(g, "t", 0); !ok {
			t.Errorf("group %s not committed", g)
		}
	}
	if _, ok, _ := c.Fetch("old", "t", 0); ok {
		t.Error("group old not deleted")
	}
}

// TestCommitManyLoneAndClose: Close comes while a CommitMany builds its
// first commit, the journal idle: the writer settles as it stops, the
// first commit is written and acknowledged, the second is refused as
// closed, and Close returns.
func TestCommitManyLoneAndClose(t *testing.T) {
	gate := newGateClock()
	opts := gatedOptions(gate)
	dir := t.TempDir()
	c := mustOpen(t, dir, opts)
	bg := context.Background()
	p := c.parts[0]
	ctx, cancel := context.WithTimeout(bg, 20*time.Second) // a deadlock ends with it
	defer cancel()
	results := commitManyHeld(t, ctx, c, gate)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	writerWaitsForLock(t, p, "", "(*Coordinator).closeAll(") // to stop
	close(gate.release)
	rs := <-results
	if rs[0].Err != nil {
		t.Errorf("the commit started before Close: %v", rs[0].Err)
	}
	if !errors.Is(rs[1].Err, ErrClosed) {
		t.Errorf("the commit started once the writer stopped: %v, want ErrClosed", rs[1].Err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, dir, opts)
	defer c.Close()
	if o, ok, _ := c.Fetch("a", "t", 0); !ok || o.Offset != 10 {
		t.Errorf("the acknowledged commit after a reopen: %+v %v", o, ok)
	}
}

var mixRounds = flag.Int("mix.rounds", 60, "rounds of each worker of TestDirectCommitMix")

// TestDirectCommitMix runs, at once, what meets on the direct commit
// path: lone commits, CommitMany calls over several partitions (a group
// twice in one call, too), callers that give up at random points, deletes
// and mapping changes that settle their partition, snapshots that sync the
// journal. Nothing may hang; an acknowledged commit is read back at once
// and after a reopen, at a version above the caller's earlier ones.
func TestDirectCommitMix(t *testing.T) {
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

// Close while direct commits, lone and batched, and CommitMany calls
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
