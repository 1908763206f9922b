package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offsetd/offsetd/server"
)

// waitFor polls cond until it holds; the deadline only bounds a broken
// server.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		<-tick.C
	}
}

// readUntilClosed reads until the server closes conn and returns what
// came. The guard deadline only bounds a broken server.
func readUntilClosed(conn net.Conn) (string, error) {
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var got strings.Builder
	_, err := io.Copy(&got, conn)
	if op, ok := err.(*net.OpError); ok && !op.Timeout() {
		err = nil // reset by the server
	}
	return got.String(), err
}

// liveHeap is the heap in use after a full collection (two: the second
// frees what sync.Pools kept through the first).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

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
			got, err := readUntilClosed(conn)
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
	// Go keeps the descriptor of every goroutine that ever ran, to reuse
	// it; a round runs two per connection (the server's and the client's
	// writer). Running as many first puts them in the level before.
	var warm sync.WaitGroup
	for range 2 * conns {
		warm.Add(1)
		go warm.Done()
	}
	warm.Wait()
	before := liveHeap()

	clients := make([]net.Conn, conns)
	var writers sync.WaitGroup
	closeAll := func() {
		for _, conn := range clients {
			if conn != nil {
				conn.Close()
			}
		}
		writers.Wait()
	}
	for i := range clients {
		conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
		if err != nil {
			closeAll()
			t.Fatal(err)
		}
		clients[i] = conn
		writers.Add(1)
		go func() {
			defer writers.Done()
			conn.Write(stall) // fails once closed
		}()
	}
	writers.Wait() // the bodies are in the server's socket buffers or read
	waitFor(t, "the stalled bodies read", func() bool { return liveHeap() > before+conns*sent })
	held := liveHeap()
	e.commitAndFetch(2)
	closeAll()
	clients = nil
	// What arrived is held, and no more than its buffer's doubling: no
	// connection holds memory for bytes it only announced.
	if held > before+conns*(body+64<<10) {
		t.Fatalf("heap %s while the bodies stall, from %s: above %d bodies of %s", mib(held), mib(before), conns, mib(body))
	}

	waitFor(t, "the stalled connections gone", func() bool { return server.OpenConnections(e.ts.Listener) <= ownConns })
	after := liveHeap()
	t.Logf("heap %s before, %s with %d bodies of %d of %d bytes stalled, %s after they closed", mib(before), mib(held), conns, sent, body, mib(after))
	if float64(after) > 1.2*float64(before) {
		t.Fatalf("heap %s after the stalled connections closed, more than 20%% above %s before them", mib(after), mib(before))
	}
	e.commitAndFetch(3)
	runtime.KeepAlive(stall)
}

// askHealth sends GET /healthz on conn and reads the answer.
func askHealth(conn net.Conn, r *bufio.Reader) error {
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: offsetd\r\n\r\n"); err != nil {
		return err
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(r, nil)
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
// a new one is served.
func TestHTTPMaxConnections(t *testing.T) {
	const max = 3
	e := newEnv(t, envConfig{limits: true, server: func(o *server.Options) { o.MaxConnections = max }})
	addr := e.ts.Listener.Addr().String()
	type held struct {
		conn net.Conn
		r    *bufio.Reader
	}
	var open []held
	defer func() {
		for _, h := range open {
			h.conn.Close()
		}
	}()
	for range max {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		h := held{conn, bufio.NewReader(conn)}
		open = append(open, h)
		if err := askHealth(h.conn, h.r); err != nil {
			t.Fatalf("connection %d of %d: %v", len(open), max, err)
		}
	}
	excess, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer excess.Close()
	io.WriteString(excess, "GET /healthz HTTP/1.1\r\nHost: offsetd\r\n\r\n") // may fail: closed already
	if got, err := readUntilClosed(excess); err != nil || got != "" {
		t.Fatalf("connection %d: answered %q, %v; want it closed", max+1, got, err)
	}
	for _, h := range open {
		if err := askHealth(h.conn, h.r); err != nil {
			t.Fatalf("a connection within the cap: %v", err)
		}
	}

	open[0].conn.Close()
	open = open[1:]
	waitFor(t, "a connection to close", func() bool { return server.OpenConnections(e.ts.Listener) < max })
	again, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := askHealth(again, bufio.NewReader(again)); err != nil {
		t.Fatalf("a new connection once one closed: %v", err)
	}
	again.Close()
	for _, h := range open {
		h.conn.Close()
	}
	open = nil
	waitFor(t, "every connection closed", func() bool { return server.OpenConnections(e.ts.Listener) == 0 })
	e.commitAndFetch(1)
}

// BenchmarkIdleHTTPConnection measures what an open, kept-alive HTTP
// connection costs the server after one request: heap and goroutine stack
// (the client's side, in the same process, adds a few KiB). It is what
// DefaultOptions' MaxConnections is sized by.
func BenchmarkIdleHTTPConnection(b *testing.B) {
	const conns = 500
	e := newEnv(b, envConfig{limits: true})
	addr := e.ts.Listener.Addr().String()
	inUse := func() uint64 {
		liveHeap()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc + m.StackInuse
	}
	var total float64
	for b.Loop() {
		before := inUse()
		open := make([]net.Conn, 0, conns)
		for range conns {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			open = append(open, conn)
			if err := askHealth(conn, bufio.NewReader(conn)); err != nil {
				b.Fatal(err)
			}
		}
		total += float64(inUse()-before) / conns
		for _, conn := range open {
			conn.Close()
		}
		waitFor(b, "the connections closed", func() bool { return server.OpenConnections(e.ts.Listener) == 0 })
	}
	b.ReportMetric(total/float64(b.N), "B/conn")
}
