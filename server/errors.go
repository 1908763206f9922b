package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/statictopic"
)

// Error codes: the "code" of every error body. They are part of the API,
// for clients to branch on; the "error" text is for people.
const (
	codeMalformedJSON    = "malformed_json"     // 400: not JSON, truncated, trailing data, invalid UTF-8
	codeUnknownField     = "unknown_field"      // 400: a field the request type does not have
	codeWrongType        = "wrong_type"         // 400: a value of the wrong type or out of its type's range
	codeMissingField     = "missing_field"      // 400: a required field is absent or null
	codeInvalidArgument  = "invalid_argument"   // 400: a value the coordinator refuses, a bad query or path
	codeUnauthorized     = "unauthorized"       // 401
	codeNotFound         = "not_found"          // 404
	codeOutOfRange       = "out_of_range"       // 404: an offset that no mapping item holds
	codeMethodNotAllowed = "method_not_allowed" // 405
	codeStaleGeneration  = "stale_generation"   // 409: a commit from an older consumer-group generation
	codeStaleEpoch       = "stale_epoch"        // 409: a mapping with a lower epoch than the stored one
	codeEpochConflict    = "epoch_conflict"     // 409: a mapping with the stored epoch but other content
	codeScopeConflict    = "scope_conflict"     // 409: a static topic name taken in an overlapping scope
	codeSealedHistory    = "sealed_history"     // 409: a change that would rewrite sealed items, or trim items a group reads
	codeTopicExists      = "topic_exists"       // 409: a static topic created again with other brokers
	codeChangePending    = "change_pending"     // 409: a change of a partition's replicas while another is under way
	codeBodyTooLarge     = "body_too_large"     // 413
	codeLoading          = "loading"            // 503: a partition is still replaying its log
	codeWriteFailed      = "write_failed"       // 503: the log write failed; the partition repairs itself
	codeUnavailable      = "unavailable"        // 503: the coordinator is closed or the request was cancelled
	codeNotLeader        = "not_leader"         // 421: another node leads the partition (X-Offsetd-Leader says where)
	codeNoLeader         = "no_leader"          // 503: a cluster node that knows no leader of the partition
	codeNotCommitted     = "not_committed"      // 503: a cluster write lost to a change of leader, certainly not written
	codeOutcomeUnknown   = "outcome_unknown"    // 503: a cluster write whose node lost the lead: maybe written, maybe not
	codeInternal         = "internal"           // 500
	codeNodeRemoved      = "node_removed"       // 410: a cluster node removed from the cluster: it serves nothing
	codeNotAdded         = "not_added"          // 503: a cluster node not yet added to the cluster, or still a learner
)

// retryAfterSeconds is the Retry-After of a 503: partitions load and repair
// in well under a few seconds.
const retryAfterSeconds = "1"

// apiError is an error with its HTTP status and code.
type apiError struct {
	status int
	code   string
	msg    string
	next   *int64 // an out_of_range translation's next valid logic offset
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// classify maps an error of the coordinator or the static-topic model to
// its status and code.
func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	status, code := http.StatusInternalServerError, codeInternal
	switch {
	case errors.Is(err, coordinator.ErrLoading):
		status, code = http.StatusServiceUnavailable, codeLoading
	case errors.Is(err, coordinator.ErrWriteFailed):
		status, code = http.StatusServiceUnavailable, codeWriteFailed
	case errors.Is(err, coordinator.ErrClosed),
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded):
		status, code = http.StatusServiceUnavailable, codeUnavailable
	case errors.Is(err, coordinator.ErrNotCommitted):
		status, code = http.StatusServiceUnavailable, codeNotCommitted
	case errors.Is(err, coordinator.ErrLeadershipLost):
		status, code = http.StatusServiceUnavailable, codeOutcomeUnknown
	case errors.Is(err, coordinator.ErrStaleGeneration):
		status, code = http.StatusConflict, codeStaleGeneration
	case errors.Is(err, statictopic.ErrStaleEpoch):
		status, code = http.StatusConflict, codeStaleEpoch
	case errors.Is(err, statictopic.ErrEpochConflict):
		status, code = http.StatusConflict, codeEpochConflict
	case errors.Is(err, statictopic.ErrScopeConflict):
		status, code = http.StatusConflict, codeScopeConflict
	case errors.Is(err, statictopic.ErrHistory):
		status, code = http.StatusConflict, codeSealedHistory
	case errors.Is(err, statictopic.ErrTopicExists):
		status, code = http.StatusConflict, codeTopicExists
	case errors.Is(err, cluster.ErrChangePending):
		status, code = http.StatusConflict, codeChangePending
	case errors.Is(err, statictopic.ErrOutOfRange):
		status, code = http.StatusNotFound, codeOutOfRange
	case errors.Is(err, coordinator.ErrNotFound), errors.Is(err, statictopic.ErrNotFound):
		status, code = http.StatusNotFound, codeNotFound
	case errors.Is(err, coordinator.ErrInvalid), errors.Is(err, statictopic.ErrInvalid):
		status, code = http.StatusBadRequest, codeInvalidArgument
	}
	e := &apiError{status: status, code: code, msg: err.Error()}
	if next, ok := statictopic.NextLogicOffset(err); ok {
		e.next = &next
	}
	return e
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// NextLogicOffset is, for an out_of_range translation of a logic offset
	// in a gap or before the first item, where the next item begins.
	NextLogicOffset *int64 `json:"nextLogicOffset,omitempty"`
}

// writeError answers with e as JSON; a 503 carries Retry-After.
func writeError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Del("ETag")
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.status == http.StatusServiceUnavailable {
		h.Set("Retry-After", retryAfterSeconds)
	}
	w.WriteHeader(e.status)
	b, _ := json.Marshal(errorBody{Error: e.msg, Code: e.code, NextLogicOffset: e.next})
	w.Write(append(b, '\n'))
}

// fail answers r with err, logging server-side failures.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if s.notLeader(w, err) {
		return
	}
	e := classify(err)
	// Loading is expected at start-up, and a cancelled request is a client
	// that went away: neither is the server's failure.
	if e.status >= 500 && e.code != codeLoading && !errors.Is(err, context.Canceled) {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", e.status, "code", e.code, "err", err)
	}
	writeError(w, e)
}
