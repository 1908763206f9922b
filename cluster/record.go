package cluster

import (
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/offsetd/offsetd/log"
)

// Journal record types of a cluster node; see the package documentation.
// They are part of the on-disk format: never renumber them.
const (
	recEntry     byte = 32
	recHardState byte = 33
)

// appendRecords appends to dst the journal records that make a Ready's
// entries and hard state durable.
func appendRecords(dst []log.Entry, partition int, entries []*pb.Entry, hs *pb.HardState) ([]log.Entry, error) {
	for _, e := range entries {
		b, err := proto.Marshal(e)
		if err != nil {
			return dst, fmt.Errorf("cluster: partition %d: marshal entry %d: %w", partition, e.GetIndex(), err)
		}
		dst = append(dst, log.Entry{Partition: partition, Type: recEntry, Payload: b})
	}
	if !raft.IsEmptyHardState(hs) {
		b, err := proto.Marshal(hs)
		if err != nil {
			return dst, fmt.Errorf("cluster: partition %d: marshal hard state: %w", partition, err)
		}
		dst = append(dst, log.Entry{Partition: partition, Type: recHardState, Payload: b})
	}
	return dst, nil
}

// replayRecord puts one journal record back into its group's storage.
func replayRecord(s *raft.MemoryStorage, index uint64, e log.Entry) error {
	switch e.Type {
	case recEntry:
		var ent pb.Entry
		if err := proto.Unmarshal(e.Payload, &ent); err != nil {
			return fmt.Errorf("%w: journal record %d: partition %d: raft entry: %v", log.ErrCorrupt, index, e.Partition, err)
		}
		last, _ := s.LastIndex()
		if ent.GetIndex() == 0 || ent.GetIndex() > last+1 {
			return fmt.Errorf("%w: journal record %d: partition %d: raft entry %d follows entry %d", log.ErrCorrupt, index, e.Partition, ent.GetIndex(), last)
		}
		return s.Append([]*pb.Entry{&ent})
	case recHardState:
		var hs pb.HardState
		if err := proto.Unmarshal(e.Payload, &hs); err != nil {
			return fmt.Errorf("%w: journal record %d: partition %d: raft hard state: %v", log.ErrCorrupt, index, e.Partition, err)
		}
		return s.SetHardState(&hs)
	default:
		return fmt.Errorf("%w: journal record %d: partition %d: type %d is not a cluster node's (a single-node data directory?)", log.ErrCorrupt, index, e.Partition, e.Type)
	}
}
