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
	recSnapshot  byte = 34
)

// Kinds of snapshot record: the first byte of its payload, before the
// raftpb.SnapshotMetadata.
const (
	snapCompacted byte = 1 // the group compacted its own log up to the index
	snapReceived  byte = 2 // the group's log was replaced by a leader's snapshot
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

// snapshotRecord is the journal record of a snapshot of a group's log.
func snapshotRecord(partition int, kind byte, meta *pb.SnapshotMetadata) (log.Entry, error) {
	b, err := proto.Marshal(meta)
	if err != nil {
		return log.Entry{}, fmt.Errorf("cluster: partition %d: marshal snapshot metadata: %w", partition, err)
	}
	return log.Entry{Partition: partition, Type: recSnapshot, Payload: append([]byte{kind}, b...)}, nil
}

// placed says what a journal record held, for keep.
type placed struct {
	typ   byte
	index uint64 // the raft index of an entry or snapshot
	kind  byte   // of a snapshot
}

// replayed is what the journal holds of a group's log, gathered while it
// is replayed: the newest snapshot record, the entries in journal order
// and the newest hard state. The journal may have dropped the records
// before the snapshot's, but entries after the snapshot can sit before it
// (a compaction writes its record at the journal's end), so the log is
// built once every record has been read (build).
type replayed struct {
	snap    *pb.SnapshotMetadata
	entries []*pb.Entry
	hs      *pb.HardState
	built   bool
	err     error // build's, returned again
}

// add reads one journal record of the group.
func (r *replayed) add(index uint64, e log.Entry) (placed, error) {
	switch e.Type {
	case recSnapshot:
		var meta pb.SnapshotMetadata
		if len(e.Payload) == 0 || (e.Payload[0] != snapCompacted && e.Payload[0] != snapReceived) {
			return placed{}, fmt.Errorf("%w: journal record %d: partition %d: raft snapshot of no known kind", log.ErrCorrupt, index, e.Partition)
		}
		if err := proto.Unmarshal(e.Payload[1:], &meta); err != nil {
			return placed{}, fmt.Errorf("%w: journal record %d: partition %d: raft snapshot: %v", log.ErrCorrupt, index, e.Partition, err)
		}
		if r.snap == nil || meta.GetIndex() > r.snap.GetIndex() || e.Payload[0] == snapReceived {
			r.snap = &meta
		}
		return placed{recSnapshot, meta.GetIndex(), e.Payload[0]}, nil
	case recEntry:
		ent := new(pb.Entry)
		if err := proto.Unmarshal(e.Payload, ent); err != nil {
			return placed{}, fmt.Errorf("%w: journal record %d: partition %d: raft entry: %v", log.ErrCorrupt, index, e.Partition, err)
		}
		if ent.GetIndex() == 0 {
			return placed{}, fmt.Errorf("%w: journal record %d: partition %d: raft entry of index 0", log.ErrCorrupt, index, e.Partition)
		}
		r.entries = append(r.entries, ent)
		return placed{typ: recEntry, index: ent.GetIndex()}, nil
	case recHardState:
		hs := new(pb.HardState)
		if err := proto.Unmarshal(e.Payload, hs); err != nil {
			return placed{}, fmt.Errorf("%w: journal record %d: partition %d: raft hard state: %v", log.ErrCorrupt, index, e.Partition, err)
		}
		r.hs = hs
		return placed{typ: recHardState}, nil
	default:
		return placed{}, fmt.Errorf("%w: journal record %d: partition %d: type %d is not a cluster node's (a single-node data directory?)", log.ErrCorrupt, index, e.Partition, e.Type)
	}
}

// build puts the group's log into s, as etcd's raftexample replays its
// WAL: the snapshot, then every entry after it in the order written (an
// entry replaces any at its index or after it), then the hard state. An
// entry that does not follow the log is one a later entry replaced, whose
// predecessors the journal dropped: it is skipped.
func (r *replayed) build(s *raft.MemoryStorage, partition int) error {
	if !r.built {
		r.built = true
		r.err = r.buildLog(s, partition)
	}
	return r.err
}

func (r *replayed) buildLog(s *raft.MemoryStorage, partition int) error {
	from := uint64(0)
	if r.snap != nil {
		if err := s.ApplySnapshot(&pb.Snapshot{Metadata: r.snap}); err != nil {
			return fmt.Errorf("cluster: partition %d: snapshot %d: %w", partition, r.snap.GetIndex(), err)
		}
		from = r.snap.GetIndex()
	}
	for _, ent := range r.entries {
		last, _ := s.LastIndex()
		if ent.GetIndex() <= from || ent.GetIndex() > last+1 {
			continue
		}
		if err := s.Append([]*pb.Entry{ent}); err != nil {
			return fmt.Errorf("cluster: partition %d: entry %d: %w", partition, ent.GetIndex(), err)
		}
	}
	r.entries = nil
	if r.hs != nil {
		if last, _ := s.LastIndex(); r.hs.GetCommit() > last {
			return fmt.Errorf("%w: partition %d: raft hard state commits %d, the log ends at %d", log.ErrCorrupt, partition, r.hs.GetCommit(), last)
		}
		return s.SetHardState(r.hs)
	}
	return nil
}
