package server

import (
	"errors"
	"io"
	"net/http"

	"github.com/valyala/bytebufferpool"
)

// readBody reads r's body, at most opts.MaxBodyBytes, into a pooled buffer
// the caller puts back once nothing refers to its bytes. A request with a
// body takes no query parameters.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (*bytebufferpool.ByteBuffer, *apiError) {
	if r.URL.RawQuery != "" {
		if _, e := parseQuery(r); e != nil {
			return nil, e
		}
	}
	// A body within its Content-Length is bounded already; any other is
	// read through MaxBytesReader, which also closes the connection when
	// the limit is hit instead of reading the rest.
	var body io.Reader = r.Body
	if r.ContentLength < 0 || r.ContentLength > s.opts.MaxBodyBytes {
		body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	}
	buf := bytebufferpool.Get()
	if _, err := buf.ReadFrom(body); err != nil {
		bytebufferpool.Put(buf)
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, errorf(http.StatusRequestEntityTooLarge, codeBodyTooLarge, "request body over %d bytes", tooLarge.Limit)
		}
		return nil, errorf(http.StatusBadRequest, codeMalformedJSON, "reading request body: %v", err)
	}
	return buf, nil
}

// jsonContentType is the Content-Type header's value of every JSON
// answer, shared: net/http copies a handler's header before writing it and
// never changes its values.
var jsonContentType = []string{"application/json"}

// writeBody answers with status and body, a JSON value without its final
// newline. Only net/http's own copy of the header is allocated: the
// newline is a write of its own (both land in the response's buffer), not
// an append that may grow body.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	w.Write(body)
	w.Write(newline)
}

var newline = []byte{'\n'}
