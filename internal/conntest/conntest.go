// Package conntest is what the tests of offsetd's listeners (kafka and
// server) share to hold connections against a real server on loopback:
// waiting for the server to close one, and measuring the heap that
// connections hold.
package conntest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// guard bounds a wait on a broken server; a working one ends it sooner.
const guard = 30 * time.Second

// WaitFor polls cond until it holds: for a server's own bookkeeping,
// which sends no event.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		<-tick.C
	}
}

// ReadUntilClosed reads until the server closes conn, and returns what
// came.
func ReadUntilClosed(conn net.Conn) (string, error) {
	conn.SetReadDeadline(time.Now().Add(guard))
	var got strings.Builder
	_, err := io.Copy(&got, conn)
	var op *net.OpError
	if errors.As(err, &op) && !op.Timeout() {
		err = nil // reset by the server
	}
	return got.String(), err
}

// LiveHeap is the heap in use after a full collection (two: the second
// frees what sync.Pools kept through the first).
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// WarmGoroutines runs n goroutines to their end. Go keeps the descriptor
// of every goroutine that ever ran, to reuse it; running as many first as
// a measurement will puts them in the level it starts from.
func WarmGoroutines(n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go wg.Done()
	}
	wg.Wait()
}

// MiB formats a byte count for a test's message.
func MiB(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// IdleCost reports, as the metric B/conn, the heap and goroutine stack
// that conns connections to addr hold once each has had one exchange (the
// client's side, in the same process, included). open is how many
// connections the server has open.
func IdleCost(b *testing.B, addr string, conns int, exchange func(net.Conn) error, open func() int64) {
	inUse := func() uint64 {
		LiveHeap()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc + m.StackInuse
	}
	var total float64
	for b.Loop() {
		before := inUse()
		held := Open(b, addr, conns, exchange)
		total += float64(inUse()-before) / float64(conns)
		for _, conn := range held {
			conn.Close()
		}
		WaitFor(b, "the connections closed", func() bool { return open() == 0 })
	}
	b.ReportMetric(total/float64(b.N), "B/conn")
}

// Stall opens n connections to addr and sends each the bytes of stall,
// each from a goroutine of its own: a write blocks while the server does
// not read. The function it returns closes the connections and waits for
// their writers; so does the end of the test. They close abruptly (a
// reset), as clients that die do: the server does not read what they left
// in its socket buffers first.
func Stall(t testing.TB, addr string, n int, stall []byte) (closeAll func()) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	var writers sync.WaitGroup
	var once sync.Once
	closeAll = func() {
		once.Do(func() {
			for _, conn := range conns {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
			writers.Wait()
			conns = nil // the client side of the connections is garbage too
		})
	}
	t.Cleanup(closeAll)
	for range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		writers.Add(1)
		go func() {
			defer writers.Done()
			conn.Write(stall) // fails once closed
		}()
	}
	return closeAll
}

// Open opens n connections to addr, one after the other, and has exchange
// on each as it opens. They are closed when the test ends.
func Open(t testing.TB, addr string, n int, exchange func(net.Conn) error) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, conn := range conns {
			conn.Close()
		}
	})
	for range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		if err := exchange(conn); err != nil {
			t.Fatalf("connection %d of %d: %v", len(conns), n, err)
		}
	}
	return conns
}

// CheckCap checks a listener capped at max connections: max connections
// to addr are served (exchange succeeds on each), one more is closed
// without an answer to request, and once one of the max has closed a new
// connection is served. open is how many connections the server has open;
// CheckCap returns once it is 0.
func CheckCap(t testing.TB, addr string, max int, request []byte, exchange func(net.Conn) error, open func() int64) {
	t.Helper()
	held := Open(t, addr, max, exchange)
	excess, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer excess.Close()
	excess.Write(request) // may fail: closed already
	if got, err := ReadUntilClosed(excess); err != nil || got != "" {
		t.Fatalf("connection %d: answered %q, %v; want it closed", max+1, got, err)
	}
	for _, conn := range held {
		if err := exchange(conn); err != nil {
			t.Fatalf("a connection within the cap: %v", err)
		}
	}

	held[0].Close()
	WaitFor(t, "a connection to close", func() bool { return open() < int64(max) })
	again := Open(t, addr, 1, exchange)
	for _, conn := range append(held, again...) {
		conn.Close()
	}
	WaitFor(t, "every connection closed", func() bool { return open() == 0 })
}
