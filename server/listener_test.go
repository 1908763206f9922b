package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/offsetd/offsetd/internal/conntest"
	"github.com/offsetd/offsetd/server"
)

const commitPath = "/v1/groups/g/offsets"

func commitBody(offset int) string {
	return fmt.Sprintf(`{"offsets":[{"topic":"t","partition":0,"offset":%d}]}`, offset)
}

// commitAndFetch commits offset through e's client and reads it back.
func (e *env) commitAndFetch(offset int) {
	e.t.Helper()
	e.must(http.StatusOK, "POST", commitPath, commitBody(offset))
	if g := e.groupOffsets("g"); len(g.Offsets) != 1 || g.Offsets[0].Offset != int64(offset) {
		e.t.Fatalf("fetched %+v, want offset %d", g.Offsets, offset)
	}
}

// stalledBody is a commit's header announcing a body of size bytes, and
// sent bytes of it.
func stalledBody(size, sent int) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: offsetd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		commitPath, size, strings.Repeat(" ", sent))
}

// TestHTTPDeadlines holds connections that stall at each point of a
// request: each is closed by the header, read or idle timeout, not before
// it, and a client is served meanwhile.
func TestHTTPDeadlines(t *testing.T) {
	const header, read, idle = 200 * time.Millisecond, 400 * time.Millisecond, 300 * time.Millisecond
	e := newEnv(t, envConfig{limits: true, server: func(o *server.Options) {
		o.ReadHeaderTimeout, o.ReadTimeout, o.IdleTimeout = header, read, idle
	}})
	e.commitAndFetch(1)
	cases := []struct {
		name string
		send string
		// least is the deadline that closes the connection; answer is
		// the start of what the server sends before it closes.
		least  time.Duration
		answer string
	}{
		{"silent", "", header, ""},
		{"half a header", "GET /healthz HTTP/1.1\r\nHost: offsetd\r\n", header, ""},
		{"half a body", stalledBody(1<<20, 512<<10), read, "HTTP/1.1 400 "},
		{"a request, then silent", "GET /healthz HTTP/1.1\r\nHost: offsetd\r\n\r\n", idle, "HTTP/1.1 200 "},
	}
	errs := make([]chan error, len(cases))
	for i, tc := range cases {
		start := time.Now() // the server's deadline starts after this
		conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		errs[i] = make(chan error, 1)
		go func() {
			if _, err := io.WriteString(conn, tc.send); err != nil {
				errs[i] <- fmt.Errorf("write: %w", err)
				return
			}
			got, err := conntest.ReadUntilClosed(conn)
			switch took := time.Since(start); {
			case err != nil:
				errs[i] <- fmt.Errorf("not closed: %w", err)
			case took < tc.least:
				errs[i] <- fmt.Errorf("closed after %s, before its deadline %s", took, tc.least)
			case !strings.HasPrefix(got, tc.answer):
				errs[i] <- fmt.Errorf("answered %.40q, want %q", got, tc.answer)
			default:
				errs[i] <- nil
			}
		}()
	}
	for i, tc := range cases {
		if err := <-errs[i]; err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	e.commitAndFetch(2)
}

// TestHTTPLongPollOutlivesReadTimeout waits longer than the read timeout:
// the poll answers 304 when its wait ends, not an empty answer when the
// read deadline passes (net/http lifts it once the request has been read;
// a long poll relies on that, so that -max-wait may exceed the read
// timeout).
func TestHTTPLongPollOutlivesReadTimeout(t *testing.T) {
	const read = 100 * time.Millisecond
	e := newEnv(t, envConfig{limits: true, server: func(o *server.Options) { o.ReadTimeout = read }})
	e.commitAndFetch(1)
	etag := e.must(http.StatusOK, "GET", commitPath, "").header.Get("ETag")
	start := time.Now()
	e.must(http.StatusNotModified, "GET", commitPath+"?wait=500ms", "", "If-None-Match", etag)
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Fatalf("the poll ended after %s, before its wait", took)
	}
}

// TestHTTPStalledBodiesMemory opens 100 connections that each send most of
// a 1 MiB body and stall, while a client keeps committing; then the clients
// go. The server holds memory for the bytes that arrived, and its heap
// returns to within 20% of where it was before them.
func TestHTTPStalledBodiesMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("holds about 100 MiB")
	}
	const (
		conns = 100
		body  = 1 << 20
		sent  = body - 64<<10
	)
	e := newEnv(t, envConfig{limits: true, server: func(o *server.Options) { o.MaxBodyBytes = body }})
	e.commitAndFetch(1)
	ownConns := server.OpenConnections(e.ts.Listener)
	stall := []byte(stalledBody(body, sent))
	// Two goroutines per connection: the server's and the client's
	// writer.
	conntest.WarmGoroutines(2 * conns)
	before := conntest.LiveHeap()

	closeAll := conntest.Stall(t, e.ts.Listener.Addr().String(), conns, stall)
	conntest.WaitFor(t, "the stalled bodies read", func() bool { return conntest.LiveHeap() > before+conns*sent })
	held := conntest.LiveHeap()
	e.commitAndFetch(2)
	closeAll()
	// What arrived is held, and no more than its buffer's doubling: no
	// connection holds memory for bytes it only announced.
	if held > before+conns*(body+64<<10) {
		t.Fatalf("heap %s while the bodies stall, from %s: above %d bodies of %s", conntest.MiB(held), conntest.MiB(before), conns, conntest.MiB(body))
	}

	conntest.WaitFor(t, "the stalled connections gone", func() bool { return server.OpenConnections(e.ts.Listener) <= ownConns })
	after := conntest.LiveHeap()
	t.Logf("heap %s before, %s with %d bodies of %d of %d bytes stalled, %s after they closed", conntest.MiB(before), conntest.MiB(held), conns, sent, body, conntest.MiB(after))
	if float64(after) > 1.2*float64(before) {
		t.Fatalf("heap %s after the stalled connections closed, more than 20%% above %s before them", conntest.MiB(after), conntest.MiB(before))
	}
	e.commitAndFetch(3)
	runtime.KeepAlive(stall)
}

// askHealth sends GET /healthz on conn and reads the answer.
func askHealth(conn net.Conn) error {
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: offsetd\r\n\r\n"); err != nil {
		return err
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// TestHTTPMaxConnections opens MaxConnections kept-alive connections: the
// next is closed at once without an answer, and once one of them has gone
// a new one is served; then the client is.
func TestHTTPMaxConnections(t *testing.T) {
	const max = 3
	e := newEnv(t, envConfig{limits: true, server: func(o *server.Options) { o.MaxConnections = max }})
	conntest.CheckCap(t, e.ts.Listener.Addr().String(), max, []byte("GET /healthz HTTP/1.1\r\nHost: offsetd\r\n\r\n"), askHealth,
		func() int64 { return server.OpenConnections(e.ts.Listener) })
	e.commitAndFetch(1)
}

// BenchmarkIdleHTTPConnection measures what an open, kept-alive HTTP
// connection costs the server after one request: heap and goroutine stack
// (the client's side, in the same process, adds a few hundred bytes). It is
// what DefaultOptions' MaxConnections is sized by.
func BenchmarkIdleHTTPConnection(b *testing.B) {
	e := newEnv(b, envConfig{limits: true})
	conntest.IdleCost(b, e.ts.Listener.Addr().String(), 500, askHealth, func() int64 { return server.OpenConnections(e.ts.Listener) })
}
