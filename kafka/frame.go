package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

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

// readFrame reads one size-prefixed frame of at most maxBytes bytes. The
// size is checked before anything is allocated. Each frame gets its own
// buffer: a decoded request's byte fields point into it.
func readFrame(r io.Reader, maxBytes int) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(size[:])))
	if n < 8 || n > int64(maxBytes) { // a header is at least 8 bytes
		return nil, fmt.Errorf("%w: frame of %d bytes (at most %d)", errBadFrame, n, maxBytes)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: truncated frame: %w", errBadFrame, err)
	}
	return buf, nil
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
