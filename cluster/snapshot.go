package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/offsetd/offsetd/log"
)

// A group's snapshots are its partition's snapshot files, which the node
// keeps: the partition writes a snapshot's content to the file the node
// gives it (replica.WriteSnapshot) and restores one from the file the node
// opens for it (replica.ReadSnapshot); names, temporary files, syncs,
// renames and removals are the node's (log.Snapshots, in the data
// directory it owns). A snapshot at raft index S holds the partition's
// state with every entry up to S applied. Once the partition has one (and
// the one before it, to fall back to), it has the group compact its log
// up to the older of the two: the journal records of the entries it
// covers are no longer needed, nor are older snapshots, and a follower
// that needs them gets the snapshot file instead (MsgSnap), which becomes
// its own.

// storage is a group's raft.Storage: a MemoryStorage whose snapshot, when
// raft asks for it to send to a follower, is the partition's newest
// snapshot file, and whose initial configuration is the one as of the
// index the group restarts from (see confStateAt).
type storage struct {
	*raft.MemoryStorage
	partition int
	snaps     *log.Snapshots // the partition's snapshot files, set before raft starts
	conf      *pb.ConfState  // what InitialState returns, set before raft starts
}

// InitialState returns the hard state and the configuration raft restarts
// with.
func (s storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	hs, cs, err := s.MemoryStorage.InitialState()
	if s.conf != nil {
		cs = s.conf
	}
	return hs, cs, err
}

// Snapshot returns the partition's newest snapshot file that the log
// reaches, with its index, term and configuration: a follower that lags
// behind the compacted log then needs only the entries after it, and a new
// replica is sent a snapshot whose configuration has it (raft refuses one
// that does not) as soon as the partition snapshots after adding it. It
// runs on the group's goroutine and reads no file: the snapshot's Data is
// a reference to the file (snapshotRef), which the node streams to the
// follower on a goroutine of its own (group.sendSnapshot).
func (s storage) Snapshot() (*pb.Snapshot, error) {
	snap, err := s.MemoryStorage.Snapshot()
	if err != nil || raft.IsEmptySnap(snap) {
		return snap, err
	}
	at, ok := s.snapshotIndex(snap.GetMetadata().GetIndex())
	if !ok {
		// Replaced by a newer one meanwhile: raft asks again later.
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	if at != snap.GetMetadata().GetIndex() {
		term, err := s.Term(at)
		if err != nil {
			return nil, raft.ErrSnapshotTemporarilyUnavailable
		}
		cs, err := confStateAt(s.MemoryStorage, at)
		if err != nil {
			return nil, raft.ErrSnapshotTemporarilyUnavailable
		}
		snap = &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: &at, Term: &term, ConfState: cs}}
	} else {
		snap = &pb.Snapshot{Metadata: snap.GetMetadata()}
	}
	snap.Data = appendSnapshotRef(nil, s.partition, at)
	return snap, nil
}

// snapshotIndex returns the index of the newest snapshot file the log
// reaches, from the log's own snapshot at compacted on, and whether the
// partition has a file of that index.
func (s storage) snapshotIndex(compacted uint64) (uint64, bool) {
	last, _ := s.LastIndex()
	files, err := s.snaps.List()
	if err != nil {
		return compacted, false
	}
	for _, i := range files { // newest first
		if i > compacted && i <= last || i == compacted {
			return i, true
		}
	}
	return compacted, false
}

// compaction is a Compact on its way to the persister, which answers on
// done.
type compaction struct {
	index uint64
	done  chan error
}

// compact drops the group's log up to index, which the partition's
// snapshot file index holds, and writes the snapshot's record and the
// hard state again at the journal's end, so that the group no longer
// needs any journal record before them but its entries after index. With
// index at or below the last compaction it only writes them again (a
// quiet group that holds the journal's front lets it go). The hard state
// written holds the commit index as of now: the coordinator compacts
// before it writes a new snapshot, which is then never ahead of the
// commit index the journal holds.
func (g *group) compact(p *persister, index uint64) error {
	snap, _ := g.storage.MemoryStorage.Snapshot()
	if index > snap.GetMetadata().GetIndex() {
		if last, _ := g.storage.LastIndex(); index > last {
			return fmt.Errorf("cluster: partition %d: compact to %d, past the log's last index %d", g.partition, index, last)
		}
		cs, err := confStateAt(g.storage.MemoryStorage, index)
		if err != nil {
			return fmt.Errorf("cluster: partition %d: compact to %d: %w", g.partition, index, err)
		}
		if _, err := g.storage.CreateSnapshot(index, cs, nil); err != nil {
			return err
		}
		if err := g.storage.Compact(index); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return err
		}
		snap, _ = g.storage.MemoryStorage.Snapshot()
	}
	meta := snap.GetMetadata()
	p.records = p.records[:0]
	if meta.GetIndex() != 0 {
		r, err := snapshotRecord(g.partition, snapCompacted, meta)
		if err != nil {
			return err
		}
		p.records = append(p.records, r)
	}
	var err error
	p.records, err = appendRecords(p.records, g.partition, nil, g.written.hs)
	var first uint64
	if err == nil {
		first, _, err = g.node.committer.Commit(p.records)
	}
	n := len(p.records)
	clear(p.records)
	if err != nil {
		p.fail(err)
		return err
	}
	if n == 2 {
		g.keeper.add(first, placed{typ: recSnapshot, index: meta.GetIndex(), kind: snapCompacted})
	}
	g.keeper.add(first+uint64(n)-1, placed{typ: recHardState})
	return nil
}

// receive makes a leader's snapshot the partition's snapshot file, durably,
// before the journal records that the log was replaced by it. A streamed
// snapshot (Data a snapshotRef) was already received by
// Node.ReceiveSnapshot before its MsgSnap was stepped: the file only has to
// be there (files appear whole, once durable). A leader of an older
// release sends the file inline, in Data. The partition's own snapshot may
// be written beside it (log.Snapshots allows that, of any index).
// log.Snapshots.Receive checks every record and refuses a file of another
// partition, partition count or hash.
func (g *group) receive(snap *pb.Snapshot) error {
	index := snap.GetMetadata().GetIndex()
	data := snap.GetData()
	if partition, at, ok := parseSnapshotRef(data); ok {
		if partition != g.partition || at != index {
			return fmt.Errorf("cluster: partition %d: snapshot %d received refers to partition %d's snapshot %d", g.partition, index, partition, at)
		}
		f, _, err := g.storage.snaps.Open(index)
		if err != nil {
			return fmt.Errorf("cluster: partition %d: snapshot %d received: the streamed file: %w", g.partition, index, err)
		}
		return f.Close()
	}
	if err := g.storage.snaps.Receive(index, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("cluster: partition %d: snapshot %d received: %w", g.partition, index, err)
	}
	return nil
}

// Compact makes every entry applied durable, asks the node's persister to
// compact the group's log up to index (see group.compact), drops the
// journal's front that no group needs any more (Node.truncate), then the
// partition's snapshots older than index: the group's log no longer
// reaches them, so they are no longer one to fall back to. A snapshot
// above index (the one being written, or a leader's received meanwhile)
// stays.
func (r replica) Compact(ctx context.Context, index uint64) error {
	n := r.g.node
	// Raft hands out committed entries once written here, but under
	// UnsafeNoSync not synced: a snapshot must never cover entries a
	// machine crash could take back.
	if err := n.committer.Sync(); err != nil {
		return err
	}
	done := make(chan error, 1)
	n.persister.put(persistWork{g: r.g, compact: &compaction{index: index, done: done}})
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-n.stop:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err() // done has room for the answer
	}
	n.truncate()
	return r.g.storage.snaps.Prune(index, index)
}

// WriteSnapshot writes the partition's snapshot file of index, whose
// content the partition writes (log.Snapshots.Write: a temporary file,
// synced as it goes and paced, renamed into place). It runs on the
// partition's snapshot goroutine.
func (r replica) WriteSnapshot(index uint64, content func(io.Writer) error) (int64, error) {
	return r.g.storage.snaps.Write(index, content)
}

// ReadSnapshot hands read the content of the partition's snapshot file of
// index, its header checked (log.Snapshots.Restore). It runs on the
// partition's writer, never on a goroutine of the group.
func (r replica) ReadSnapshot(index uint64, read func(io.Reader) error) error {
	return r.g.storage.snaps.Restore(index, read)
}
