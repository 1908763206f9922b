package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Batches of commits over raw connections: a body cut short (the
// connection ends before its Content-Length), a body longer than its
// Content-Length, a refused batch with a good one pipelined after it.
// Nothing of a bad body is written, each answer belongs to its own
// request, and the good batch is written whole.
func TestCommitBatchWrongLengths(t *testing.T) {
	e := newEnv(t, envConfig{})
	addr := e.ts.Listener.Addr().String()
	batch := func(groups ...string) string {
		var b strings.Builder
		b.WriteString(`{"commits":[`)
		for i, g := range groups {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"group":%q,"offsets":[{"topic":"t","partition":0,"offset":%d}]}`, g, 10+i)
		}
		b.WriteString(`]}`)
		return b.String()
	}
	request := func(body string, length int) string {
		return fmt.Sprintf("POST /v1/commits HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", length, body)
	}
	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		t.Cleanup(func() { conn.Close() })
		return conn, bufio.NewReader(conn)
	}
	read := func(br *bufio.Reader) (int, string) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// Cut short: the client half-closes after half the body.
	body := batch("cut-a", "cut-b")
	conn, br := dial()
	io.WriteString(conn, request(body[:len(body)/2], len(body)))
	conn.(*net.TCPConn).CloseWrite()
	if status, answer := read(br); status != http.StatusBadRequest {
		t.Fatalf("a body cut short: %d %s", status, answer)
	}

	// Longer than it says: the server reads as much as it was told (a
	// truncated JSON value); the rest is no request.
	conn, br = dial()
	short := batch("short-a", "short-b")
	io.WriteString(conn, request(short, len(short)-10)+short[len(short)-10:])
	if status, answer := read(br); status != http.StatusBadRequest {
		t.Fatalf("a body longer than its Content-Length: %d %s", status, answer)
	}

	// Two requests pipelined on one connection, the first refused whole
	// (a key given twice), the second good: each answer is its own.
	conn, br = dial()
	dup := `{"commits":[{"group":"dup","group":"dup2","offsets":[{"topic":"t","partition":0,"offset":1}]}]}`
	pipelined := batch("pipe-a", "pipe-b", "pipe-c")
	io.WriteString(conn, request(dup, len(dup))+request(pipelined, len(pipelined)))
	if status, answer := read(br); status != http.StatusBadRequest {
		t.Fatalf("a batch with a key given twice: %d %s", status, answer)
	}
	status, answer := read(br)
	if status != http.StatusOK || strings.Count(answer, `"version"`) != 3 {
		t.Fatalf("the batch pipelined after it: %d %s", status, answer)
	}

	for _, g := range []string{"cut-a", "cut-b", "short-a", "short-b", "dup", "dup2"} {
		if _, ok, _ := e.c.Group(g); ok {
			t.Errorf("group %s of a bad body was written", g)
		}
	}
	for i, g := range []string{"pipe-a", "pipe-b", "pipe-c"} {
		if o, ok, _ := e.c.Fetch(g, "t", 0); !ok || o.Offset != int64(10+i) {
			t.Errorf("group %s: %+v %v, want offset %d", g, o, ok, 10+i)
		}
	}
}

// Topics and metadata whose names share a slot of the decoder's names
// (same length, same first, middle and last byte), alternating through
// one batch: every offset is stored with its own names.
func TestCommitBatchCollidingNames(t *testing.T) {
	e := newEnv(t, envConfig{})
	names := []string{"tAmBt", "tBmAt", "tCmCt", "tAmBt"}
	var b strings.Builder
	b.WriteString(`{"commits":[`)
	for i := range 8 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"group":"g%d","offsets":[`, i)
		for j := range 6 {
			if j > 0 {
				b.WriteByte(',')
			}
			topic, md := names[(i+j)%len(names)], names[(i+j+1)%len(names)]
			fmt.Fprintf(&b, `{"topic":%q,"partition":%d,"offset":%d,"metadata":%q}`, topic, j, i*10+j, md)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	e.must(http.StatusOK, "POST", "/v1/commits", b.String())
	for i := range 8 {
		for j := range 6 {
			topic, md := names[(i+j)%len(names)], names[(i+j+1)%len(names)]
			o, ok, err := e.c.Fetch(fmt.Sprintf("g%d", i), topic, int32(j))
			if err != nil || !ok || o.Offset != int64(i*10+j) || o.Metadata != md {
				t.Errorf("g%d %s/%d: %+v %v %v, want offset %d metadata %s", i, topic, j, o, ok, err, i*10+j, md)
			}
		}
	}
}
