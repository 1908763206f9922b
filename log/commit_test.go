package log

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestCommitterExtend: callers start tickets and extend them while they
// may be taken at any moment. Each ticket's result covers exactly the
// entries it held when the committer took it (all of them if the last
// Extend succeeded), the log holds every entry of every ticket once, in
// ticket order, and an Extend after Done fails. Half the tickets are
// started with StartOwn, and flushed by their callers when lone.
func TestCommitterExtend(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(t, 1<<20))
	c := NewCommitter(l, nil)
	var never Ticket
	if c.Extend(&never, []Entry{{Payload: []byte("x")}}) {
		t.Fatal("Extend took a ticket that was never started")
	}
	const callers, tickets, extends = 8, 20, 4
	want := make(map[string]bool)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			for k := range tickets {
				var tk Ticket
				entries := []Entry{{Partition: w, Type: 1, Payload: fmt.Appendf(nil, "%d/%d/0", w, k)}}
				lone, err := false, error(nil)
				if k%2 == 0 {
					err = c.Start(&tk, entries)
				} else {
					lone, err = c.StartOwn(&tk, entries)
				}
				if err != nil {
					t.Error(err)
					return
				}
				held := 1
				for x := 1; x <= extends; x++ {
					more := append(entries[:len(entries):len(entries)], Entry{Partition: w, Type: 1, Payload: fmt.Appendf(nil, "%d/%d/%d", w, k, x)})
					if !c.Extend(&tk, more) {
						break
					}
					entries, held = more, len(more)
				}
				if lone {
					c.Flush()
				}
				first, last, err := tk.Result()
				if err != nil {
					t.Error(err)
					return
				}
				if int(last-first+1) != held {
					t.Errorf("ticket %d/%d: indexes %d..%d for %d entries", w, k, first, last, held)
				}
				if c.Extend(&tk, append(entries, Entry{Partition: w, Type: 1, Payload: []byte("late")})) {
					t.Errorf("ticket %d/%d: extended after it was durable", w, k)
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
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCommitterLoneCaller: a ticket StartOwn finds alone is appended by
// its caller's Flush, which returns with it answered; while it waits for
// that Flush, a call queued or an Extend of it wakes the committer, which
// appends it with theirs; Close answers one never flushed.
func TestCommitterLoneCaller(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(t, 1<<20))
	c := NewCommitter(l, nil)
	entry := func(s string) []Entry { return []Entry{{Partition: 1, Type: 1, Payload: []byte(s)}} }
	// startLone starts tk with StartOwn once the committer's goroutine,
	// answering an earlier call, has gone idle.
	startLone := func(tk *Ticket, payload string) {
		t.Helper()
		for {
			lone, err := c.StartOwn(tk, entry(payload))
			if err != nil {
				t.Fatal(err)
			}
			if lone {
				return
			}
			if _, _, err := tk.Result(); err != nil {
				t.Fatal(err)
			}
		}
	}
	answered := func(tk *Ticket) bool {
		select {
		case <-tk.Done():
			return true
		default:
			return false
		}
	}

	var lone Ticket
	if ok, err := c.StartOwn(&lone, entry("lone")); err != nil || !ok {
		t.Fatalf("StartOwn on an idle committer: lone %v, %v", ok, err)
	}
	c.Flush()
	if !answered(&lone) {
		t.Fatal("Flush returned before the lone ticket was answered")
	}
	if first, last, err := lone.Result(); err != nil || first != last {
		t.Fatalf("lone ticket: %d..%d, %v", first, last, err)
	}

	// Another call queued behind a lone ticket is not held up by it.
	var waiting Ticket
	if ok, err := c.StartOwn(&waiting, entry("waiting")); err != nil || !ok {
		t.Fatalf("StartOwn after a Flush: lone %v, %v", ok, err)
	}
	var other Ticket
	if ok, err := c.StartOwn(&other, entry("other")); err != nil || ok {
		t.Fatalf("StartOwn behind a queued ticket: lone %v, %v", ok, err)
	}
	if _, _, err := other.Result(); err != nil {
		t.Fatal(err)
	}
	if first, _, err := waiting.Result(); err != nil || first != lone.last+1 {
		t.Fatalf("the lone ticket queued first: index %d, %v; want %d", first, err, lone.last+1)
	}
	c.Flush() // late, harmless: nothing queued

	// An Extend of a lone ticket wakes the committer too.
	var extended Ticket
	startLone(&extended, "x1")
	if !c.Extend(&extended, append(entry("x1"), entry("x2")...)) {
		t.Fatal("Extend of a ticket nobody took failed")
	}
	if first, last, err := extended.Result(); err != nil || last != first+1 {
		t.Fatalf("extended ticket: %d..%d, %v", first, last, err)
	}

	// Close answers a lone ticket never flushed.
	var forgotten Ticket
	startLone(&forgotten, "forgotten")
	c.Close()
	if !answered(&forgotten) {
		t.Fatal("Close returned with a lone ticket unanswered")
	}
	if _, _, err := forgotten.Result(); err != nil {
		t.Fatal(err)
	}
	if got, want := l.LastIndex(), forgotten.last; got != want {
		t.Fatalf("log ends at %d, want %d", got, want)
	}
}

// TestCommitterWakeAppendsLone: Wake has the committer's goroutine append
// a lone ticket whose caller has not flushed it, and the late Flush of
// that caller finds nothing left to do.
func TestCommitterWakeAppendsLone(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(t, 1<<20))
	c := NewCommitter(l, nil)
	var tk Ticket
	if ok, err := c.StartOwn(&tk, []Entry{{Partition: 1, Type: 1, Payload: []byte("lone")}}); err != nil || !ok {
		t.Fatalf("StartOwn on an idle committer: lone %v, %v", ok, err)
	}
	c.Wake()
	select {
	case <-tk.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Wake left the lone ticket unappended")
	}
	if first, last, err := tk.Result(); err != nil || first != last || last != l.LastIndex() {
		t.Fatalf("lone ticket: %d..%d, %v; log ends at %d", first, last, err, l.LastIndex())
	}
	c.Flush()
	c.Wake() // nothing queued: harmless
	c.Close()
	mustClose(t, l)
}

// TestCommitterLoneCallersAndSyncs: lone callers that start another
// ticket before they flush their first (as CommitMany does), or flush
// late, or let Wake have theirs appended, while Sync runs over and over:
// every ticket is answered, a caller's tickets get increasing indexes in
// the order it started them, and Sync never waits for a lone caller.
func TestCommitterLoneCallersAndSyncs(t *testing.T) {
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
	for w := range callers {
		wg.Go(func() {
			for k := range rounds {
				entry := func(x int) []Entry {
					return []Entry{{Partition: w, Type: 1, Payload: fmt.Appendf(nil, "%d/%d/%d", w, k, x)}}
				}
				var first, second Ticket
				lone, err := c.StartOwn(&first, entry(0))
				if err != nil {
					t.Error(err)
					return
				}
				switch k % 3 {
				case 0: // a second ticket before the flush
					if err := c.Start(&second, entry(1)); err != nil {
						t.Error(err)
						return
					}
				case 1: // somebody else waits for the lone ticket
					c.Wake()
				}
				if lone {
					c.Flush()
				}
				_, last, err := first.Result()
				if err != nil {
					t.Error(err)
					return
				}
				if k%3 == 0 {
					if f2, _, err := second.Result(); err != nil || f2 <= last {
						t.Errorf("caller %d round %d: second ticket at %d (%v), first ends at %d", w, k, f2, err, last)
					}
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("lone callers hang")
	}
	close(stop)
	if err := <-syncs; err != nil {
		t.Fatal(err)
	}
	c.Close()
	mustClose(t, l)
}
