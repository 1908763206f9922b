package coordinator

import (
	"context"
	"testing"
	"time"
)

// snapshotSignal is an Observer that signals every snapshot a partition
// finishes, for settleSnapshots.
type snapshotSignal chan struct{}

func (s snapshotSignal) ObserveAppend(int, int, int, time.Duration, error) {}
func (s snapshotSignal) ObserveLoad(int, int, time.Duration)               {}
func (s snapshotSignal) ObserveTruncate(time.Duration, error)              {}
func (s snapshotSignal) ObserveExpire(int, int)                            {}
func (s snapshotSignal) ObserveSnapshot(int, int64, time.Duration, error) {
	select {
	case s <- struct{}{}:
	default: // a signal waits already
	}
}

// watchSnapshots makes opts tell the returned channel of every snapshot
// a partition finishes.
func watchSnapshots(opts *Options) <-chan struct{} {
	s := make(snapshotSignal, 1)
	opts.Observer = s
	return s
}

// settleSnapshots waits until no partition runs a snapshot or waits for
// SnapshotInterval to let one go, the end of each snapshot signalled on
// finished (watchSnapshots); it fails after within.
func (c *Coordinator) settleSnapshots(t testing.TB, finished <-chan struct{}, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		pending := false
		for _, p := range c.parts {
			_, err := c.submit(context.Background(), p, &request{control: func(p *partition) {
				pending = pending || p.snapshotting || p.snapTimer != nil
			}})
			if err != nil {
				t.Fatal(err)
			}
		}
		if !pending {
			return
		}
		select {
		case <-finished:
		case <-deadline:
			t.Fatalf("a snapshot still runs or waits after %v", within)
		}
	}
}

// waitSnapshots waits, on each partition's writer's goroutine, until no
// snapshot is running: it finishes a running one as the writer loop would
// (truncation included), and the one its end may start. No commit runs
// meanwhile, so the data directory holds no file about to be renamed or
// removed until the next commit. It returns the size of each partition's
// newest snapshot (0 if none), which only the writer may read.
func (c *Coordinator) waitSnapshots(t testing.TB) []int64 {
	t.Helper()
	sizes := make([]int64, len(c.parts))
	for i, p := range c.parts {
		_, err := c.submit(context.Background(), p, &request{control: func(p *partition) {
			for p.snapshotting {
				p.finishSnapshot(<-p.snapDone, c.stop)
			}
			sizes[i] = p.lastSnapSize
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return sizes
}

// wrapJournal replaces the journal of every partition by what wrap makes
// of it, under the local writer's lock.
func (c *Coordinator) wrapJournal(wrap func(journal) journal) {
	for _, p := range c.parts {
		w := p.w.(*localWriter)
		w.mu.lock()
		p.journal = wrap(p.journal)
		w.mu.unlock()
	}
}
