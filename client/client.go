package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/bytebufferpool"
)

// Options configures a Client. The zero value works.
type Options struct {
	// HTTPClient sends the requests. Nil means the package's own
	// transport: on Unix, for an http:// server reached without a proxy, a
	// lean HTTP/1.1 client that keeps MaxIdleConns idle keep-alive
	// connections and allocates next to nothing per call; for an https://
	// server, when http.ProxyFromEnvironment names a proxy, or on other
	// systems, net/http's transport with as many idle connections.
	// Neither has an overall timeout (contexts bound calls, and long polls
	// need to outlast their wait). A caller's HTTPClient is used as it is:
	// MaxIdleConns does not apply to it.
	HTTPClient *http.Client
	// MaxIdleConns is how many idle keep-alive connections to the server
	// the package's own transport keeps between calls. Set it to the most
	// goroutines that call the Client at once: a call that finds no idle
	// connection dials a new one, and one that finds the pool full closes
	// the connection idle longest after the answer (Go's default transport
	// keeps 2 per host, so a Client shared by 64 goroutines would dial on
	// most calls). A connection idle for 90 seconds is closed. Zero means
	// DefaultMaxIdleConns; a negative value keeps none.
	MaxIdleConns int
	// Token, when not empty, is sent as "Authorization: Bearer <Token>".
	Token string
	// Retries is how many times a 503 is retried. Zero means 3; a
	// negative value means never.
	Retries int
	// MaxRetryWait bounds one wait between retries, whatever Retry-After
	// says. Zero means 5s.
	MaxRetryWait time.Duration
	// MaxCommitRequests bounds the requests carrying commits that the
	// Client has in flight at once. A Commit made while none is in
	// flight is sent at once, alone; one made while some are joins the
	// commits that wait, sent together as one POST /v1/commits at once
	// if fewer than MaxCommitRequests are in flight, else when one comes
	// back. Each commit stays its own atomic write with its own answer;
	// under load, many share a request's round trip. Zero means
	// DefaultMaxCommitRequests; a negative value sends every commit in
	// its own request, as servers before /v1/commits need (the Client
	// also falls back by itself when the server does not know the path).
	MaxCommitRequests int
}

// DefaultMaxIdleConns is the idle connections a Client's own transport
// keeps when Options.MaxIdleConns is zero: enough for 64 goroutines calling
// at once.
const DefaultMaxIdleConns = 64

// Client talks to one offsetd server. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	prefix  string // scheme://host and the base path, escaped: every target starts with it
	http    *http.Client
	lean    *leanTransport // nil when every request goes through http
	token   string
	auth    string // "Bearer " + token, when token is not empty
	retries int
	maxWait time.Duration
	batch   *batcher // nil when every commit goes alone
	// replies holds the buffers responses are read into. It is the
	// Client's own: a pool learns the sizes it is asked for and drops
	// buffers much larger than most, so one shared with other Clients or
	// the rest of the process (a server's small buffers, a Client of point
	// fetches) would have every answer of a group's offsets read into a
	// fresh buffer.
	replies bytebufferpool.Pool
}

// New returns a client of the server at baseURL: "http://host:port",
// "https://host:port", or "host:port" for plain HTTP. A path in baseURL
// prefixes every route, for servers behind a proxy.
func New(baseURL string, opts Options) (*Client, error) {
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http://host:port or https://host:port", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: base URL %q has a query or fragment", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	c := &Client{base: u, prefix: u.String(), http: opts.HTTPClient, token: opts.Token, retries: opts.Retries, maxWait: opts.MaxRetryWait}
	if c.token != "" {
		c.auth = "Bearer " + c.token
	}
	if c.http == nil {
		c.http = &http.Client{Transport: newTransport(opts.MaxIdleConns)}
		// net/http sends the user information of a URL as Basic auth.
		if leanSupported && u.Scheme == "http" && u.User == nil && !proxied(u) && validHeaderValue(c.auth) {
			c.lean = newLeanTransport(idleConns(opts.MaxIdleConns))
		}
	}
	switch {
	case c.retries == 0:
		c.retries = 3
	case c.retries < 0:
		c.retries = 0
	}
	if c.maxWait <= 0 {
		c.maxWait = 5 * time.Second
	}
	switch {
	case opts.MaxCommitRequests == 0:
		c.batch = &batcher{max: DefaultMaxCommitRequests}
	case opts.MaxCommitRequests > 0:
		c.batch = &batcher{max: opts.MaxCommitRequests}
	}
	return c, nil
}

// newTransport returns Go's default transport with room for idle
// connections to the one host a Client talks to.
func newTransport(idle int) *http.Transport {
	idle = idleConns(idle)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = idle
	t.MaxIdleConnsPerHost = idle
	if idle == 0 {
		t.DisableKeepAlives = true
	}
	return t
}

// pathSegments are the segments of a call's path, held in the call: a
// slice would be allocated at every call, since the call's strings reach
// the heap (in errors, in net/http's request).
type pathSegments struct {
	s [maxSegments]string
	n int
}

// maxSegments is the most segments a path of the API has:
// /v1/groups/{group}/offsets/{topic}/{partition}.
const maxSegments = 6

// segments returns the path of the given segments.
func segments(segs ...string) pathSegments {
	if len(segs) > maxSegments {
		panic("client: a path of more than maxSegments segments")
	}
	var p pathSegments
	p.n = copy(p.s[:], segs)
	return p
}

// list returns the segments.
func (p *pathSegments) list() []string { return p.s[:p.n] }

// idleConns returns the idle connections Options.MaxIdleConns asks for.
func idleConns(opt int) int {
	switch {
	case opt == 0:
		return DefaultMaxIdleConns
	case opt < 0:
		return 0
	}
	return opt
}

// call describes one API request.
type call struct {
	method string
	path   pathSegments // escaped by do
	query  url.Values
	body   any // marshalled to JSON when not nil
	// encoded, if not nil, is the body already encoded (instead of body).
	encoded []byte
	// lent says that encoded is only lent to the call: it goes back to a
	// pool once do returns. The lean transport is done with a body when
	// its round trip returns; net/http may still read one after Do
	// returned, so it is given a copy.
	lent   bool
	ifNone string // If-None-Match, for polls
	// host, if not empty, is the host:port to send to first instead of
	// the base URL's: the leader a cluster node named.
	host string
	// etag asks for the answer's ETag.
	etag bool
}

// reply is a response read whole. Its body may sit in a pooled buffer:
// release puts it back, once nothing refers to the body's bytes (a reply
// not released is only garbage).
type reply struct {
	status     int
	retryAfter string // the Retry-After header
	leader     string // the leader header of a 421
	etag       string // the ETag, if the call asked for it
	body       []byte
	buf        *bytebufferpool.ByteBuffer
	pool       *bytebufferpool.Pool // where buf goes back
}

func (r reply) release() {
	if r.buf != nil {
		r.pool.Put(r.buf)
	}
}

// do sends c, retrying a 503, and returns a 2xx or 304 reply, or the
// server's error as an *Error.
func (c *Client) do(ctx context.Context, req call) (reply, error) {
	if err := checkUTF8(req); err != nil {
		return reply{}, err
	}
	body := req.encoded
	if body == nil && req.body != nil {
		var err error
		if body, err = json.Marshal(req.body); err != nil {
			return reply{}, fmt.Errorf("client: encoding request: %w", err)
		}
	}
	target := c.target(req)
	first, redirects := target, 0
	if req.host != "" {
		target = withHost(target, req.host)
		redirects = 1 // as if followed: out of reach, ask the first node
	}
	for attempt := 0; ; attempt++ {
		rep, err := c.send(ctx, req, target, body)
		var retry error
		var wait time.Duration
		switch {
		case err != nil && redirects == 0:
			return reply{}, err
		case err != nil:
			// The leader a node named is out of reach (it may just have
			// gone): ask the first node again after a pause, as for a 503.
			retry = err
			target, redirects = first, 0
		case rep.status < 300 || rep.status == http.StatusNotModified:
			return rep, nil
		default:
			if to, ok := leaderTarget(rep, target); ok && redirects < maxRedirects {
				// A node of a cluster that does not lead the partition: the
				// request goes to the leader it names, not counted as a retry.
				rep.release()
				target = to
				redirects++
				attempt--
				continue
			}
			apiErr := newError(rep)
			rep.release()
			if rep.status != http.StatusServiceUnavailable {
				return reply{}, apiErr
			}
			retry, wait = apiErr, apiErr.RetryAfter
		}
		if attempt >= c.retries {
			return reply{}, retry
		}
		if wait <= 0 {
			// 100ms, doubling with each attempt; the shift stops long
			// before it would overflow (and wrap to no wait at all).
			wait = 100 * time.Millisecond << min(attempt, 20)
		}
		timer := time.NewTimer(min(wait, c.maxWait))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return reply{}, fmt.Errorf("%w (while waiting to retry: %w)", retry, ctx.Err())
		}
	}
}

// target returns the URL of req: the base, the escaped path segments and
// the query.
func (c *Client) target(req call) string {
	var b strings.Builder
	n := len(c.prefix)
	for _, seg := range req.path.list() {
		n += 1 + len(seg)
	}
	b.Grow(n + 8)
	b.WriteString(c.prefix)
	for _, seg := range req.path.list() {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(seg))
	}
	if q := req.query.Encode(); q != "" {
		b.WriteByte('?')
		b.WriteString(q)
	}
	return b.String()
}

// Header values every request shares: the transport copies or only reads
// a request's header, never changes its values.
var (
	acceptJSON  = []string{"application/json"}
	contentJSON = []string{"application/json"}
)

// send makes one attempt at req.
func (c *Client) send(ctx context.Context, req call, target string, body []byte) (reply, error) {
	if c.lean != nil && len(body) <= maxLeanBody && validHeaderValue(req.ifNone) {
		if host, uri, ok := leanTarget(target, c.base.Host); ok {
			return c.sendLean(ctx, req, target, host, uri, body)
		}
	}
	// A *bytes.Reader body is one the transport knows to be in memory: it
	// writes it with the header, in one write, and may read it after Do
	// returns, so it cannot come from a pool.
	var rd io.Reader
	if body != nil {
		if req.lent {
			body = bytes.Clone(body)
		}
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, target, rd)
	if err != nil {
		return reply{}, fmt.Errorf("client: %w", err)
	}
	if body != nil {
		hr.Header["Content-Type"] = contentJSON
	}
	hr.Header["Accept"] = acceptJSON
	if c.auth != "" {
		hr.Header["Authorization"] = []string{c.auth}
	}
	if req.ifNone != "" {
		hr.Header["If-None-Match"] = []string{req.ifNone}
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return reply{}, fmt.Errorf("client: %s %s: %w", req.method, target, err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > maxResponseBytes {
		return reply{}, fmt.Errorf("client: %s %s: a response of %d bytes, over the %d this client reads", req.method, target, resp.ContentLength, maxResponseBytes)
	}
	var from io.Reader = resp.Body
	if resp.ContentLength < 0 {
		from = io.LimitReader(resp.Body, maxResponseBytes)
	}
	buf := c.replies.Get()
	if _, err := buf.ReadFrom(from); err != nil {
		c.replies.Put(buf)
		return reply{}, fmt.Errorf("client: %s %s: reading response: %w", req.method, target, err)
	}
	rep := reply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), leader: resp.Header.Get(leaderHeader), body: buf.B, buf: buf, pool: &c.replies}
	if req.etag {
		rep.etag = resp.Header.Get("ETag")
	}
	return rep, nil
}

// maxLeanBody bounds the request bodies the lean transport sends. It
// writes a body whole before it reads the answer; a server that answers
// early (413 to a body over its limit) and closes may reset a connection
// whose body is still being written, and the answer is lost. net/http,
// which reads while it writes, sends the larger ones (large batches of
// commits, static-topic imports), whose cost is shared anyway.
const maxLeanBody = 64 << 10

// sendLean makes one attempt at req through the lean transport.
func (c *Client) sendLean(ctx context.Context, req call, target, host, uri string, body []byte) (reply, error) {
	lr := leanRequest{method: req.method, host: host, uri: uri, auth: c.auth, ifNone: req.ifNone, body: body, etag: req.etag}
	buf := c.replies.Get()
	h, err := c.lean.roundTrip(ctx, &lr, buf)
	if err != nil {
		c.replies.Put(buf)
		return reply{}, fmt.Errorf("client: %s %s: %w", req.method, target, err)
	}
	return reply{status: h.status, retryAfter: h.retryAfter, leader: h.leader, etag: h.etag, body: buf.B, buf: buf, pool: &c.replies}, nil
}

// maxResponseBytes bounds what the client reads of one response; a list of
// every static topic is the largest answer.
const maxResponseBytes = 256 << 20

// decode unmarshals a reply's body into v.
func (r reply) decode(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("client: decoding response (status %d): %w", r.status, err)
	}
	return nil
}

// etag is the ETag a server sends for a numeric version.
func etag(version string) string { return strconv.Quote(version) }

// CloseIdleConnections closes the connections the client keeps open
// between calls; the Client stays usable. A short-lived program calls it
// before exiting so that the server need not wait for them.
func (c *Client) CloseIdleConnections() {
	c.http.CloseIdleConnections()
	if c.lean != nil {
		c.lean.closeIdle()
	}
}
