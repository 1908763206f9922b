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
)

// Options configures a Client. The zero value works.
type Options struct {
	// HTTPClient sends the requests. Nil means a client of the package's
	// own, without an overall timeout: contexts bound calls, and long polls
	// need to outlast their wait.
	HTTPClient *http.Client
	// Token, when not empty, is sent as "Authorization: Bearer <Token>".
	Token string
	// Retries is how many times a 503 is retried. Zero means 3; a
	// negative value means never.
	Retries int
	// MaxRetryWait bounds one wait between retries, whatever Retry-After
	// says. Zero means 5s.
	MaxRetryWait time.Duration
}

// Client talks to one offsetd server. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	http    *http.Client
	token   string
	retries int
	maxWait time.Duration
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
	c := &Client{base: u, http: opts.HTTPClient, token: opts.Token, retries: opts.Retries, maxWait: opts.MaxRetryWait}
	if c.http == nil {
		c.http = &http.Client{}
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
	return c, nil
}

// call describes one API request.
type call struct {
	method string
	path   []string // segments, escaped by do
	query  url.Values
	body   any    // marshalled to JSON when not nil
	ifNone string // If-None-Match, for polls
}

// reply is a response read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends c, retrying a 503, and returns a 2xx or 304 reply, or the
// server's error as an *Error.
func (c *Client) do(ctx context.Context, req call) (reply, error) {
	if err := checkUTF8(req); err != nil {
		return reply{}, err
	}
	var body []byte
	if req.body != nil {
		var err error
		if body, err = json.Marshal(req.body); err != nil {
			return reply{}, fmt.Errorf("client: encoding request: %w", err)
		}
	}
	u := *c.base
	escaped := c.base.EscapedPath()
	for _, seg := range req.path {
		u.Path += "/" + seg
		escaped += "/" + url.PathEscape(seg)
	}
	u.RawPath = escaped
	u.RawQuery = req.query.Encode()
	target := u.String()
	first, redirects := u, 0
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
			target, u, redirects = first.String(), first, 0
		case rep.status < 300 || rep.status == http.StatusNotModified:
			return rep, nil
		default:
			if to, ok := leaderTarget(rep, u); ok && redirects < maxRedirects {
				// A node of a cluster that does not lead the partition: the
				// request goes to the leader it names, not counted as a retry.
				target, u = to.String(), to
				redirects++
				attempt--
				continue
			}
			apiErr := newError(rep)
			if rep.status != http.StatusServiceUnavailable {
				return reply{}, apiErr
			}
			retry, wait = apiErr, apiErr.RetryAfter
		}
		if attempt >= c.retries {
			return reply{}, retry
		}
		if wait <= 0 {
			wait = 100 * time.Millisecond << attempt
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

func (c *Client) send(ctx context.Context, req call, target string, body []byte) (reply, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, target, rd)
	if err != nil {
		return reply{}, fmt.Errorf("client: %w", err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	if req.ifNone != "" {
		hr.Header.Set("If-None-Match", req.ifNone)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return reply{}, fmt.Errorf("client: %s %s: %w", req.method, target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return reply{}, fmt.Errorf("client: %s %s: reading response: %w", req.method, target, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
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
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }
