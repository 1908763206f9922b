package coordinator

import sig "github.com/offsetd/offsetd/internal/signal"

// signal wakes every goroutine waiting for the next event: wait returns a
// channel that fire closes. Long polls use it to learn of changes without
// polling the tables.
type signal struct{ s *sig.Signal }

func newSignal() *signal { return &signal{sig.New()} }

func (s *signal) wait() <-chan struct{} { return s.s.Wait() }

func (s *signal) fire() { s.s.Fire() }
