package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errBadFrame reports a frame that cannot be a Kafka request: a size out of
// bounds, a header or body that does not parse, an unknown API key or
// version. The connection that sent it is closed; nothing is written.
var errBadFrame = errors.New("kafka: bad frame")

// request is one decoded request frame.
type request struct {
	key           int16
	version       int16
	correlationID int32
	clientID      string
	// req is the decoded body; nil for an ApiVersions request of a version
	// newer than offsetd knows, which is answered with the versions it
	// does know.
	req kmsg.Request
}

// errIdle reports a connection closed for sending nothing within
// ServerOptions.IdleTimeout, as Kafka closes one: normal, clients reconnect.
var errIdle = errors.New("kafka: connection idle")

// errFrameTimeout reports a frame that did not arrive whole within
// ServerOptions.FrameTimeout of its size, or a response the client did not
// take in that time.
var errFrameTimeout = errors.New("kafka: frame timed out")

// smallFrameBytes is the size up to which a frame's buffer is allocated
// whole and kept out of the queued-bytes budget: a connection's own, like
// its read buffer. Heartbeats, SyncGroups and commits of a few dozen
// partitions fit; so does the first step of a larger frame's buffer.
const smallFrameBytes = 4096

// frameReader reads the request frames of one connection. Between frames
// the connection may stay silent for idle; once a frame's size has arrived
// the rest must arrive within rest. The buffer of a frame above
// smallFrameBytes starts at smallFrameBytes and doubles as it fills, so a
// client that announces a large frame and stalls holds memory for what it
// sent, not for what it announced; every byte of such a buffer is taken
// from budget and given back when the next frame begins (the request has
// then been answered) or the connection ends. Each frame gets its own
// buffer: a decoded request's byte fields point into it.
type frameReader struct {
	r        io.Reader
	conn     deadliner // nil: no deadlines (the fuzz test reads bytes)
	maxBytes int
	idle     time.Duration
	rest     time.Duration
	budget   *budget         // nil: unbounded
	done     <-chan struct{} // closed when the server closes: stop waiting for budget
	held     int64           // budget bytes of the last frame
}

// deadliner is the part of a connection that frameReader sets deadlines on.
type deadliner interface {
	SetReadDeadline(time.Time) error
}

// next reads one size-prefixed frame of at most maxBytes bytes. The size is
// checked before anything is allocated.
func (f *frameReader) next() ([]byte, error) {
	f.release()
	if f.conn != nil {
		f.conn.SetReadDeadline(time.Now().Add(f.idle))
	}
	var size [4]byte
	if got, err := io.ReadFull(f.r, size[:]); err != nil {
		if isTimeout(err) {
			return nil, fmt.Errorf("%w for %s (%d bytes of a frame size)", errIdle, f.idle, got)
		}
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(size[:])))
	if n < 8 || n > int64(f.maxBytes) { // a header is at least 8 bytes
		return nil, fmt.Errorf("%w: frame of %d bytes (at most %d)", errBadFrame, n, f.maxBytes)
	}
	deadline := time.Now().Add(f.rest)
	if f.conn != nil {
		f.conn.SetReadDeadline(deadline)
	}
	buf, err := f.body(int(n), deadline)
	if err != nil {
		switch {
		case isTimeout(err):
			return nil, fmt.Errorf("%w: %d of %d bytes after %s", errFrameTimeout, len(buf), n, f.rest)
		case errors.Is(err, errFrameTimeout):
			return nil, err
		case errors.Is(err, io.EOF):
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: truncated frame (%d of %d bytes): %w", errBadFrame, len(buf), n, err)
	}
	return buf, nil
}

// body reads a frame's n bytes, growing its buffer as they arrive. On error
// it returns what arrived.
func (f *frameReader) body(n int, deadline time.Time) ([]byte, error) {
	if n <= smallFrameBytes {
		buf := make([]byte, n)
		got, err := io.ReadFull(f.r, buf)
		return buf[:got], err
	}
	var buf []byte
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := min(n, max(2*cap(buf), smallFrameBytes))
			more := int64(grown - cap(buf))
			if err := f.budget.take(more, deadline, f.done); err != nil {
				if errors.Is(err, errNoBudget) {
					err = fmt.Errorf("%w: %d of %d bytes, no memory for more within %s (ServerOptions.MaxQueuedBytes is taken)", errFrameTimeout, len(buf), n, f.rest)
				}
				return buf, err
			}
			f.held += more
			buf = append(make([]byte, 0, grown), buf...)
		}
		got, err := f.r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+got]
		if err != nil && len(buf) < n {
			return buf, err
		}
	}
	return buf, nil
}

// release gives back the budget the last frame took.
func (f *frameReader) release() {
	f.budget.give(f.held)
	f.held = 0
}

// isTimeout reports a deadline that passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// parseRequest decodes a frame's request header and body with kmsg.
func parseRequest(frame []byte) (request, error) {
	b := kbin.Reader{Src: frame}
	r := request{key: b.Int16(), version: b.Int16(), correlationID: b.Int32()}
	if id := b.NullableString(); id != nil {
		r.clientID = *id
	}
	if err := b.Complete(); err != nil {
		return r, fmt.Errorf("%w: header: %w", errBadFrame, err)
	}
	req := kmsg.RequestForKey(r.key)
	if req == nil {
		return r, fmt.Errorf("%w: unknown API key %d", errBadFrame, r.key)
	}
	if r.version < 0 || r.version > req.MaxVersion() {
		if r.key == int16(kmsg.ApiVersions) && r.version >= 0 {
			return r, nil // answered with the versions offsetd knows
		}
		return r, fmt.Errorf("%w: %s v%d", errBadFrame, kmsg.NameForKey(r.key), r.version)
	}
	req.SetVersion(r.version)
	if req.IsFlexible() {
		kmsg.SkipTags(&b)
		if err := b.Complete(); err != nil {
			return r, fmt.Errorf("%w: header tags: %w", errBadFrame, err)
		}
	}
	if err := req.ReadFrom(b.Src); err != nil {
		return r, fmt.Errorf("%w: %s v%d: %w", errBadFrame, kmsg.NameForKey(r.key), r.version, err)
	}
	r.req = req
	return r, nil
}

// appendResponse appends resp as a frame answering correlationID.
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	// Flexible responses have a tagged-fields header, except ApiVersions,
	// whose header stays v0 so that any client can read it.
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
