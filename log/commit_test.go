package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestCommitterAdd: callers start tickets and add to them while the
// committer may take them at any moment. Each ticket's result covers
// exactly the entries it held when it was taken, the log holds every entry
// of every ticket once, in ticket order, and an Add before Start or after
// Done fails without calling its function.
func TestCommitterAdd(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(t, 1<<20))
	c := NewCommitter(l, nil)
	mustNotAdd := func(_ []Entry) []Entry {
		t.Error("Add called its function on a ticket it may not grow")
		return nil
	}
	var never Ticket
	if never.Add(mustNotAdd) {
		t.Fatal("Add took a ticket that was never started")
	}
	const callers, tickets, adds = 8, 20, 4
	want := make(map[string]bool)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			for k := range tickets {
				var tk Ticket
				entries := []Entry{{Partition: w, Type: 1, Payload: fmt.Appendf(nil, "%d/%d/0", w, k)}}
				if err := c.Start(&tk, entries); err != nil {
					t.Error(err)
					return
				}
				held := 1
				for x := 1; x <= adds; x++ {
					e := Entry{Partition: w, Type: 1, Payload: fmt.Appendf(nil, "%d/%d/%d", w, k, x)}
					if !tk.Add(func(es []Entry) []Entry { return append(es, e) }) {
						break
					}
					entries, held = append(entries, e), held+1
				}
				if err := c.Wait(context.Background(), tk.Done()); err != nil {
					t.Error(err)
					return
				}
				first, last, err := tk.Result()
				if err != nil {
					t.Error(err)
					return
				}
				if int(last-first+1) != held {
					t.Errorf("ticket %d/%d: indexes %d..%d for %d entries", w, k, first, last, held)
				}
				if tk.Add(mustNotAdd) {
					t.Errorf("ticket %d/%d: grown after it was durable", w, k)
				}
				mu.Lock()
				for _, e := range entries {
					want[string(e.Payload)] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	c.Close()
	seen := make(map[string]bool)
	last := make(map[int]string)
	err := l.Replay(l.FirstIndex(), func(index uint64, e Entry) error {
		p := string(e.Payload)
		if !want[p] || seen[p] {
			return fmt.Errorf("index %d: unexpected or repeated entry %q", index, p)
		}
		seen[p] = true
		var w, k, x int
		fmt.Sscanf(p, "%d/%d/%d", &w, &k, &x)
		var pw, pk, px int
		if prev, ok := last[w]; ok {
			fmt.Sscanf(prev, "%d/%d/%d", &pw, &pk, &px)
			if k < pk || (k == pk && x != px+1) || (k > pk && x != 0) {
				return fmt.Errorf("index %d: %q follows %q", index, p, prev)
			}
		}
		last[w] = p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(want) {
		t.Fatalf("the log holds %d of %d entries", len(seen), len(want))
	}
	mustClose(t, l)
}

// pacedEnv is a commitEnv whose appends the test paces: each one reports
// its payloads on calls, then waits for its result on results.
type pacedEnv struct {
	calls   chan []string
	results chan error
	next    uint64 // the appender's
}

func newPacedEnv() *pacedEnv {
	return &pacedEnv{calls: make(chan []string), results: make(chan error), next: 1}
}

func (p *pacedEnv) env() commitEnv {
	return commitEnv{
		append: func(entries []Entry, _ bool) (uint64, error) {
			var payloads []string
			for _, e := range entries {
				payloads = append(payloads, string(e.Payload))
			}
			p.calls <- payloads
			if err := <-p.results; err != nil {
				return 0, err
			}
			first := p.next
			p.next += uint64(len(entries))
			return first, nil
		},
		lastIndex: func() uint64 { return 0 },
	}
}

// expect receives the next append and checks what it carries.
func (p *pacedEnv) expect(t *testing.T, want ...string) {
	t.Helper()
	select {
	case got := <-p.calls:
		if !slices.Equal(got, want) {
			t.Fatalf("append of %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no append of %q", want)
	}
}

// expectNone checks that no append has begun.
func (p *pacedEnv) expectNone(t *testing.T, why string) {
	t.Helper()
	select {
	case got := <-p.calls:
		t.Fatalf("append of %q %s", got, why)
	default:
	}
}

func startTicket(t *testing.T, c *Committer, tk *Ticket, payload string) {
	t.Helper()
	if err := c.Start(tk, []Entry{{Partition: 1, Type: 1, Payload: []byte(payload)}}); err != nil {
		t.Fatal(err)
	}
}

func waitFor(c *Committer, ctx context.Context, tk *Ticket) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- c.Wait(ctx, tk.Done()) }()
	return ch
}

func isDone(tk *Ticket) bool {
	select {
	case <-tk.Done():
		return true
	default:
		return false
	}
}

// TestCommitterWaiterAppends: nothing is appended until somebody waits; a
// waiter that finds nobody appending appends on its own goroutine (no
// goroutine of the committer's exists); one that comes while an append
// runs sleeps, then gets the turn and appends, as one batch, everything
// queued meanwhile, the tickets of callers that never wait among them.
func TestCommitterWaiterAppends(t *testing.T) {
	env := newPacedEnv()
	c := newCommitter(env.env(), nil)
	var a, b, orphan Ticket
	startTicket(t, c, &a, "a")
	env.expectNone(t, "before anybody waited")
	waitedA := waitFor(c, context.Background(), &a)
	env.expect(t, "a")
	startTicket(t, c, &b, "b")
	startTicket(t, c, &orphan, "orphan") // its caller waits for a lock, say
	waitedB := waitFor(c, context.Background(), &b)
	env.results <- nil
	if err := <-waitedA; err != nil || !isDone(&a) {
		t.Fatalf("a: %v, done %v", err, isDone(&a))
	}
	env.expect(t, "b", "orphan")
	env.results <- nil
	if err := <-waitedB; err != nil {
		t.Fatal(err)
	}
	if !isDone(&orphan) {
		t.Fatal("a ticket queued behind a waiter's was left behind")
	}
	for tk, want := range map[*Ticket]uint64{&a: 1, &b: 2, &orphan: 3} {
		if first, last, err := tk.Result(); err != nil || first != want || last != want {
			t.Errorf("ticket at %d..%d, %v; want %d", first, last, err, want)
		}
	}
	c.Close()
}

// TestCommitterSettleWhileStarterBlocked is the lock rule: a caller queues
// a ticket and, before it waits, blocks on a lock that another holds while
// it waits for that ticket (a partition settling before a request that
// reads its tables). The holder appends the ticket itself.
func TestCommitterSettleWhileStarterBlocked(t *testing.T) {
	env := newPacedEnv()
	c := newCommitter(env.env(), nil)
	var partitionLock sync.Mutex
	partitionLock.Lock() // held by the settler
	var first Ticket
	startTicket(t, c, &first, "first")
	starter := make(chan error, 1)
	go func() {
		partitionLock.Lock() // the caller's next commit, before it waits for its first
		defer partitionLock.Unlock()
		starter <- c.Wait(context.Background(), first.Done())
	}()
	settled := waitFor(c, context.Background(), &first)
	env.expect(t, "first")
	env.results <- nil
	if err := <-settled; err != nil || !isDone(&first) {
		t.Fatalf("settle: %v, done %v", err, isDone(&first))
	}
	partitionLock.Unlock()
	if err := <-starter; err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestCommitterWaiterGivesUp: a waiter whose ctx has ended appends
// nothing; one whose ctx ends while another appends returns at once; its ticket, queued, is appended by the next
// waiter, or by Close, which also answers tickets nobody waits for and
// refuses new ones.
func TestCommitterWaiterGivesUp(t *testing.T) {
	env := newPacedEnv()
	c := newCommitter(env.env(), nil)
	var a, b, c1, c2 Ticket
	startTicket(t, c, &a, "a")
	ended, cancelEnded := context.WithCancel(context.Background())
	cancelEnded()
	if err := c.Wait(ended, a.Done()); !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose ctx ended: %v", err)
	}
	env.expectNone(t, "by a waiter whose ctx ended")
	waitedA := waitFor(c, context.Background(), &a)
	env.expect(t, "a")
	startTicket(t, c, &b, "b")
	ctx, cancel := context.WithCancel(context.Background())
	waitedB := waitFor(c, ctx, &b)
	cancel()
	if err := <-waitedB; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter that gave up: %v", err)
	}
	env.results <- nil
	if err := <-waitedA; err != nil {
		t.Fatal(err)
	}
	if isDone(&b) {
		t.Fatal("b appended though nobody waited")
	}
	startTicket(t, c, &c1, "c1")
	waitedC := waitFor(c, context.Background(), &c1)
	env.expect(t, "b", "c1")
	env.results <- nil
	if err := <-waitedC; err != nil || !isDone(&b) {
		t.Fatalf("c1: %v; b done %v", err, isDone(&b))
	}
	startTicket(t, c, &c2, "c2") // nobody waits
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	env.expect(t, "c2")
	env.results <- nil
	<-closed
	if !isDone(&c2) {
		t.Fatal("Close left a queued ticket unanswered")
	}
	var late Ticket
	if err := c.Start(&late, []Entry{{Payload: []byte("late")}}); !errors.Is(err, ErrCommitterClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
	if err := c.Sync(); !errors.Is(err, ErrCommitterClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
}

// TestCommitterAppendFails: a failed append fails every ticket of its
// batch, with no indexes, and the next batch goes on.
func TestCommitterAppendFails(t *testing.T) {
	env := newPacedEnv()
	c := newCommitter(env.env(), nil)
	var a, b, next Ticket
	startTicket(t, c, &a, "a")
	startTicket(t, c, &b, "b")
	waited := waitFor(c, context.Background(), &b)
	env.expect(t, "a", "b")
	broken := errors.New("disk gone")
	env.results <- broken
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*Ticket{&a, &b} {
		if first, last, err := tk.Result(); !errors.Is(err, broken) || first != 0 || last != 0 {
			t.Errorf("a ticket of the failed batch: %d..%d, %v", first, last, err)
		}
	}
	startTicket(t, c, &next, "next")
	waited = waitFor(c, context.Background(), &next)
	env.expect(t, "next")
	env.results <- nil
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if first, _, err := next.Result(); err != nil || first != 1 {
		t.Fatalf("the batch after: %d, %v", first, err)
	}
	c.Close()
}

// TestCommitterCallersAndSyncs: callers that start a second ticket before
// they wait for their first (as CommitMany does), wait in either order, or
// wait only for the second, while Sync runs over and over on a real log:
// every ticket is answered, and a caller's tickets get increasing indexes
// in the order it started them.
func TestCommitterCallersAndSyncs(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(t, 1<<20))
	c := NewCommitter(l, nil)
	stop := make(chan struct{})
	syncs := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				syncs <- nil
				return
			default:
			}
			if err := c.Sync(); err != nil {
				syncs <- err
				return
			}
		}
	}()
	const callers, rounds = 8, 50
	var wg sync.WaitGroup
	bg := context.Background()
	for w := range callers {
		wg.Go(func() {
			for k := range rounds {
				entry := func(x int) []Entry {
					return []Entry{{Partition: w, Type: 1, Payload: fmt.Appendf(nil, "%d/%d/%d", w, k, x)}}
				}
				var first, second Ticket
				if err := c.Start(&first, entry(0)); err != nil {
					t.Error(err)
					return
				}
				if err := c.Start(&second, entry(1)); err != nil {
					t.Error(err)
					return
				}
				switch k % 3 {
				case 0:
					_ = c.Wait(bg, first.Done())
					_ = c.Wait(bg, second.Done())
				case 1:
					_ = c.Wait(bg, second.Done())
					_ = c.Wait(bg, first.Done())
				default:
					_ = c.Wait(bg, second.Done())
				}
				_, last, err := first.Result()
				if err != nil {
					t.Error(err)
					return
				}
				if f2, _, err := second.Result(); err != nil || f2 <= last {
					t.Errorf("caller %d round %d: second ticket at %d (%v), first ends at %d", w, k, f2, err, last)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("callers hang")
	}
	close(stop)
	if err := <-syncs; err != nil {
		t.Fatal(err)
	}
	c.Close()
	mustClose(t, l)
}
