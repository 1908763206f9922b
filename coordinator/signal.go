package coordinator

import "sync"

// signal wakes every goroutine waiting for the next event: wait returns a
// channel that fire closes. Long polls use it to learn of changes without
// polling the tables.
type signal struct {
	mu sync.Mutex
	ch chan struct{} // guarded by mu
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}
