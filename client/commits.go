package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/valyala/bytebufferpool"

	"github.com/offsetd/offsetd/internal/wire"
)

// DefaultMaxCommitRequests is how many requests carrying commits a Client
// has in flight at once when Options.MaxCommitRequests is zero.
const DefaultMaxCommitRequests = 2

// maxBatchBytes bounds the body of one batch of commits, well below the
// server's default limit on a body (1 MiB); a commit larger than it is a
// batch of its own.
const maxBatchBytes = 256 << 10

// maxBatchCommits bounds the commits of one batch (the server takes at
// most server.MaxCommitsPerRequest).
const maxBatchCommits = 1024

// batcher gathers the commits of a Client's concurrent callers into
// batches, POST /v1/commits, with at most max requests carrying commits in
// flight: a commit made while none is goes at once in its own request; one
// made while some are joins the queue, sent as one batch at once if fewer
// than max are in flight, else with every other that waited when one comes
// back. Under load a request then carries many commits, and its cost (a
// round trip, the server's HTTP handling) is shared, as an fsync is shared
// on the server. Each commit stays its own atomic write, answered alone.
type batcher struct {
	max int

	mu       sync.Mutex
	queue    []*pendingCommit // guarded by mu
	inflight int              // flushing goroutines; guarded by mu
	// onQueue, if set (by tests), is told the queue's length each time a
	// commit joins it; guarded by mu.
	onQueue func(n int)

	// off is set once a server answered that it has no /v1/commits (an
	// older release): every commit then goes in its own request.
	off atomic.Bool

	// bodies holds the buffers commits are encoded in while they wait:
	// a buffer goes back once its commit is copied into a batch's body,
	// or dropped. batches holds the bodies of batches, lent to their
	// requests.
	bodies, batches bytebufferpool.Pool
}

// pendingCommit is one Commit call waiting for its batch.
type pendingCommit struct {
	// body is the commit as one element of the batch's "commits", from
	// batcher.bodies; whoever takes the commit off the queue puts it back.
	body  *bytebufferpool.ByteBuffer
	done  chan commitOutcome
	batch *commitBatch // the batch that carries it, once taken; guarded by batcher.mu
}

// pendingCommits holds pendingCommits, each with its done channel, for
// reuse: one goes back only once its caller has read its outcome, when
// nothing refers to it any more. One whose caller gave up is left to the
// garbage collector, as a batch may still answer it.
var pendingCommits = sync.Pool{New: func() any {
	return &pendingCommit{done: make(chan commitOutcome, 1)}
}}

// commitBatch is one request in flight: it is cancelled when every caller
// whose commit it carries has given up.
type commitBatch struct {
	live   int // callers still waiting; guarded by batcher.mu
	cancel context.CancelFunc
}

// commitOutcome is what a batch tells one of its callers: the version, the
// server's error, or alone: send the commit in its own request, which
// follows a 421 to the leader and retries a 503 as every call does.
type commitOutcome struct {
	version uint64
	err     error
	alone   bool
	leader  string // with alone, the host:port of the leader a 421 named
}

// claim takes a place among the requests in flight for a commit sent
// alone, if none is in flight: a commit made while the Client is idle goes
// at once, in its own request, as without batching. One made while it is
// busy goes in a batch, even with a place free: the callers a batch has
// just answered commit again within microseconds, and a place given to the
// first of them alone would carry one commit for a whole round trip (in
// a CPU-bound run, half the requests did) while the others wait. release
// gives the place back.
func (b *batcher) claim() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inflight > 0 || len(b.queue) > 0 {
		return false
	}
	b.inflight++
	return true
}

// release gives back a place claim took, to a goroutine that sends the
// commits that queued meanwhile, if any did.
func (b *batcher) release(c *Client) {
	b.mu.Lock()
	flush := len(b.queue) > 0
	if !flush {
		b.inflight--
	}
	b.mu.Unlock()
	if flush {
		go b.flush(c)
	}
}

// commit sends one commit with others and returns its outcome; alone says
// the caller must send it in its own request (to leader, if not empty).
func (b *batcher) commit(ctx context.Context, c *Client, group string, generation int32, offsets []OffsetCommit) (commitOutcome, error) {
	p := pendingCommits.Get().(*pendingCommit)
	p.body = b.bodies.Get()
	p.body.B = appendBatchCommit(p.body.B, group, generation, offsets)
	b.mu.Lock()
	b.queue = append(b.queue, p)
	if b.onQueue != nil {
		b.onQueue(len(b.queue))
	}
	start := b.inflight < b.max
	if start {
		b.inflight++
	}
	b.mu.Unlock()
	if start {
		go b.flush(c)
	}
	select {
	case o := <-p.done:
		p.batch = nil
		pendingCommits.Put(p)
		return o, o.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if i := slices.Index(b.queue, p); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1) // never sent
		b.bodies.Put(p.body)
		p.body = nil
	} else if p.batch != nil {
		// Sent, maybe written: the request goes on for the others in it.
		if p.batch.live--; p.batch.live == 0 {
			p.batch.cancel()
		}
	}
	b.mu.Unlock()
	return commitOutcome{}, ctx.Err()
}

// flush sends the queued commits as batches until none is left.
func (b *batcher) flush(c *Client) {
	for {
		b.gather()
		b.mu.Lock()
		n, size := 0, 0
		for n < len(b.queue) && n < maxBatchCommits && (n == 0 || size+b.queue[n].body.Len() <= maxBatchBytes) {
			size += b.queue[n].body.Len() + 1
			n++
		}
		if n == 0 {
			b.inflight--
			b.mu.Unlock()
			return
		}
		batch := slices.Clone(b.queue[:n])
		b.queue = slices.Delete(b.queue, 0, n)
		ctx, cancel := context.WithCancel(context.Background())
		cb := &commitBatch{live: n, cancel: cancel}
		for _, p := range batch {
			p.batch = cb
		}
		b.mu.Unlock()
		b.send(ctx, c, batch, size)
		cancel()
	}
}

// gather yields while the queue keeps growing, a few times at most, before
// a batch is taken: callers answered by the last batch queue their next
// commits within microseconds, and join this batch instead of waiting a
// whole round trip more.
func (b *batcher) gather() {
	b.mu.Lock()
	n := len(b.queue)
	b.mu.Unlock()
	for range maxGatherYields {
		runtime.Gosched()
		b.mu.Lock()
		grew := len(b.queue) > n
		n = len(b.queue)
		b.mu.Unlock()
		if !grew {
			return
		}
	}
}

// maxGatherYields bounds gather's yields.
const maxGatherYields = 8

// send sends one batch and answers each of its commits. A caller may
// take its commit back from the pool once answered: the answer is the
// last thing send does with it.
func (b *batcher) send(ctx context.Context, c *Client, batch []*pendingCommit, size int) {
	buf := b.batches.Get()
	defer b.batches.Put(buf)
	body := slices.Grow(buf.B[:0], size+len(`{"commits":[]}`))
	body = append(body, `{"commits":[`...)
	for i, p := range batch {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, p.body.B...)
		b.bodies.Put(p.body)
		p.body = nil
	}
	body = append(body, "]}"...)
	buf.B = body
	rep, err := c.do(ctx, call{method: http.MethodPost, path: segments("v1", "commits"), encoded: body, lent: true})
	var results []commitOutcome
	if err == nil {
		results, err = decodeCommitResults(rep.body, len(batch))
		rep.release()
		if err == nil && len(results) != len(batch) {
			err = fmt.Errorf("client: %d results for a batch of %d commits", len(results), len(batch))
		}
	}
	var apiErr *Error
	if errors.As(err, &apiErr) {
		switch apiErr.Status {
		case http.StatusNotFound, http.StatusMethodNotAllowed:
			// A server without /v1/commits: every commit alone from now.
			b.off.Store(true)
			err, results = nil, make([]commitOutcome, len(batch))
			for i := range results {
				results[i].alone = true
			}
		case http.StatusRequestEntityTooLarge:
			err, results = nil, make([]commitOutcome, len(batch))
			for i := range results {
				results[i].alone = true
			}
		}
	}
	for i, p := range batch {
		if err != nil {
			p.done <- commitOutcome{err: err}
			continue
		}
		p.done <- results[i]
	}
}

// appendBatchCommit appends one commit as an element of a batch's
// "commits".
func appendBatchCommit(dst []byte, group string, generation int32, offsets []OffsetCommit) []byte {
	dst = wire.AppendGroupCommitStart(dst, group, generation)
	for i, o := range offsets {
		dst = wire.AppendCommitOffset(dst, i == 0, o.Topic, o.Partition, o.Offset, o.LeaderEpoch, o.Metadata)
	}
	return wire.AppendCommitEnd(dst)
}

// decodeCommitResults reads the answer to POST /v1/commits: per commit,
// its version, or its error as its own request would have got it. A 421
// or a 503 asks for the commit to be sent alone. n is how many results
// the answer should hold.
func decodeCommitResults(body []byte, n int) ([]commitOutcome, error) {
	if results, ok := decodeVersions(body, n); ok {
		return results, nil
	}
	var out struct {
		Results []struct {
			Version *uint64 `json:"version"`
			Status  int     `json:"status"`
			Code    string  `json:"code"`
			Error   string  `json:"error"`
			Leader  string  `json:"leader"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("client: decoding the results of a batch of commits: %w", err)
	}
	results := make([]commitOutcome, len(out.Results))
	for i, r := range out.Results {
		switch {
		case r.Version != nil:
			results[i].version = *r.Version
		case r.Status == http.StatusMisdirectedRequest || r.Status == http.StatusServiceUnavailable:
			results[i].alone, results[i].leader = true, r.Leader
		case r.Status != 0:
			results[i].err = &Error{Status: r.Status, Code: r.Code, Message: r.Error}
		default:
			return nil, fmt.Errorf("client: result %d of a batch of commits has neither a version nor a status", i)
		}
	}
	return results, nil
}

// decodeVersions reads on the fast path an answer whose every result is a
// version; ok is false for any other. n is how many it should hold.
func decodeVersions(body []byte, n int) (results []commitOutcome, ok bool) {
	d := wire.NewDecoder(body)
	d.Open('{')
	for k := 0; d.Next('}', k); k++ {
		if string(d.Key()) != "results" || results != nil {
			return nil, false
		}
		results = make([]commitOutcome, 0, n)
		d.Open('[')
		for i := 0; d.Next(']', i); i++ {
			var o commitOutcome
			seen := false
			d.Open('{')
			for k := 0; d.Next('}', k); k++ {
				if string(d.Key()) != "version" || seen {
					return nil, false
				}
				seen = true
				o.version = d.Uint()
			}
			if !seen {
				return nil, false
			}
			results = append(results, o)
		}
	}
	return results, d.End() && results != nil
}
