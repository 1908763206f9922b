package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinels an *Error matches with errors.Is, by its status and code.
var (
	// ErrInvalid matches a 400 or 413: bad input, nothing was written.
	ErrInvalid = errors.New("client: invalid request")
	// ErrUnauthorized matches a 401: a missing or wrong token.
	ErrUnauthorized = errors.New("client: unauthorized")
	// ErrNotFound matches a 404: no such group, offset, static topic or
	// route, or an offset no mapping item holds (ErrOutOfRange).
	ErrNotFound = errors.New("client: not found")
	// ErrOutOfRange matches a 404 with code out_of_range: a translation of
	// an offset outside every mapping item's range.
	ErrOutOfRange = errors.New("client: offset out of range")
	// ErrConflict matches a 409: a fenced generation or epoch, a scope
	// conflict, a change that would rewrite sealed static-topic items
	// (ErrSealedHistory).
	ErrConflict = errors.New("client: conflict")
	// ErrStaleGeneration matches a 409 with code stale_generation: the
	// group has seen a commit of a newer generation; this consumer is a
	// zombie from before a rebalance.
	ErrStaleGeneration = errors.New("client: stale generation")
	// ErrSealedHistory matches a 409 with code sealed_history: a put or
	// import that would rewrite or drop sealed items of a static topic, or a
	// trim of items a consumer group still reads. Retry with force to
	// override, knowingly.
	ErrSealedHistory = errors.New("client: sealed static-topic history")
	// ErrUnavailable matches a 503 (loading, repairing after a write
	// failure, shutting down) that outlasted the retries.
	ErrUnavailable = errors.New("client: server unavailable")
)

// Error is an error answer of the server.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the server's error code, such as "not_found" or
	// "stale_generation"; empty if the body was not offsetd's error JSON.
	Code string
	// Message is the server's explanation.
	Message string
	// RetryAfter is the server's Retry-After, if it sent one.
	RetryAfter time.Duration
	// NextLogicOffset is, for an out_of_range translation of a logic offset
	// in a gap between mapping items or before the first, where the next
	// item begins: a consumer can go on from there. Nil otherwise.
	NextLogicOffset *int64
}

// NextLogicOffset returns the next valid logic offset an out_of_range
// translation error carries (the gap rule); ok is false for any other
// error.
func NextLogicOffset(err error) (next int64, ok bool) {
	var e *Error
	if errors.As(err, &e) && e.NextLogicOffset != nil {
		return *e.NextLogicOffset, true
	}
	return 0, false
}

// Error describes the answer.
func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("offsetd: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
	}
	return fmt.Sprintf("offsetd: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is matches the package's sentinels.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrOutOfRange:
		return e.Status == http.StatusNotFound && e.Code == "out_of_range"
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrStaleGeneration:
		return e.Status == http.StatusConflict && e.Code == "stale_generation"
	case ErrSealedHistory:
		return e.Status == http.StatusConflict && e.Code == "sealed_history"
	case ErrChangePending:
		return e.Status == http.StatusConflict && e.Code == "change_pending"
	case ErrNodeRemoved:
		return e.Status == http.StatusGone && e.Code == "node_removed"
	case ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable
	}
	return false
}

func newError(r reply) *Error {
	e := &Error{Status: r.status, RetryAfter: parseRetryAfter(r.retryAfter)}
	var body struct {
		Error           string `json:"error"`
		Code            string `json:"code"`
		NextLogicOffset *int64 `json:"nextLogicOffset"`
	}
	if json.Unmarshal(r.body, &body) == nil && body.Code != "" {
		e.Code, e.Message, e.NextLogicOffset = body.Code, body.Error, body.NextLogicOffset
		return e
	}
	msg := strings.TrimSpace(string(r.body))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	e.Message = msg
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 if neither.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
