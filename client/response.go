package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/valyala/bytebufferpool"
)

// errBadResponse is a response the lean transport cannot read as
// HTTP/1.1: a connection that sent one is closed.
var errBadResponse = errors.New("malformed HTTP response")

// head is what the lean transport keeps of a response's status line and
// header: what the Client reads (the status, Retry-After, the leader of a
// 421, an ETag when asked for), and what framing the body has.
type head struct {
	status int
	// length is the body's Content-Length, -1 when the response has none.
	length  int64
	chunked bool
	// close is set when the connection cannot carry another request:
	// Connection: close, an HTTP/1.0 answer without keep-alive, or a body
	// that ends where the connection does.
	close      bool
	retryAfter string
	leader     string
	etag       string
}

// readResponse reads one response to a request of method from br: the
// head, and the body into buf (which it resets). Informational (1xx)
// answers before the final one are skipped. wantETag keeps the ETag
// header. An error leaves the connection unusable.
func readResponse(br *bufio.Reader, method string, buf *bytebufferpool.ByteBuffer, wantETag bool) (head, error) {
	buf.Reset()
	for informational := 0; ; informational++ {
		if informational > maxInformational {
			return head{}, fmt.Errorf("%w: over %d informational (1xx) answers", errBadResponse, maxInformational)
		}
		h, err := readHead(br, wantETag)
		if err != nil {
			return head{}, err
		}
		if h.status >= 200 || h.status == 101 {
			if err := readBody(br, method, &h, buf); err != nil {
				return head{}, err
			}
			return h, nil
		}
	}
}

// maxInformational bounds the 1xx answers skipped before the final one,
// as net/http's transport does: a server that sends them without end
// would otherwise hold the call for good.
const maxInformational = 5

// readHead reads a status line and the header fields after it.
func readHead(br *bufio.Reader, wantETag bool) (head, error) {
	h := head{length: -1}
	line, err := readLine(br)
	if err != nil {
		return head{}, err
	}
	// HTTP/1.x SP 3DIGIT [SP reason]
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		len(line) > 12 && line[12] != ' ' {
		return head{}, fmt.Errorf("%w: status line %q", errBadResponse, clip(line))
	}
	minor := line[7]
	if minor != '0' && minor != '1' {
		return head{}, fmt.Errorf("%w: status line %q", errBadResponse, clip(line))
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return head{}, fmt.Errorf("%w: status line %q", errBadResponse, clip(line))
		}
		h.status = h.status*10 + int(c-'0')
	}
	if h.status < 100 {
		return head{}, fmt.Errorf("%w: status %d", errBadResponse, h.status)
	}
	keepAlive := minor == '1'
	seenLength := false
	for {
		line, err := readLine(br)
		if err != nil {
			return head{}, err
		}
		if len(line) == 0 {
			break
		}
		// A name is a token: no line folding, and no space before the
		// colon, which would hide a Content-Length (RFC 9112 5.1).
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !isToken(line[:colon]) {
			return head{}, fmt.Errorf("%w: header line %q", errBadResponse, clip(line))
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, ok := parseLength(value)
			if !ok || seenLength && n != h.length {
				return head{}, fmt.Errorf("%w: Content-Length %q", errBadResponse, clip(value))
			}
			h.length, seenLength = n, true
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("chunked")) {
				return head{}, fmt.Errorf("%w: Transfer-Encoding %q", errBadResponse, clip(value))
			}
			h.chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				switch tok = bytes.Trim(tok, " \t"); {
				case bytes.EqualFold(tok, []byte("close")):
					h.close = true
				case bytes.EqualFold(tok, []byte("keep-alive")):
					keepAlive = true
				}
			}
		case bytes.EqualFold(name, []byte("Retry-After")):
			h.retryAfter = string(value)
		case bytes.EqualFold(name, []byte(leaderHeader)):
			h.leader = string(value)
		case wantETag && bytes.EqualFold(name, []byte("ETag")):
			h.etag = string(value)
		}
	}
	if h.chunked && minor == '0' {
		h.chunked = false // not HTTP/1.0's: net/http ignores it too
	}
	if h.chunked {
		h.length = -1 // RFC 9112 6.3: Transfer-Encoding overrides Content-Length
	}
	if !keepAlive {
		h.close = true
	}
	return h, nil
}

// readBody reads h's body into buf, as its framing says.
func readBody(br *bufio.Reader, method string, h *head, buf *bytebufferpool.ByteBuffer) error {
	switch {
	case h.status == 204 || h.status == 304 || h.status == 101 || method == "HEAD":
		if h.status == 101 {
			h.close = true
		}
		return nil
	case h.chunked:
		return readChunked(br, buf)
	case h.length >= 0:
		if h.length > maxResponseBytes {
			return fmt.Errorf("a response of %d bytes, over the %d this client reads", h.length, maxResponseBytes)
		}
		return appendBody(br, buf, int(h.length))
	default:
		// The body ends where the connection does.
		h.close = true
		_, err := buf.ReadFrom(io.LimitReader(br, maxResponseBytes+1))
		if err == nil && len(buf.B) > maxResponseBytes {
			return fmt.Errorf("a response over the %d bytes this client reads", maxResponseBytes)
		}
		return err
	}
}

// readChunked reads a chunked body, and its trailer, which it drops.
func readChunked(br *bufio.Reader, buf *bytebufferpool.ByteBuffer) error {
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // a chunk extension
		}
		line = bytes.TrimRight(line, " \t")
		size, ok := parseHex(line)
		if !ok {
			return fmt.Errorf("%w: chunk size %q", errBadResponse, clip(line))
		}
		if size == 0 {
			for {
				line, err := readLine(br)
				if err != nil {
					return err
				}
				if len(line) == 0 {
					return nil
				}
			}
		}
		if int64(len(buf.B))+size > maxResponseBytes {
			return fmt.Errorf("a response over the %d bytes this client reads", maxResponseBytes)
		}
		if err := appendBody(br, buf, int(size)); err != nil {
			return err
		}
		crlf, err := readLine(br)
		if err != nil {
			return err
		}
		if len(crlf) != 0 {
			return fmt.Errorf("%w: chunk of %d bytes not followed by CRLF", errBadResponse, size)
		}
	}
}

// maxReserve bounds the room a body's buffer is given before its bytes
// arrive: a Content-Length or a chunk size is only what the server says,
// and a few bytes of header must not cost hundreds of megabytes.
const maxReserve = 64 << 10

// appendBody appends the next n bytes from br to buf, growing it as they
// arrive (at most doubling what came before, or maxReserve).
func appendBody(br *bufio.Reader, buf *bytebufferpool.ByteBuffer, n int) error {
	b := buf.B
	for n > 0 {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(n, max(len(b), maxReserve)))
		}
		k, err := io.ReadFull(br, b[len(b):len(b)+min(n, cap(b)-len(b))])
		b, n = b[:len(b)+k], n-k
		if err != nil {
			buf.B = b
			return unexpectedEOF(err)
		}
	}
	buf.B = b
	return nil
}

// readLine returns the next line without its CRLF (or bare LF); the bytes
// are valid until the next read from br. A line longer than br's buffer is
// an error.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fmt.Errorf("%w: a line over %d bytes", errBadResponse, br.Size())
	case err != nil:
		return nil, unexpectedEOF(err)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// unexpectedEOF turns an EOF in the middle of a response into
// io.ErrUnexpectedEOF: the connection ended before the answer did.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// isToken reports whether b is an HTTP token (RFC 9110 5.6.2), as a
// header's name must be.
func isToken(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// parseLength reads a Content-Length: decimal digits only.
func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// parseHex reads a chunk size: hexadecimal digits only.
func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		n = n<<4 | int64(c)
	}
	return n, true
}

// clip shortens what an error quotes of a response.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
