// Package signal wakes every goroutine waiting for the next event, without
// a lost wake-up: a waiter takes the channel, checks its condition, then
// blocks on the channel, which the next Fire closes.
//
//	s := signal.New()
//	for { ch := s.Wait(); if done() { break }; <-ch }   // a waiter
//	s.Fire()                                            // after each change
package signal

import "sync"

// Signal is one event source; its zero value is not usable, New makes one.
type Signal struct {
	mu sync.Mutex
	ch chan struct{} // guarded by mu
}

// New returns a Signal.
func New() *Signal { return &Signal{ch: make(chan struct{})} }

// Wait returns the channel the next Fire closes.
func (s *Signal) Wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// Fire wakes everyone waiting on a channel Wait returned.
func (s *Signal) Fire() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}
