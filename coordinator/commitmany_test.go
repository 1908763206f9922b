package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// CommitMany answers each commit alone: a bad or fenced commit fails and
// writes nothing, the others of the call are written, durably, in order.
func TestCommitMany(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	ctx := context.Background()
	if _, err := c.CommitGeneration(ctx, "fenced", 5, []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	var commits []GroupCommit
	for i := range 40 {
		commits = append(commits, GroupCommit{Group: fmt.Sprintf("g%d", i), Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Partition: int32(i), Offset: int64(100 + i)}}})
	}
	commits = append(commits,
		GroupCommit{Group: "", Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Offset: 1}}},   // 40: no group
		GroupCommit{Group: "fenced", Generation: 4, Offsets: []OffsetCommit{{Topic: "t", Offset: 2}}},        // 41: stale
		GroupCommit{Group: "g0", Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Offset: 7}}}, // 42: after commits[0]
	)
	results := c.CommitMany(ctx, commits)
	if len(results) != len(commits) {
		t.Fatalf("%d results for %d commits", len(results), len(commits))
	}
	for i, r := range results[:40] {
		if r.Err != nil || r.Version == 0 {
			t.Fatalf("commit %d: %+v", i, r)
		}
	}
	if !errors.Is(results[40].Err, ErrInvalid) {
		t.Errorf("commit without a group: %v, want ErrInvalid", results[40].Err)
	}
	if !errors.Is(results[41].Err, ErrStaleGeneration) {
		t.Errorf("stale commit: %v, want ErrStaleGeneration", results[41].Err)
	}
	if results[42].Err != nil || results[42].Version <= results[0].Version {
		t.Errorf("second commit of g0: %+v after %+v", results[42], results[0])
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	for i := 1; i < 40; i++ {
		o, ok, err := c.Fetch(fmt.Sprintf("g%d", i), "t", int32(i))
		if err != nil || !ok || o.Offset != int64(100+i) {
			t.Fatalf("g%d after restart: %+v %v %v", i, o, ok, err)
		}
	}
	if o, _, _ := c.Fetch("g0", "t", 0); o.Offset != 7 {
		t.Errorf("g0 after restart: %d, want 7 (its later commit)", o.Offset)
	}
	if o, _, _ := c.Fetch("fenced", "t", 0); o.Offset != 1 {
		t.Errorf("fenced group after restart: %d, want 1 (the stale commit wrote nothing)", o.Offset)
	}
	if info, _, _ := c.Group("g0"); info.Version != results[42].Version {
		t.Errorf("g0's version %d, want the one its commit returned, %d", info.Version, results[42].Version)
	}
}

// A CommitMany whose ctx has ended answers every commit with its error.
func TestCommitManyCancelled(t *testing.T) {
	c := mustOpen(t, t.TempDir(), testOptions())
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	results := c.CommitMany(ctx, []GroupCommit{{Group: "g", Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Offset: 1}}}})
	if !errors.Is(results[0].Err, context.Canceled) {
		t.Fatalf("got %+v, want context.Canceled", results[0])
	}
}

// gateObserver holds the journal, once armed, after it has written a batch
// and before it answers it, until release is closed.
type gateObserver struct {
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (g *gateObserver) ObserveAppend(int, int, int, time.Duration, error) {}
func (g *gateObserver) ObserveLoad(int, int, time.Duration)               {}
func (g *gateObserver) ObserveJournalBatch(int, int, int, int, time.Duration, error) {
	if g.armed.CompareAndSwap(true, false) {
		close(g.held)
		<-g.release
	}
}

// A commit whose caller gives up while its batch syncs is applied all the
// same, even when no other write follows to carry it.
func TestCommitGivenUpIsApplied(t *testing.T) {
	g := &gateObserver{held: make(chan struct{}), release: make(chan struct{})}
	opts := testOptions()
	opts.Observer = g
	c, changed := openWatched(t, opts)
	g.armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Commit(ctx, "g", []OffsetCommit{{Topic: "t", Offset: 9}}) }()
	<-g.held // written, not yet answered
	cancel()
	// A commit made alone appends its batch on its caller's goroutine (so
	// it waits for the gate), the others wait for whoever appends: either
	// gives up.
	close(g.release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("commit given up: %v, want context.Canceled", err)
	}
	appliedNine(t, c, changed)
}

// A commit made alone whose caller gave up while the commit was being
// built returns at once, without appending and syncing its batch on its
// goroutine (here the journal holds that append, made by the partition's
// goroutine), and its batch is applied all the same.
func TestLoneCommitGivenUpBeforeItsAppend(t *testing.T) {
	g := &gateObserver{held: make(chan struct{}), release: make(chan struct{})}
	clock := newGateClock()
	opts := testOptions()
	opts.Observer = g
	opts.Now = clock.now
	opts.Retention = KeepForever       // the sweeper would read the clock too
	c, changed := openWatched(t, opts) // the journal idle: the commit goes alone
	clock.armed.Store(true)
	g.armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Commit(ctx, "g", []OffsetCommit{{Topic: "t", Offset: 9}}) }()
	<-clock.entered // being built, under the partition's lock
	cancel()
	close(clock.release)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("commit given up: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		close(g.release) // so that Close can end
		t.Fatal("a commit given up before its append waits for the append")
	}
	select {
	case <-g.held: // the journal's goroutine appended the batch
	case <-time.After(10 * time.Second):
		t.Fatal("nobody appended the given-up commit's batch")
	}
	close(g.release)
	appliedNine(t, c, changed)
}

// openWatched opens a store with opts and watches group g in it. It
// returns once the partition's writer is up and the journal idle: a
// snapshot was answered.
func openWatched(t *testing.T, opts Options) (c *Coordinator, changed <-chan struct{}) {
	t.Helper()
	c = mustOpen(t, t.TempDir(), opts)
	t.Cleanup(func() { c.Close() })
	_, changed, stop, err := c.WatchGroup("g")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := c.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c, changed
}

// appliedNine waits until group g changes and checks that it holds offset
// 9: a commit given up was applied all the same.
func appliedNine(t *testing.T, c *Coordinator, changed <-chan struct{}) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the durable commit was not applied")
	}
	if o, ok, _ := c.Fetch("g", "t", 0); !ok || o.Offset != 9 {
		t.Fatalf("Fetch = %+v %v, want offset 9", o, ok)
	}
}
