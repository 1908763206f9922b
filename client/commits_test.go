package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/server"
)

// gatedServer runs a server whose first commit request (POST /v1/commits
// or a commit alone) waits until the test opens the gate, and which counts
// the requests of each kind.
type gatedServer struct {
	gate    chan struct{}
	held    chan struct{} // closed once the first batch waits at the gate
	first   atomic.Bool
	batches atomic.Int64
	singles atomic.Int64
	noBatch bool // answer /v1/commits 404, as a server before it
}

func (g *gatedServer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/v1/commits" {
			g.batches.Add(1)
			if g.noBatch {
				http.NotFound(w, r)
				return
			}
		} else {
			g.singles.Add(1)
		}
		if g.first.CompareAndSwap(false, true) {
			close(g.held)
			<-g.gate
		}
		next.ServeHTTP(w, r)
	})
}

// newGated returns a gated server, its gate armed, a client of it that
// has one request carrying commits in flight at most, and the client's
// queue as client.WatchQueue tells it.
func newGated(t *testing.T, noBatch bool) (*gatedServer, *client.Client, <-chan int) {
	g := &gatedServer{gate: make(chan struct{}), held: make(chan struct{}), noBatch: noBatch}
	ts, _ := newServer(t, server.Options{}, false, g.wrap)
	c := newClient(t, ts, client.Options{MaxCommitRequests: 1})
	return g, c, client.WatchQueue(c)
}

// awaitQueued waits until n commits wait for a request, as queued (from
// client.WatchQueue) tells.
func awaitQueued(t *testing.T, queued <-chan int, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-queued:
			if got >= n {
				return
			}
		case <-timeout:
			t.Fatalf("fewer than %d commits queued", n)
		}
	}
}

// A commit made while the client is not busy goes alone, at once; commits
// made while a request is in flight go together in the next one, each
// answered alone: a fenced commit fails, the others are written, and every
// caller gets its own group's version.
func TestCommitBatching(t *testing.T) {
	g, c, queued := newGated(t, false)
	ctx := t.Context()
	g.first.Store(true) // not this one
	if _, err := c.Commit(ctx, "fenced", 7, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	g.first.Store(false) // hold the next batch
	const callers = 40
	versions := make([]uint64, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	wg.Go(func() {
		versions[0], errs[0] = c.Commit(ctx, "g0", -1, []client.OffsetCommit{{Topic: "t", Offset: 100, LeaderEpoch: -1}})
	})
	<-g.held
	for i := 1; i < callers; i++ {
		wg.Go(func() {
			gen := int32(-1)
			group := fmt.Sprint("g", i)
			if i == callers-1 {
				group, gen = "fenced", 6 // below 7
			}
			versions[i], errs[i] = c.Commit(ctx, group, gen, []client.OffsetCommit{{Topic: "t", Partition: int32(i), Offset: int64(100 + i), LeaderEpoch: -1}})
		})
	}
	awaitQueued(t, queued, callers-1)
	close(g.gate)
	wg.Wait()
	if n := g.batches.Load(); n != 1 {
		t.Errorf("%d batch requests, want 1: the %d commits that waited, together", n, callers-1)
	}
	if n := g.singles.Load(); n != 2 {
		t.Errorf("%d commits went alone, want 2: the fenced group's first and the held one", n)
	}
	for i := range callers - 1 {
		if errs[i] != nil {
			t.Fatalf("commit %d: %v", i, errs[i])
		}
		got, err := c.GroupOffsets(ctx, fmt.Sprint("g", i), "")
		if err != nil || got.Version != versions[i] || len(got.Offsets) != 1 || got.Offsets[0].Offset != int64(100+i) {
			t.Fatalf("g%d: %+v, %v; want offset %d at version %d", i, got, err, 100+i, versions[i])
		}
	}
	if err := errs[callers-1]; !errors.Is(err, client.ErrStaleGeneration) {
		t.Fatalf("fenced commit in a batch: %v, want ErrStaleGeneration", err)
	}
	if o, err := c.Offset(ctx, "fenced", "t", int32(callers-1)); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("the fenced commit wrote %+v, %v", o, err)
	}
}

// Only an idle client sends a commit alone: one made while a request is in
// flight goes as a batch, at once when a place is free.
func TestCommitAloneOnlyWhenIdle(t *testing.T) {
	g := &gatedServer{gate: make(chan struct{}), held: make(chan struct{})}
	ts, _ := newServer(t, server.Options{}, false, g.wrap)
	c := newClient(t, ts, client.Options{MaxCommitRequests: 2})
	ctx := t.Context()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := c.Commit(ctx, "held", -1, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}}); err != nil {
			t.Error(err)
		}
	})
	<-g.held
	if _, err := c.Commit(ctx, "busy", -1, []client.OffsetCommit{{Topic: "t", Offset: 2, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	close(g.gate)
	wg.Wait()
	if b, s := g.batches.Load(), g.singles.Load(); b != 1 || s != 1 {
		t.Fatalf("%d batch requests and %d single commits, want 1 and 1: the first alone, the one made while it was in flight in a batch", b, s)
	}
	for group, want := range map[string]int64{"held": 1, "busy": 2} {
		if o, err := c.Offset(ctx, group, "t", 0); err != nil || o.Offset != want {
			t.Fatalf("%s: %+v, %v; want offset %d", group, o, err, want)
		}
	}
}

// A caller that gives up while its commit waits for a request takes it
// out: it is never sent. The others of its batch are.
func TestCommitBatchingCancel(t *testing.T) {
	g, c, queued := newGated(t, false)
	ctx := t.Context()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := c.Commit(ctx, "first", -1, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}}); err != nil {
			t.Error(err)
		}
	})
	<-g.held
	gone, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Commit(gone, "gone", -1, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}})
		done <- err
	}()
	wg.Go(func() {
		if _, err := c.Commit(ctx, "kept", -1, []client.OffsetCommit{{Topic: "t", Offset: 2, LeaderEpoch: -1}}); err != nil {
			t.Error(err)
		}
	})
	awaitQueued(t, queued, 2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled commit: %v", err)
	}
	close(g.gate)
	wg.Wait()
	if _, err := c.Offset(ctx, "gone", "t", 0); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a commit whose caller gave up before it was sent was written: %v", err)
	}
	if o, err := c.Offset(ctx, "kept", "t", 0); err != nil || o.Offset != 2 {
		t.Fatalf("kept: %+v, %v", o, err)
	}
}

// Against a server without /v1/commits, commits go alone, and after the
// first refusal the client asks no more.
func TestCommitBatchingOldServer(t *testing.T) {
	g, c, queued := newGated(t, true)
	ctx := t.Context()
	// held goes alone and is held; waiting waits, and goes as a batch,
	// which the server refuses: it goes alone then.
	commitBoth := func(held, waiting string) {
		t.Helper()
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := c.Commit(ctx, held, -1, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}}); err != nil {
				t.Error(err)
			}
		})
		<-g.held
		wg.Go(func() {
			if _, err := c.Commit(ctx, waiting, -1, []client.OffsetCommit{{Topic: "t", Offset: 2, LeaderEpoch: -1}}); err != nil {
				t.Error(err)
			}
		})
		if g.batches.Load() == 0 {
			awaitQueued(t, queued, 1)
		}
		close(g.gate)
		wg.Wait()
	}
	commitBoth("a", "b")
	if b, s := g.batches.Load(), g.singles.Load(); b != 1 || s != 2 {
		t.Fatalf("%d batch requests and %d single commits, want 1 and 2", b, s)
	}
	g.gate, g.held = make(chan struct{}), make(chan struct{})
	g.first.Store(false)
	commitBoth("c", "d")
	if b, s := g.batches.Load(), g.singles.Load(); b != 1 || s != 4 {
		t.Fatalf("%d batch requests and %d single commits, want still 1, and 4", b, s)
	}
	for group, want := range map[string]int64{"a": 1, "b": 2, "c": 1, "d": 2} {
		if o, err := c.Offset(ctx, group, "t", 0); err != nil || o.Offset != want {
			t.Fatalf("%s: %+v, %v; want offset %d", group, o, err, want)
		}
	}
}

// MaxCommitRequests < 0 sends every commit alone.
func TestCommitBatchingOff(t *testing.T) {
	g := &gatedServer{gate: make(chan struct{}), held: make(chan struct{})}
	g.first.Store(true)
	ts, _ := newServer(t, server.Options{}, false, g.wrap)
	c := newClient(t, ts, client.Options{MaxCommitRequests: -1})
	if _, err := c.Commit(t.Context(), "g", -1, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	if b, s := g.batches.Load(), g.singles.Load(); b != 0 || s != 1 {
		t.Fatalf("%d batch requests and %d single commits, want 0 and 1", b, s)
	}
}
