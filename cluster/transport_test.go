package cluster_test

import (
	"errors"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/offsetd/offsetd/cluster"
)

// FuzzDecodeMessages feeds arbitrary bytes, as a Raft POST from anyone
// may carry: DecodeMessages never panics, refuses with ErrBadMessage, and
// what it accepts encodes again into bytes that decode to the same
// messages.
func FuzzDecodeMessages(f *testing.F) {
	seed := func(msgs ...cluster.Message) []byte {
		b, err := cluster.AppendMessages(nil, msgs)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add([]byte{})
	f.Add(seed(cluster.Message{Partition: 3, Raft: &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(7))}}))
	f.Add(seed(
		cluster.Message{Partition: 0, Raft: &pb.Message{Type: pb.MsgApp.Enum(), To: new(uint64(2)), Index: new(uint64(9)),
			Entries: []*pb.Entry{{Index: new(uint64(10)), Term: new(uint64(2)), Data: []byte("commit")}}}},
		cluster.Message{Partition: 15, Raft: &pb.Message{Type: pb.MsgSnap.Enum(), To: new(uint64(3)),
			Snapshot: &pb.Snapshot{Data: []byte("snap"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(40)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}}},
	))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}) // a partition varint too long
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})                            // a length beyond the bytes
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := cluster.DecodeMessages(b)
		if err != nil {
			if !errors.Is(err, cluster.ErrBadMessage) {
				t.Fatalf("error %v is not ErrBadMessage", err)
			}
			return
		}
		for _, m := range msgs {
			if m.Partition < 0 || m.Raft == nil {
				t.Fatalf("accepted a message of partition %d, raft %v", m.Partition, m.Raft)
			}
		}
		re, err := cluster.AppendMessages(nil, msgs)
		if err != nil {
			t.Fatalf("accepted messages do not encode: %v", err)
		}
		again, err := cluster.DecodeMessages(re)
		if err != nil || len(again) != len(msgs) {
			t.Fatalf("re-encoded messages decode to %d, %v; want %d", len(again), err, len(msgs))
		}
		for i := range msgs {
			if again[i].Partition != msgs[i].Partition || !proto.Equal(again[i].Raft, msgs[i].Raft) {
				t.Fatalf("message %d: %v of partition %d re-decodes as %v of partition %d", i, msgs[i].Raft, msgs[i].Partition, again[i].Raft, again[i].Partition)
			}
		}
	})
}
