package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/valyala/bytebufferpool"
)

// responseSeeds are answers the lean transport must read as net/http does.
var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{\"version\":1}",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: x\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nEtag: \"7\"\r\nCache-Control: no-cache\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 421 Misdirected Request\r\nX-Offsetd-Leader: 127.0.0.1:9\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end",
	"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 200 OK\nContent-Length: 3\n\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
	"HTTP/1.1 2x0 OK\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 3",
	"",
	strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 5) + "HTTP/1.1 204 No Content\r\n\r\n",
	strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 6) + "HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nContent-Length\t: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nX(y): 1\r\nContent-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\nContent-Length: 268435456\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffff\r\nabc",
}

// bigBody is a body over maxReserve, in one piece.
var bigBody = strings.Repeat("0123456789abcdef", 20000)

// FuzzReadResponse: whatever the bytes, readResponse returns (never
// panics or hangs); an answer it reads, net/http reads with the same
// status and body, unless net/http refuses it.
func FuzzReadResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		buf := bytebufferpool.Get()
		defer bytebufferpool.Put(buf)
		h, err := readResponse(bufio.NewReaderSize(bytes.NewReader(data), 4<<10), "GET", buf, true)
		if err != nil {
			return
		}
		if h.status < 100 || h.status > 999 || h.length > 0 && int64(len(buf.B)) != h.length {
			t.Fatalf("%q: status %d, length %d, %d bytes of body", data, h.status, h.length, len(buf.B))
		}
		if data[9] == '1' {
			return // net/http returns the informational answer itself
		}
		resp, err := http.ReadResponse(bufio.NewReaderSize(bytes.NewReader(data), 4<<10), &http.Request{Method: "GET"})
		if err != nil {
			return
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return
		}
		if resp.StatusCode != h.status || !bytes.Equal(body, buf.B) {
			t.Fatalf("%q: read status %d with %q, net/http %d with %q", data, h.status, buf.B, resp.StatusCode, body)
		}
	})
}

// A Content-Length or a chunk size of 256 MiB on a body of 3 bytes costs
// what arrived, not what was said.
func TestReadResponseGrowsAsBytesArrive(t *testing.T) {
	for _, in := range responseSeeds[20:22] {
		buf := new(bytebufferpool.ByteBuffer) // not the pool's: one may come with room
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := readResponse(bufio.NewReaderSize(strings.NewReader(in), 4<<10), "GET", buf, false)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%q: %v, want %v", in, err, io.ErrUnexpectedEOF)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
			t.Errorf("%q: %d bytes allocated for 3 of body", in, n)
		}
	}
}

// readResponse keeps what the Client reads of a head, and tells a cut
// answer from a malformed one.
func TestReadResponse(t *testing.T) {
	read := func(s string, wantETag bool) (head, string, error) {
		buf := bytebufferpool.Get()
		defer bytebufferpool.Put(buf)
		h, err := readResponse(bufio.NewReader(strings.NewReader(s)), "GET", buf, wantETag)
		return h, string(buf.B), err
	}
	cases := []struct {
		name, in string
		etag     bool
		want     head
		body     string
		err      error
	}{
		{"length", responseSeeds[0], false, head{status: 200, length: 12}, `{"version":1}`[:12], nil},
		{"chunked", responseSeeds[1], false, head{status: 200, length: -1, chunked: true}, "hello, world", nil},
		{"304 with its ETag", responseSeeds[2], true, head{status: 304, length: -1, etag: `"7"`}, "", nil},
		{"304 without", responseSeeds[2], false, head{status: 304, length: -1}, "", nil},
		{"100 skipped", responseSeeds[3], false, head{status: 204, length: -1}, "", nil},
		{"retry after", responseSeeds[4], false, head{status: 503, length: 2, retryAfter: "2"}, "{}", nil},
		{"leader", responseSeeds[5], false, head{status: 421, length: 0, leader: "127.0.0.1:9"}, "", nil},
		{"to the end", responseSeeds[6], false, head{status: 200, length: -1, close: true}, "to the end", nil},
		{"HTTP/1.0", responseSeeds[7], false, head{status: 200, length: 3, close: true}, "abc", nil},
		{"bare LF", responseSeeds[8], false, head{status: 200, length: 3}, "abc", nil},
		{"cut body", responseSeeds[9], false, head{}, "", io.ErrUnexpectedEOF},
		{"cut chunk", responseSeeds[10], false, head{}, "", io.ErrUnexpectedEOF},
		{"two lengths", responseSeeds[11], false, head{}, "", errBadResponse},
		{"bad status", responseSeeds[12], false, head{}, "", errBadResponse},
		{"cut head", responseSeeds[13], false, head{}, "", io.ErrUnexpectedEOF},
		{"nothing", "", false, head{}, "", io.ErrUnexpectedEOF},
		{"five 1xx", responseSeeds[15], false, head{status: 204, length: -1}, "", nil},
		{"six 1xx", responseSeeds[16], false, head{}, "", errBadResponse},
		{"space before colon", responseSeeds[17], false, head{}, "", errBadResponse},
		{"tab before colon", responseSeeds[18], false, head{}, "", errBadResponse},
		{"name not a token", responseSeeds[19], false, head{}, "", errBadResponse},
		{"a length over maxReserve", fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(bigBody), bigBody), false, head{status: 200, length: int64(len(bigBody))}, bigBody, nil},
		{"a chunk over maxReserve", fmt.Sprintf("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n%x\r\n%s\r\n0\r\n\r\n", len(bigBody), bigBody), false, head{status: 200, length: -1, chunked: true}, "abc" + bigBody, nil},
		{"long line", "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("x", 5000) + "\r\n\r\n", false, head{}, "", errBadResponse},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, body, err := read(c.in, c.etag)
			if !errors.Is(err, c.err) || err == nil && (h != c.want || body != c.body) {
				t.Fatalf("got %+v %q %v, want %+v %q %v", h, body, err, c.want, c.body, c.err)
			}
		})
	}
}
