package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Message is one Raft message of one partition's group.
type Message struct {
	Partition int
	Raft      *pb.Message
}

// Transport carries Raft messages to the other nodes, at most once and in
// no particular order: Raft copes with loss, duplicates and reordering.
// Send must not block for long (it runs on a group's goroutine) and must
// not keep msgs or what they point to once it returns: they share memory
// with the group's log (encode them with AppendMessages). The receiving
// end hands what arrives to that node's Node.Receive.
//
// A snapshot does not go through Send: a MsgSnap's snapshot Data is only a
// reference to the leader's snapshot file, and SendSnapshot carries the
// message together with the file, streamed.
type Transport interface {
	Send(msgs []Message)
	// SendSnapshot carries m, a MsgSnap, to its node followed by file, the
	// snapshot file m refers to (size bytes), read as it goes (never
	// whole into memory), and returns once the receiving node has made
	// the file its own and taken the message (Node.ReceiveSnapshot), or
	// why not: the group then reports the snapshot failed, and raft sends
	// another later. It runs on a goroutine of its own, may block as long
	// as the transfer takes, must give up once ctx is done, and must not
	// hold up Send's messages to the same node meanwhile.
	SendSnapshot(ctx context.Context, m Message, file io.Reader, size int64) error
}

// ErrBadMessage reports a message that does not decode.
var ErrBadMessage = errors.New("cluster: bad message")

// maxMessageBytes bounds one encoded message, so that a damaged length
// never makes a reader allocate much.
const maxMessageBytes = 64 << 20

// AppendMessages appends the encoding of msgs to dst:
//
//	| uvarint partition | uvarint len | raftpb.Message (protobuf) | ...
func AppendMessages(dst []byte, msgs []Message) ([]byte, error) {
	for _, m := range msgs {
		var err error
		if dst, err = appendMessage(dst, m); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// appendMessage appends the encoding of m to dst, marshalled in place.
func appendMessage(dst []byte, m Message) ([]byte, error) {
	size := proto.Size(m.Raft)
	dst = binary.AppendUvarint(dst, uint64(m.Partition))
	dst = binary.AppendUvarint(dst, uint64(size))
	start := len(dst)
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, m.Raft)
	if err != nil || len(out)-start != size {
		return dst[:start], fmt.Errorf("cluster: partition %d: marshal message: size %d, not %d: %v", m.Partition, len(out)-start, size, err)
	}
	return out, nil
}

// DecodeMessages decodes what AppendMessages encoded.
func DecodeMessages(b []byte) ([]Message, error) {
	var out []Message
	for len(b) > 0 {
		p, n := binary.Uvarint(b)
		if n <= 0 || p > 1<<20 {
			return nil, fmt.Errorf("%w: partition", ErrBadMessage)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > maxMessageBytes || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: length", ErrBadMessage)
		}
		m := new(pb.Message)
		if err := proto.Unmarshal(b[n:n+int(size)], m); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadMessage, err)
		}
		b = b[n+int(size):]
		out = append(out, Message{Partition: int(p), Raft: m})
	}
	return out, nil
}

// readMessage reads one message of what AppendMessages encoded from r, and
// nothing after it: a streamed snapshot's body starts with its MsgSnap, the
// file follows.
func readMessage(r *bufio.Reader) (Message, error) {
	p, err := binary.ReadUvarint(r)
	if err != nil || p > 1<<20 {
		return Message{}, fmt.Errorf("%w: partition", ErrBadMessage)
	}
	size, err := binary.ReadUvarint(r)
	if err != nil || size > maxMessageBytes {
		return Message{}, fmt.Errorf("%w: length", ErrBadMessage)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	m := new(pb.Message)
	if err := proto.Unmarshal(b, m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	return Message{Partition: int(p), Raft: m}, nil
}
