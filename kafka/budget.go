package kafka

import (
	"errors"
	"net"
	"sync"
	"time"
)

// errNoBudget is the wait for queued-frame memory running out of time.
var errNoBudget = errors.New("kafka: no memory for queued frames")

// budget is memory shared by every connection's large frames
// (ServerOptions.MaxQueuedBytes, Kafka's queued.max.request.bytes). A
// connection that finds too little waits, without reading, for another to
// give some back. A nil budget is unbounded.
type budget struct {
	total   int64
	mu      sync.Mutex
	free    int64         // guarded by mu
	waiters int           // guarded by mu
	given   chan struct{} // guarded by mu; closed and replaced when bytes come back to waiters
}

func newBudget(bytes int64) *budget {
	return &budget{total: bytes, free: bytes, given: make(chan struct{})}
}

// take takes n bytes, waiting for them until deadline (errNoBudget) or
// until done is closed (net.ErrClosed).
func (b *budget) take(n int64, deadline time.Time, done <-chan struct{}) error {
	if b == nil || n == 0 {
		return nil
	}
	var timer *time.Timer
	b.mu.Lock()
	for b.free < n {
		given := b.given
		b.waiters++
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
			defer timer.Stop()
		}
		var err error
		select {
		case <-given:
		case <-timer.C:
			err = errNoBudget
		case <-done:
			err = net.ErrClosed
		}
		b.mu.Lock()
		b.waiters--
		if err == nil && !time.Now().Before(deadline) {
			err = errNoBudget // bytes came back as time ran out: take none
		}
		if err != nil {
			b.mu.Unlock()
			return err
		}
	}
	b.free -= n
	b.mu.Unlock()
	return nil
}

// give returns n bytes and wakes the connections waiting for some.
func (b *budget) give(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	if b.waiters > 0 {
		close(b.given)
		b.given = make(chan struct{})
	}
	b.mu.Unlock()
}

// state reports the bytes taken and the connections waiting for more.
func (b *budget) state() (taken int64, waiters int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - b.free, b.waiters
}
