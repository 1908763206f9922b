package statictopic

import "errors"

// Sentinel errors. Every error returned by this package wraps exactly one of
// them with the topic, queue, item or field concerned; check them with
// errors.Is, never by matching the message.
var (
	// ErrInvalid reports a mapping, scope, name or argument that breaks a rule.
	ErrInvalid = errors.New("statictopic: invalid")
	// ErrOutOfRange reports an offset that no mapping item holds.
	ErrOutOfRange = errors.New("statictopic: offset out of range")
	// ErrStaleEpoch reports a mapping whose epoch is lower than the stored one.
	ErrStaleEpoch = errors.New("statictopic: stale epoch")
	// ErrEpochConflict reports a mapping with the stored epoch but other content.
	ErrEpochConflict = errors.New("statictopic: epoch conflict")
	// ErrScopeConflict reports a topic name already used in an overlapping scope.
	ErrScopeConflict = errors.New("statictopic: scope conflict")
	// ErrTopicExists reports a create request for a topic that exists with
	// the requested queue count but on other brokers.
	ErrTopicExists = errors.New("statictopic: topic exists with other brokers")
	// ErrNotFound reports a logic queue, physical queue or route that does not exist.
	ErrNotFound = errors.New("statictopic: not found")
)
