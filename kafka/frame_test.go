package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameOf encodes req as a client would send it.
func frameOf(req kmsg.Request, version int16) []byte {
	req.SetVersion(version)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, 1)
}

func commitRequest(group string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = group
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "orders"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = 0, 5
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// withSize rewrites a frame's size prefix.
func withSize(frame []byte, size int32) []byte {
	out := bytes.Clone(frame)
	binary.BigEndian.PutUint32(out, uint32(size))
	return out
}

// TestBadFrames sends frames that are not Kafka requests: each closes its
// own connection, nothing is written, and the server goes on serving.
func TestBadFrames(t *testing.T) {
	ctx := testContext(t)
	c := openCoordinator(t, t.TempDir())
	const maxFrame = 4096
	addr := listen(t, newHandler(t, c, testHandlerOptions()), ServerOptions{MaxFrameBytes: maxFrame})

	good := frameOf(commitRequest("bad"), 8)
	unknownKey := frameOf(commitRequest("bad"), 8)
	binary.BigEndian.PutUint16(unknownKey[4:], 999)
	cases := []struct {
		name  string
		bytes []byte
		// halfClose ends the client's side after sending, as a client
		// dying mid-frame does.
		halfClose bool
	}{
		{"garbage", append([]byte{0, 0, 0, 16}, []byte("\xff\xfe not kafka at all")[:16]...), false},
		{"negative size", withSize(good, -5), false},
		{"size below a header", withSize(good, 3), false},
		{"oversized", withSize(good, maxFrame+1), false},
		{"truncated frame", good[:len(good)-3], true},
		{"body shorter than its size says", withSize(good[:len(good)-3], int32(len(good)-4-3)), false},
		{"unknown API key", unknownKey, false},
		{"unsupported version (OffsetCommit v10)", frameOf(commitRequest("bad"), 10), false},
		{"version beyond the protocol", func() []byte {
			f := bytes.Clone(good)
			binary.BigEndian.PutUint16(f[6:], 77)
			return f
		}(), false},
		{"only a size", []byte{0, 0, 0, 40}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if tc.halfClose {
				conn.(*net.TCPConn).CloseWrite()
			}
			// The guard deadline only bounds a broken server; a working
			// one closes the connection at once.
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := conn.Read(make([]byte, 64))
			if n != 0 || !errors.Is(err, io.EOF) && !isReset(err) {
				t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
			}
		})
	}
	if groups := c.Groups(); len(groups) != 0 {
		t.Errorf("bad frames wrote groups %v", groups)
	}

	// The same commit, whole, on a fresh connection: the server still
	// serves.
	adm := newAdmin(t, addr)
	var os kadm.Offsets
	os.AddOffset("orders", 0, 5, -1)
	if err := adm.CommitAllOffsets(ctx, "good", os); err != nil {
		t.Fatalf("commit after bad frames: %v", err)
	}
	if o, ok, err := c.Fetch("good", "orders", 0); err != nil || !ok || o.Offset != 5 {
		t.Fatalf("Fetch = %+v, %v, %v", o, ok, err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// TestApiVersionsTooNew answers an ApiVersions newer than offsetd knows with
// v0 and the versions it serves, as Kafka does, so clients can retry lower.
func TestApiVersionsTooNew(t *testing.T) {
	frame := frameOf(kmsg.NewPtrApiVersionsRequest(), 3)
	binary.BigEndian.PutUint16(frame[6:], 99)
	rq, err := parseRequest(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{h: newHandler(t, openCoordinator(t, t.TempDir()), testHandlerOptions()), log: quiet}
	resp, err := s.answer(rq, &connState{authed: true}, Client{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if av.Version != 0 || av.ErrorCode != 35 || len(av.ApiKeys) != len(handlerVersions)-len(consumerProtocol)+len(serverVersions) {
		t.Fatalf("answer v%d code %d with %d keys", av.Version, av.ErrorCode, len(av.ApiKeys))
	}
}

// FuzzFrame feeds arbitrary bytes to the frame reader and request parser:
// they must return an error or a request, never panic or allocate beyond
// the frame limit.
func FuzzFrame(f *testing.F) {
	f.Add(frameOf(commitRequest("g"), 8))
	f.Add(frameOf(commitRequest("g"), 0))
	f.Add(frameOf(kmsg.NewPtrApiVersionsRequest(), 3))
	f.Add(frameOf(kmsg.NewPtrMetadataRequest(), 12))
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType = "g", "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	f.Add(frameOf(join, 9))
	f.Add(frameOf(kmsg.NewPtrOffsetFetchRequest(), 9))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := frameReader{r: bytes.NewReader(data), maxBytes: 1 << 16}
		frame, err := fr.next()
		if err != nil {
			return
		}
		rq, err := parseRequest(frame)
		if err != nil {
			if !errors.Is(err, errBadFrame) {
				t.Fatalf("parse error %v is not errBadFrame", err)
			}
			return
		}
		if rq.req != nil {
			rq.req.AppendTo(nil) // what was decoded encodes again
		}
	})
}
