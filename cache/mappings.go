package cache

import (
	"sync"

	"github.com/offsetd/offsetd/statictopic"
)

// Mappings is one internal partition's table of static-topic mappings, keyed
// by topic and scope. Stored mappings are shared with readers and must never
// be modified: replace them with Put.
type Mappings struct {
	mu     sync.RWMutex
	topics map[string]map[string]statictopic.Mapping // guarded by mu; topic → scope → mapping
}

// NewMappings returns an empty table.
func NewMappings() *Mappings {
	return &Mappings{topics: make(map[string]map[string]statictopic.Mapping)}
}

// Get returns the mapping of topic in scope (its canonical spelling).
func (t *Mappings) Get(topic, scope string) (statictopic.Mapping, bool) {
	t.mu.RLock()
	m, ok := t.topics[topic][scope]
	t.mu.RUnlock()
	return m, ok
}

// Topic appends the mappings of topic in every scope to dst.
func (t *Mappings) Topic(topic string, dst []statictopic.Mapping) []statictopic.Mapping {
	t.mu.RLock()
	for _, m := range t.topics[topic] {
		dst = append(dst, m)
	}
	t.mu.RUnlock()
	return dst
}

// All appends every mapping in the table to dst.
func (t *Mappings) All(dst []statictopic.Mapping) []statictopic.Mapping {
	t.mu.RLock()
	for _, scopes := range t.topics {
		for _, m := range scopes {
			dst = append(dst, m)
		}
	}
	t.mu.RUnlock()
	return dst
}

// Len returns the number of stored mappings.
func (t *Mappings) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := 0
	for _, scopes := range t.topics {
		n += len(scopes)
	}
	return n
}

// Put stores m as the mapping of its topic and scope, replacing any older one.
// The table keeps m itself: the caller must not modify it afterwards.
func (t *Mappings) Put(m statictopic.Mapping) {
	t.mu.Lock()
	defer t.mu.Unlock()
	scopes := t.topics[m.Topic]
	if scopes == nil {
		scopes = make(map[string]statictopic.Mapping)
		t.topics[m.Topic] = scopes
	}
	scopes[m.Scope] = m
}

// Switches holds the global-read switch of every scope that has one on.
type Switches struct {
	mu sync.RWMutex
	on map[string]bool // guarded by mu
}

// NewSwitches returns a table with every switch off.
func NewSwitches() *Switches {
	return &Switches{on: make(map[string]bool)}
}

// GlobalRead reports whether scope is in global read.
func (s *Switches) GlobalRead(scope string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.on[scope]
}

// SetGlobalRead turns scope's switch on or off.
func (s *Switches) SetGlobalRead(scope string, enabled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if enabled {
		s.on[scope] = true
	} else {
		delete(s.on, scope)
	}
}

// Scopes appends every scope in global read to dst.
func (s *Switches) Scopes(dst []string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for scope := range s.on {
		dst = append(dst, scope)
	}
	return dst
}
