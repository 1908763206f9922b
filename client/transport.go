package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/bytebufferpool"
)

// leanTransport sends a Client's requests to http:// servers over
// HTTP/1.1 keep-alive connections of its own. It writes each request from
// its connection's buffers and reads of the answer only what the Client
// uses (the status, the body, Retry-After, the leader of a 421, an ETag),
// where net/http's transport builds a Request and a Response with their
// headers and hands each round trip between goroutines: some fifty
// allocations a call, for answers of a few hundred bytes.
//
// A Client uses it on Unix (leanSupported) unless the caller passes
// Options.HTTPClient, the base URL is https://, or a proxy from the
// environment applies (http.ProxyFromEnvironment): net/http serves those.
type leanTransport struct {
	dialer  net.Dialer
	maxIdle int // 0 keeps none: every request says Connection: close
	// now is the clock idle connections age by (time.Now; tests set
	// their own).
	now func() time.Time

	mu    sync.Mutex
	idle  map[string][]*leanConn // by host, oldest first; guarded by mu
	nIdle int                    // guarded by mu
}

// leanIdleTimeout is how long a connection stays idle before the
// transport closes it: less than offsetd's own IdleTimeout (2 minutes),
// so that the client, not the server, ends it, and as long as net/http's
// default transport keeps one. It also lets go the connections to a node
// the client no longer calls (a former leader).
const leanIdleTimeout = 90 * time.Second

// leanConn is one connection to a server.
type leanConn struct {
	nc net.Conn
	br *bufio.Reader
	// head is where a request's line and header are written, and its
	// body too when it fits.
	head   []byte
	reused bool // has answered a request before
	peek   peeker
	// idleSince is when the connection went back to the pool.
	idleSince time.Time
}

// leanRequest is one request as the lean transport writes it.
type leanRequest struct {
	method string
	host   string // host[:port], as url.URL.Host has it
	uri    string // the path and query, escaped
	auth   string // the Authorization header's value, if any
	ifNone string // If-None-Match, if any
	body   []byte // sent with Content-Type: application/json when not nil
	etag   bool   // keep the answer's ETag
}

func newLeanTransport(maxIdle int) *leanTransport {
	return &leanTransport{maxIdle: maxIdle, now: time.Now, idle: make(map[string][]*leanConn)}
}

// aLongTimeAgo is a deadline that makes every blocked read and write on a
// connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip sends r and reads the answer's body into buf. A request that
// finds its reused connection closed by the server before any answer (an
// idle connection the server timed out) is sent again, once, on a new
// connection, if nothing of it can have been acted on: a write that
// failed, or a GET.
func (t *leanTransport) roundTrip(ctx context.Context, r *leanRequest, buf *bytebufferpool.ByteBuffer) (head, error) {
	if err := ctx.Err(); err != nil {
		return head{}, err
	}
	for fresh := false; ; fresh = true {
		lc, err := t.conn(ctx, r.host, fresh)
		if err != nil {
			return head{}, err
		}
		h, wrote, err := t.exchange(ctx, lc, r, buf)
		if err == nil {
			if h.close {
				lc.nc.Close()
			} else {
				t.put(r.host, lc)
			}
			return h, nil
		}
		lc.nc.Close()
		retry := lc.reused && ctx.Err() == nil &&
			(!wrote || r.method == http.MethodGet && errors.Is(err, errNothingRead))
		if !retry {
			return head{}, err
		}
	}
}

// errNothingRead marks an exchange whose connection ended before the
// first byte of an answer.
var errNothingRead = errors.New("the server closed the connection before answering")

// exchange writes r on lc and reads the answer. wrote is false when the
// request could not be written whole.
func (t *leanTransport) exchange(ctx context.Context, lc *leanConn, r *leanRequest, buf *bytebufferpool.ByteBuffer) (h head, wrote bool, err error) {
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		lc.nc.SetDeadline(deadline)
	}
	var stop func() bool
	if ctx.Done() != nil {
		// Unblocks the reads and writes below when the context ends; the
		// connection is closed then, never reused.
		stop = context.AfterFunc(ctx, func() { lc.nc.SetDeadline(aLongTimeAgo) })
	}
	err = t.write(lc, r)
	if wrote = err == nil; wrote {
		if _, err = lc.br.Peek(1); err != nil {
			err = fmt.Errorf("%w: %w", errNothingRead, err)
		} else {
			h, err = readResponse(lc.br, r.method, buf, r.etag)
		}
	}
	cancelled := stop != nil && !stop()
	switch {
	case err != nil && ctx.Err() != nil:
		err = ctx.Err()
	case err != nil && hasDeadline && errors.Is(err, os.ErrDeadlineExceeded):
		err = context.DeadlineExceeded
	case err != nil:
	case cancelled:
		h.close = true // the answer is whole, but the deadline is spoilt
	case hasDeadline:
		lc.nc.SetDeadline(time.Time{})
	}
	return h, wrote, err
}

// write sends r's request line, header and body in one write (one
// segment on the wire, one wake-up of the server): with the header when
// the body fits in the connection's buffer, gathered from both (writev)
// when it does not.
func (t *leanTransport) write(lc *leanConn, r *leanRequest) error {
	w := append(lc.head[:0], r.method...)
	w = append(w, ' ')
	w = append(w, r.uri...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, removeZone(r.host)...)
	w = append(w, "\r\n"...)
	if r.auth != "" {
		w = append(w, "Authorization: "...)
		w = append(w, r.auth...)
		w = append(w, "\r\n"...)
	}
	if r.ifNone != "" {
		w = append(w, "If-None-Match: "...)
		w = append(w, r.ifNone...)
		w = append(w, "\r\n"...)
	}
	if r.body != nil {
		w = append(w, "Content-Type: application/json\r\nContent-Length: "...)
		w = strconv.AppendInt(w, int64(len(r.body)), 10)
		w = append(w, "\r\n"...)
	}
	if t.maxIdle == 0 {
		w = append(w, "Connection: close\r\n"...)
	}
	w = append(w, "\r\n"...)
	if len(w) > leanBufferSize {
		lc.head = nil // an exceptional header: not kept
	} else {
		lc.head = w
	}
	if len(w)+len(r.body) <= leanBufferSize {
		_, err := lc.nc.Write(append(w, r.body...))
		return err
	}
	bufs := net.Buffers{w, r.body}
	_, err := bufs.WriteTo(lc.nc)
	return err
}

// leanBufferSize is the size of a connection's read buffer, and the most
// it keeps to write requests from.
const leanBufferSize = 4 << 10

// conn returns an idle connection to host that the server has not closed,
// or a new one; with fresh, always a new one.
func (t *leanTransport) conn(ctx context.Context, host string, fresh bool) (*leanConn, error) {
	for !fresh {
		t.mu.Lock()
		t.expireLocked(t.now())
		idle := t.idle[host]
		if len(idle) == 0 {
			t.mu.Unlock()
			break
		}
		lc := idle[len(idle)-1]
		idle[len(idle)-1] = nil
		t.idle[host] = idle[:len(idle)-1]
		t.nIdle--
		t.mu.Unlock()
		if lc.br.Buffered() == 0 && lc.peek.open() {
			return lc, nil
		}
		lc.nc.Close() // closed by the server, or it sent what nobody asked for
	}
	addr := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		addr = net.JoinHostPort(strings.Trim(host, "[]"), "80")
	}
	nc, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &leanConn{nc: nc, br: bufio.NewReaderSize(nc, leanBufferSize), head: make([]byte, 0, leanBufferSize), peek: newPeeker(nc)}, nil
}

// put keeps lc for the next request to host. When the pool is full, the
// connection that has been idle longest, to whichever host, is closed to
// make room: a client whose requests moved to another node (a new
// leader) keeps connections to that one, not to the old.
func (t *leanTransport) put(host string, lc *leanConn) {
	lc.reused = true
	if t.maxIdle == 0 {
		lc.nc.Close()
		return
	}
	now := t.now()
	lc.idleSince = now
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(now)
	if t.nIdle >= t.maxIdle {
		var oldest string
		var since time.Time
		found := false
		for h, idle := range t.idle {
			if len(idle) > 0 && (!found || idle[0].idleSince.Before(since)) {
				oldest, since, found = h, idle[0].idleSince, true
			}
		}
		t.closeOldestLocked(oldest)
	}
	t.idle[host] = append(t.idle[host], lc)
	t.nIdle++
}

// expireLocked closes the connections idle for leanIdleTimeout or more
// at now.
func (t *leanTransport) expireLocked(now time.Time) {
	for host, idle := range t.idle {
		for len(idle) > 0 && now.Sub(idle[0].idleSince) >= leanIdleTimeout {
			t.closeOldestLocked(host)
			idle = t.idle[host]
		}
	}
}

// closeOldestLocked closes the connection to host that has been idle
// longest, and forgets host when it was the last.
func (t *leanTransport) closeOldestLocked(host string) {
	idle := t.idle[host]
	idle[0].nc.Close()
	n := copy(idle, idle[1:])
	idle[n] = nil
	t.nIdle--
	if n == 0 {
		delete(t.idle, host)
		return
	}
	t.idle[host] = idle[:n]
}

// closeIdle closes every idle connection.
func (t *leanTransport) closeIdle() {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.nIdle = make(map[string][]*leanConn), 0
	t.mu.Unlock()
	for _, conns := range idle {
		for _, lc := range conns {
			lc.nc.Close()
		}
	}
}

// leanTarget splits an http:// URL into the host (unescaped, as
// url.URL.Host) and the request URI, if the lean transport may send to
// it: not through a proxy. A URL with user information is not sent
// through it (New sees to that for the base URL, which others share).
func leanTarget(target, baseHost string) (host, uri string, ok bool) {
	rest, ok := strings.CutPrefix(target, "http://")
	if !ok {
		return "", "", false
	}
	i := strings.IndexAny(rest, "/?")
	if i < 0 || rest[i] != '/' {
		return "", "", false // no path: only the base URL's own form, sent by net/http
	}
	host, uri = rest[:i], rest[i:]
	if strings.IndexByte(host, '%') >= 0 {
		// An IPv6 zone, escaped in the URL ("[fe80::1%25eth0]"): the
		// dial wants it as url.URL.Host has it.
		u, err := url.Parse("http://" + host)
		if err != nil {
			return "", "", false
		}
		host = u.Host
	}
	if host != baseHost && proxied(&url.URL{Scheme: "http", Host: host}) {
		return "", "", false
	}
	return host, uri, true
}

// removeZone returns host without the zone of an IPv6 address, which is
// for the dial, not for the Host header (as net/http sends it).
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i := strings.LastIndexByte(host, ']')
	if j := strings.LastIndexByte(host[:max(i, 0)], '%'); j > 0 {
		return host[:j] + host[i:]
	}
	return host
}

// proxied reports whether the environment sends requests to u through a
// proxy (or says so unreadably).
func proxied(u *url.URL) bool {
	p, err := http.ProxyFromEnvironment(&http.Request{URL: u})
	return err != nil || p != nil
}

// validHeaderValue reports whether s can be sent as a header value as it
// is: no control characters but tab. net/http refuses the others.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
