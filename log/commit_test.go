package log

import (
	"fmt"
	"sync"
	"testing"
)

// TestCommitterExtend: callers start tickets and extend them while they
// may be taken at any moment. Each ticket's result covers exactly the
// entries it held when the committer took it (all of them if the last
// Extend succeeded), the log holds every entry of every ticket once, in
// ticket order, and an Extend after Done fails.
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
				if err := c.Start(&tk, entries); err != nil {
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
