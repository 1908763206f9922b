package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// leanServer serves h on loopback, counts the connections clients
// opened to it and tells of each that ended.
type leanServer struct {
	*httptest.Server
	conns  atomic.Int64
	closed chan struct{} // one value for each connection closed
}

func newLeanServer(t *testing.T, h http.HandlerFunc) *leanServer {
	t.Helper()
	s := &leanServer{Server: httptest.NewUnstartedServer(h), closed: make(chan struct{}, 1<<10)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.conns.Add(1)
		case http.StateClosed:
			select {
			case s.closed <- struct{}{}:
			default:
			}
		}
	}
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// newLeanClient returns a Client of s with the package's own transport,
// and checks that it is the lean one.
func newLeanClient(t *testing.T, s *leanServer, opts Options) *Client {
	t.Helper()
	if !leanSupported {
		t.Skip("no lean transport on this system")
	}
	c, err := New(s.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.lean == nil {
		t.Fatal("a client of an http:// server without a proxy does not use the lean transport")
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// idleConnCount returns how many connections c's lean transport keeps.
func idleConnCount(c *Client) int {
	c.lean.mu.Lock()
	defer c.lean.mu.Unlock()
	return c.lean.nIdle
}

// get sends GET path and returns the answer's status and body.
func get(ctx context.Context, c *Client, path ...string) (int, string, error) {
	rep, err := c.do(ctx, call{method: "GET", path: segments(path...)})
	if err != nil {
		return 0, "", err
	}
	defer rep.release()
	return rep.status, string(rep.body), nil
}

// Calls one after another share one connection; the answers are whole.
func TestLeanKeepAlive(t *testing.T) {
	var ua atomic.Value
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request) {
		ua.Store(r.UserAgent())
		io.WriteString(w, r.URL.Path)
	})
	c := newLeanClient(t, s, Options{})
	for i := range 20 {
		status, body, err := get(t.Context(), c, "a", "b c")
		if err != nil || status != 200 || body != "/a/b c" {
			t.Fatalf("call %d: %d %q %v", i, status, body, err)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("20 calls opened %d connections, want 1", n)
	}
	if ua.Load() != "" {
		t.Fatalf("the request went through net/http (User-Agent %q)", ua.Load())
	}
}

// Request bodies that fit in a connection's buffer with the header and
// bodies that do not (written with it in one gathered write) arrive whole,
// in any order, one after another on one connection.
func TestLeanRequestBodies(t *testing.T) {
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.ContentLength != int64(len(body)) || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, fmt.Sprintf("%d bytes of %d, %q: %v", len(body), r.ContentLength, r.Header.Get("Content-Type"), err), http.StatusBadRequest)
			return
		}
		w.Write(body)
	})
	c := newLeanClient(t, s, Options{})
	for i, size := range []int{0, 1, 3900, leanBufferSize, 10000, 1, maxLeanBody, 3900, 0} {
		body := make([]byte, size)
		for j := range body {
			body[j] = 'a' + byte((i+j)%26)
		}
		rep, err := c.do(t.Context(), call{method: "POST", path: segments("echo"), encoded: body})
		if err != nil {
			t.Fatalf("body %d (%d bytes): %v", i, size, err)
		}
		if string(rep.body) != string(body) {
			t.Fatalf("body %d (%d bytes): the server read %d bytes, %.20q...", i, size, len(rep.body), rep.body)
		}
		rep.release()
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("the calls opened %d connections, want 1", n)
	}
}

// An idle connection the server closed is not used: the next call dials.
// A GET whose reused connection ends before any answer is sent again.
func TestLeanServerClosesIdle(t *testing.T) {
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})
	c := newLeanClient(t, s, Options{})
	for round := range 3 {
		if status, body, err := get(t.Context(), c, "x"); err != nil || status != 200 || body != "ok" {
			t.Fatalf("round %d: %d %q %v", round, status, body, err)
		}
		s.CloseClientConnections()
	}
	if n := s.conns.Load(); n != 3 {
		t.Fatalf("3 calls, each after the server closed the connections, opened %d, want 3", n)
	}
	// Whether or not the check before reuse sees the close, the call
	// gets its answer: a GET that found no answer is sent again.
	c.lean.mu.Lock()
	for _, conns := range c.lean.idle {
		for _, lc := range conns {
			lc.peek = peeker{} // takes every connection to be open
		}
	}
	c.lean.mu.Unlock()
	if status, body, err := get(t.Context(), c, "x"); err != nil || status != 200 || body != "ok" {
		t.Fatalf("a GET on a connection the server closed: %d %q %v", status, body, err)
	}
}

// A full pool makes room for a connection by closing the one idle
// longest, whatever its host: after the leader moves, the connections to
// the old one go, and the calls to the new one reuse theirs.
func TestLeanPoolClosesOldest(t *testing.T) {
	ok := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }
	a, b := newLeanServer(t, ok), newLeanServer(t, ok)
	c := newLeanClient(t, a, Options{MaxIdleConns: 2})
	hostA, hostB := a.Listener.Addr().String(), b.Listener.Addr().String()
	// Two connections to a, both idle.
	var conns []*leanConn
	for range 2 {
		lc, err := c.lean.conn(t.Context(), hostA, false)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, lc)
	}
	for _, lc := range conns {
		c.lean.put(hostA, lc)
	}
	for i := range 10 {
		rep, err := c.do(t.Context(), call{method: "GET", path: segments("x"), host: hostB})
		if err != nil || string(rep.body) != "ok" {
			t.Fatalf("call %d to b: %q %v", i, rep.body, err)
		}
		rep.release()
	}
	if n := b.conns.Load(); n != 1 {
		t.Fatalf("10 calls to b with the pool full of a's connections opened %d, want 1", n)
	}
	c.lean.mu.Lock()
	toA, toB := len(c.lean.idle[hostA]), len(c.lean.idle[hostB])
	c.lean.mu.Unlock()
	if toA != 1 || toB != 1 {
		t.Fatalf("idle connections: %d to a, %d to b; want 1 and 1", toA, toB)
	}
	<-a.closed // the older of a's, closed by the client
}

// A connection idle for leanIdleTimeout is closed, to whichever host,
// before the server closes it; one idle for less is reused.
func TestLeanIdleTimeout(t *testing.T) {
	ok := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }
	a, b := newLeanServer(t, ok), newLeanServer(t, ok)
	c := newLeanClient(t, a, Options{})
	now := time.Now()
	c.lean.now = func() time.Time { return now }
	get := func(s *leanServer) {
		t.Helper()
		rep, err := c.do(t.Context(), call{method: "GET", path: segments("x"), host: s.Listener.Addr().String()})
		if err != nil || string(rep.body) != "ok" {
			t.Fatalf("%q %v", rep.body, err)
		}
		rep.release()
	}
	get(a)
	now = now.Add(leanIdleTimeout - time.Second)
	get(a)
	if n := a.conns.Load(); n != 1 {
		t.Fatalf("a call after %v idle opened a connection", leanIdleTimeout-time.Second)
	}
	now = now.Add(leanIdleTimeout)
	get(a)
	if n := a.conns.Load(); n != 2 {
		t.Fatalf("a call after %v idle reused the connection", leanIdleTimeout)
	}
	<-a.closed // the one that timed out, closed by the client

	// A call to b closes the connection to a that has timed out since.
	now = now.Add(leanIdleTimeout)
	get(b)
	<-a.closed
	if n := idleConnCount(c); n != 1 {
		t.Fatalf("%d idle connections, want only b's", n)
	}
}

// An answer with Connection: close ends its connection; the next call
// dials anew, and gets its answer.
func TestLeanConnectionClose(t *testing.T) {
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	c := newLeanClient(t, s, Options{})
	for i := range 3 {
		if status, body, err := get(t.Context(), c, "x"); err != nil || status != 200 || body != "bye" {
			t.Fatalf("call %d: %d %q %v", i, status, body, err)
		}
	}
	if n := s.conns.Load(); n != 3 {
		t.Fatalf("3 calls answered with Connection: close opened %d connections, want 3", n)
	}
	if n := idleConnCount(c); n != 0 {
		t.Fatalf("%d connections kept after Connection: close", n)
	}
}

// MaxIdleConns < 0 keeps no connection: each request says so.
func TestLeanNoKeepAlive(t *testing.T) {
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request) {
		if !r.Close {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	c := newLeanClient(t, s, Options{MaxIdleConns: -1})
	for i := range 3 {
		if status, _, err := get(t.Context(), c, "x"); err != nil || status != 200 {
			t.Fatalf("call %d: %d %v", i, status, err)
		}
	}
	if n := s.conns.Load(); n != 3 {
		t.Fatalf("3 calls opened %d connections, want 3", n)
	}
}

// A chunked answer (a handler that flushes as it goes) is read whole, and
// its connection serves the next call.
func TestLeanChunked(t *testing.T) {
	parts := []string{`{"a":`, strings.Repeat("1", 5000), `}`}
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request) {
		for _, p := range parts {
			io.WriteString(w, p)
			w.(http.Flusher).Flush()
		}
	})
	c := newLeanClient(t, s, Options{})
	for i := range 3 {
		rep, err := c.do(t.Context(), call{method: "GET", path: segments("x")})
		if err != nil {
			t.Fatal(err)
		}
		if string(rep.body) != strings.Join(parts, "") {
			t.Fatalf("call %d: %d bytes", i, len(rep.body))
		}
		rep.release()
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("3 chunked answers took %d connections, want 1", n)
	}
}

// A context cancelled while the answer is coming ends the call with the
// context's error, and a deadline with its own; neither leaves the
// connection in the pool.
func TestLeanContextMidResponse(t *testing.T) {
	flushed := make(chan struct{}, 1)
	release := make(chan struct{})
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "the first bytes")
		w.(http.Flusher).Flush()
		flushed <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	c := newLeanClient(t, s, Options{})

	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-flushed
		cancel()
	}()
	if _, _, err := get(ctx, c, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled mid-answer: %v", err)
	}

	ctx, cancel = context.WithDeadline(t.Context(), time.Now().Add(50*time.Millisecond))
	defer cancel()
	go func() { <-flushed }()
	if _, _, err := get(ctx, c, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past its deadline mid-answer: %v", err)
	}
	if n := idleConnCount(c); n != 0 {
		t.Fatalf("%d connections kept after calls that ended mid-answer", n)
	}
}

// An answer cut short by the server is an error that says so, not a hang
// nor a short body; so is one that is not HTTP.
func TestLeanCutShort(t *testing.T) {
	answers := map[string]string{
		"/body":    "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this",
		"/chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly this",
		"/head":    "HTTP/1.1 200 OK\r\nContent-Le",
		"/garbage": "SSH-2.0-OpenSSH\r\n\r\n",
	}
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		io.WriteString(conn, answers[r.URL.Path])
		conn.Close()
	})
	c := newLeanClient(t, s, Options{})
	for path, want := range map[string]error{"body": io.ErrUnexpectedEOF, "chunked": io.ErrUnexpectedEOF, "head": io.ErrUnexpectedEOF, "garbage": errBadResponse} {
		if _, _, err := get(t.Context(), c, path); !errors.Is(err, want) || !strings.Contains(err.Error(), "/"+path) {
			t.Errorf("%s: %v, want %v naming the URL", path, err, want)
		}
	}
}

// A header with a space before its colon (a Content-Length the client
// would not see) makes a malformed answer: the call fails at once and the
// client closes the connection, where reading the body to the end of a
// kept-alive connection would wait for good.
func TestLeanSpaceBeforeColon(t *testing.T) {
	closed := make(chan error, 1)
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			closed <- err
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}")
		_, err = io.Copy(io.Discard, conn) // until the client closes
		closed <- err
	})
	c := newLeanClient(t, s, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a bound on the failure, not a wait
	defer cancel()
	if _, _, err := get(ctx, c, "x"); !errors.Is(err, errBadResponse) {
		t.Fatalf("an answer with %q: %v, want %v", "Content-Length : 2", err, errBadResponse)
	}
	if err := <-closed; err != nil {
		t.Fatalf("the server's end of the connection: %v", err)
	}
}

// Only an http:// server without a proxy, and a Client without a caller's
// HTTPClient, gets the lean transport; the others keep net/http's. (On
// other systems than Unix none does: lean_other_test.go.)
func TestLeanOnlyWhereItApplies(t *testing.T) {
	if !leanSupported {
		t.Skip("no lean transport on this system")
	}
	for _, tc := range []struct {
		url  string
		opts Options
		lean bool
	}{
		{"http://127.0.0.1:1", Options{}, true},
		{"127.0.0.1:1", Options{Token: "t"}, true},
		{"https://127.0.0.1:1", Options{}, false},
		{"http://127.0.0.1:1", Options{HTTPClient: &http.Client{}}, false},
		{"http://127.0.0.1:1", Options{Token: "a\r\nX-Evil: 1"}, false},
		{"http://user:pw@127.0.0.1:1", Options{}, false},
	} {
		c, err := New(tc.url, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if (c.lean != nil) != tc.lean {
			t.Errorf("New(%q, %+v): lean transport %v, want %v", tc.url, tc.opts, c.lean != nil, tc.lean)
		}
	}
}

// A base URL with a user and password is served, with them as Basic
// auth, as net/http serves it.
func TestLeanUserInfo(t *testing.T) {
	s := newLeanServer(t, func(w http.ResponseWriter, r *http.Request) {
		user, pw, _ := r.BasicAuth()
		io.WriteString(w, user+":"+pw)
	})
	c, err := New("http://user:p%40ss@"+s.Listener.Addr().String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if status, body, err := get(t.Context(), c, "x"); err != nil || status != 200 || body != "user:p@ss" {
		t.Fatalf("%d %q %v", status, body, err)
	}
}

// leanTarget gives the host to dial as url.URL.Host has it, and the
// request URI as the URL has it, escaped.
func TestLeanTarget(t *testing.T) {
	for _, tc := range []struct{ target, base, host, uri string }{
		{"http://127.0.0.1:7070/v1/groups/a%2Fb", "127.0.0.1:7070", "127.0.0.1:7070", "/v1/groups/a%2Fb"},
		{"http://[::1%25lo]:7070/v1/x?y=1", "[::1%lo]:7070", "[::1%lo]:7070", "/v1/x?y=1"},
		{"http://[fe80::1%25eth0]/v1", "[fe80::1%eth0]", "[fe80::1%eth0]", "/v1"},
	} {
		host, uri, ok := leanTarget(tc.target, tc.base)
		if !ok || host != tc.host || uri != tc.uri {
			t.Errorf("leanTarget(%q): %q %q %v, want %q %q", tc.target, host, uri, ok, tc.host, tc.uri)
		}
	}
}

// A base URL of an IPv6 address with a zone is dialled with the zone, and
// the Host header goes without it, as net/http sends it.
func TestLeanIPv6Zone(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	var zone string
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagLoopback != 0 {
			zone = ifc.Name
		}
	}
	if zone == "" {
		ln.Close()
		t.Skip("no loopback interface")
	}
	var host atomic.Value
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host.Store(r.Host)
		io.WriteString(w, "ok")
	}))
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	defer s.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	c, err := New(fmt.Sprintf("http://[::1%%25%s]:%d", zone, port), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if leanSupported && c.lean == nil {
		t.Fatal("no lean transport")
	}
	if status, body, err := get(t.Context(), c, "x"); err != nil || status != 200 || body != "ok" {
		t.Fatalf("%d %q %v", status, body, err)
	}
	if want := fmt.Sprintf("[::1]:%d", port); host.Load() != want {
		t.Fatalf("Host %q, want %q", host.Load(), want)
	}
}

// A proxy from the environment sends the client through net/http, which
// goes through it; a host the proxy does not apply to (loopback) keeps
// the lean transport. The environment is read once a process, so the
// test runs itself again with a proxy set.
func TestLeanProxyFallback(t *testing.T) {
	if !leanSupported {
		t.Skip("no lean transport on this system")
	}
	if os.Getenv("OFFSETD_TEST_PROXY_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestLeanProxyFallback$", "-test.count", "1")
		cmd.Env = append(os.Environ(), "OFFSETD_TEST_PROXY_CHILD=1", "HTTP_PROXY=http://127.0.0.1:9", "http_proxy=", "NO_PROXY=", "no_proxy=", "REQUEST_METHOD=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the test with a proxy set: %v\n%s", err, out)
		}
		return
	}
	for url, lean := range map[string]bool{"http://offsetd.example:7070": false, "http://127.0.0.1:7070": true} {
		c, err := New(url, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if (c.lean != nil) != lean {
			t.Errorf("HTTP_PROXY set, New(%q): lean transport %v, want %v", url, c.lean != nil, lean)
		}
	}
}
