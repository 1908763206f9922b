package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/bytebufferpool"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/internal/wire"
)

// MaxCommitsPerRequest bounds the commits of one POST /v1/commits.
const MaxCommitsPerRequest = 4096

// commitsRequest is the body of POST /v1/commits: the commits of several
// groups, each its own atomic write.
type commitsRequest struct {
	Commits []groupCommitRequest `json:"commits"`
}

type groupCommitRequest struct {
	Group *string `json:"group"`
	commitRequest
}

func (req *commitsRequest) commits() ([]coordinator.GroupCommit, *apiError) {
	if req.Commits == nil {
		return nil, missing("commits")
	}
	out := make([]coordinator.GroupCommit, len(req.Commits))
	for i := range req.Commits {
		c := &req.Commits[i]
		if c.Group == nil {
			return nil, missing(fmt.Sprintf("commits[%d].group", i))
		}
		gen, offsets, e := c.offsets()
		if e != nil {
			e.msg = fmt.Sprintf("commits[%d]: %s", i, e.msg)
			return nil, e
		}
		out[i] = coordinator.GroupCommit{Group: *c.Group, Generation: gen, Offsets: offsets}
	}
	return out, nil
}

// decodeCommits reads the body of POST /v1/commits on the fast path; ok is
// false when decodeJSON must judge it (FuzzDecodeCommits).
func decodeCommits(body []byte) (commits []coordinator.GroupCommit, ok bool) {
	d := wire.NewDecoder(body)
	var names wire.Names
	var arena []coordinator.OffsetCommit
	seen := false
	d.Open('{')
	for n := 0; d.Next('}', n); n++ {
		if string(d.Key()) != "commits" || seen {
			return nil, false
		}
		seen = true
		// A commit is an object, and so is each of its offsets: one quick
		// count of the braces sizes both slices. With an offset or more
		// each, the commits are at most half the objects (more only grow
		// the slice); neither gets more room than the body can fill.
		objects := bytes.Count(body, []byte{'{'})
		commits = make([]coordinator.GroupCommit, 0, min(objects/2+1, len(body)/minCommitBytes+1))
		arena = make([]coordinator.OffsetCommit, 0, min(objects, len(body)/minOffsetBytes+1))
		d.Open('[')
		for i := 0; d.Next(']', i); i++ {
			gc, ok := decodeGroupCommit(&d, true, &names, &arena)
			if !ok {
				return nil, false
			}
			commits = append(commits, gc)
		}
	}
	if !d.End() || commits == nil {
		return nil, false
	}
	return commits, true
}

// commitMany is POST /v1/commits: the commits of many groups in one
// request, each written and answered alone, as if each came in its own
// POST /v1/groups/{group}/offsets; they share syncs. A body that does not
// decode is refused whole and writes nothing. The answer is 200 with one
// result per commit, in order: {"version":v}, or the error the commit's
// own request would have got, with its status (and, for not_leader, the
// leader's address).
func (s *Server) commitMany(w http.ResponseWriter, r *http.Request) {
	body, e := s.readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	defer bytebufferpool.Put(body) // the commits hold copies of its strings
	commits, ok := decodeCommits(body.B)
	if !ok {
		var req commitsRequest
		if e := decodeJSON(body.B, &req); e != nil {
			writeError(w, e)
			return
		}
		if commits, e = req.commits(); e != nil {
			writeError(w, e)
			return
		}
	}
	if len(commits) > MaxCommitsPerRequest {
		writeError(w, errorf(http.StatusBadRequest, codeInvalidArgument, "%d commits in one request, at most %d", len(commits), MaxCommitsPerRequest))
		return
	}
	start := time.Now()
	results := s.commitEach(r.Context(), commits)
	took := time.Since(start)
	out := bytebufferpool.Get()
	defer bytebufferpool.Put(out)
	out.B = append(out.B, `{"results":[`...)
	done := 0
	for i, res := range results {
		if i > 0 {
			out.B = append(out.B, ',')
		}
		if res.Err == nil {
			done++
			out.B = wire.AppendVersion(out.B, res.Version)
			continue
		}
		s.metrics.commitDone(took, res.Err)
		e, leader := s.commitError(res.Err)
		if e.status >= 500 && e.code != codeLoading && !errors.Is(res.Err, context.Canceled) {
			s.log.Error("commit failed", "path", r.URL.Path, "group", commits[i].Group, "status", e.status, "code", e.code, "err", res.Err)
		}
		out.B = appendCommitError(out.B, e, leader)
	}
	out.B = append(out.B, "]}"...)
	s.metrics.commitsDone(took, done)
	writeBody(w, http.StatusOK, out.B)
}

// commitEach commits each of commits alone but a group named "." or "..",
// which has no path of its own in this API (a path with a dot segment is
// refused): refusing it here too answers a commit alike in a batch and
// alone.
func (s *Server) commitEach(ctx context.Context, commits []coordinator.GroupCommit) []coordinator.CommitResult {
	dot := func(group string) bool { return group == "." || group == ".." }
	dots := 0
	for _, gc := range commits {
		if dot(gc.Group) {
			dots++
		}
	}
	if dots == 0 {
		return s.c.CommitMany(ctx, commits)
	}
	results := make([]coordinator.CommitResult, len(commits))
	kept := make([]coordinator.GroupCommit, 0, len(commits)-dots)
	at := make([]int, 0, len(commits)-dots) // kept[j] is commits[at[j]]
	for i, gc := range commits {
		if dot(gc.Group) {
			results[i].Err = fmt.Errorf("%w: group %q has no path in the HTTP API", coordinator.ErrInvalid, gc.Group)
			continue
		}
		kept, at = append(kept, gc), append(at, i)
	}
	for j, res := range s.c.CommitMany(ctx, kept) {
		results[at[j]] = res
	}
	return results
}

// commitError is the answer a commit's own request would have got for
// err, and the leader's address when that is a 421.
func (s *Server) commitError(err error) (*apiError, string) {
	if e, addr, ok := s.leaderError(err); ok {
		return e, addr
	}
	return classify(err), ""
}

// appendCommitError appends one failed commit's result:
// {"status":s,"code":c,"error":msg[,"leader":addr]}.
func appendCommitError(dst []byte, e *apiError, leader string) []byte {
	dst = append(dst, `{"status":`...)
	dst = strconv.AppendInt(dst, int64(e.status), 10)
	dst = append(dst, `,"code":`...)
	dst = wire.AppendString(dst, e.code)
	dst = append(dst, `,"error":`...)
	dst = wire.AppendString(dst, e.msg)
	if leader != "" {
		dst = append(dst, `,"leader":`...)
		dst = wire.AppendString(dst, leader)
	}
	return append(dst, '}')
}
