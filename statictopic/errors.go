package statictopic

import (
	"errors"
	"fmt"
)

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
	// ErrHistory reports a change that would rewrite or drop a sealed item,
	// or reuse a trimmed item's physical queue (CheckHistory), or a trim
	// that would drop items a consumer group still reads.
	ErrHistory = errors.New("statictopic: sealed history")
	// ErrTopicExists reports a create request for a topic that exists with
	// the requested queue count but on other brokers.
	ErrTopicExists = errors.New("statictopic: topic exists with other brokers")
	// ErrNotFound reports a logic queue, physical queue or route that does not exist.
	ErrNotFound = errors.New("statictopic: not found")
)

// GapError is the ErrOutOfRange of a logic offset that no item holds while a
// later item of the same logic queue does: the offset lies before the first
// item (older items were trimmed), in the gap between two items (the block
// round-up of a remap), or is negative. Next is the LogicOffset of that later
// item, the next logic offset that holds messages: a consumer at the offset
// can move on to Next without missing any.
type GapError struct {
	// Next is the next valid logic offset of the queue.
	Next int64
	err  error
}

// Error describes the offset and the next valid one.
func (e *GapError) Error() string {
	return fmt.Sprintf("%v; next valid logic offset %d", e.err, e.Next)
}

// Unwrap returns the ErrOutOfRange the error wraps.
func (e *GapError) Unwrap() error { return e.err }

// NextLogicOffset returns the next valid logic offset carried by err, a
// GapError or an error wrapping one; ok is false for any other error.
func NextLogicOffset(err error) (next int64, ok bool) {
	var g *GapError
	if errors.As(err, &g) {
		return g.Next, true
	}
	return 0, false
}
