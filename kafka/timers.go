package kafka

import (
	"container/heap"
	"sync"
	"time"
)

// timers runs deadline callbacks (session, rebalance and sync timeouts) from
// one goroutine and one heap, so that a thousand members cost a thousand
// heap entries, not a thousand goroutines or runtime timers.
type timers struct {
	mu      sync.Mutex
	pending timerHeap // guarded by mu
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// timer is one scheduled callback. A stopped timer stays out of the heap;
// a callback that already started cannot be recalled, so callbacks check
// that what they act on is still current.
type timer struct {
	at    time.Time
	fn    func()
	index int // in the heap, -1 once popped or stopped
}

func newTimers() *timers {
	t := &timers{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go t.run()
	return t
}

// after schedules fn to run once d has passed.
func (t *timers) after(d time.Duration, fn func()) *timer {
	tm := &timer{at: time.Now().Add(d), fn: fn}
	t.mu.Lock()
	heap.Push(&t.pending, tm)
	first := tm.index == 0
	t.mu.Unlock()
	if first {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	return tm
}

// cancel stops tm if it has not fired. A nil tm is fine.
func (t *timers) cancel(tm *timer) {
	if tm == nil {
		return
	}
	t.mu.Lock()
	if tm.index >= 0 {
		heap.Remove(&t.pending, tm.index)
	}
	t.mu.Unlock()
}

// close stops the goroutine; callbacks not yet run never run.
func (t *timers) close() {
	close(t.stop)
	<-t.done
}

func (t *timers) run() {
	defer close(t.done)
	clock := time.NewTimer(time.Hour)
	defer clock.Stop()
	for {
		t.mu.Lock()
		var due *timer
		wait := time.Hour
		if len(t.pending) > 0 {
			next := t.pending[0]
			if d := time.Until(next.at); d <= 0 {
				due = heap.Pop(&t.pending).(*timer)
			} else {
				wait = d
			}
		}
		t.mu.Unlock()
		if due != nil {
			due.fn()
			continue
		}
		clock.Reset(wait)
		select {
		case <-clock.C:
		case <-t.wake:
		case <-t.stop:
			return
		}
	}
}

// timerHeap orders timers by deadline.
type timerHeap []*timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	tm := x.(*timer)
	tm.index = len(*h)
	*h = append(*h, tm)
}
func (h *timerHeap) Pop() any {
	old := *h
	tm := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	tm.index = -1
	return tm
}
