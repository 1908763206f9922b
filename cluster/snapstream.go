package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// A snapshot travels beside raft's messages, not inside one: the Data of
// the snapshot raft's storage hands out (storage.Snapshot) is a reference
// to the partition's snapshot file, a few bytes, so that raft's goroutine
// never reads the file. The leader's group hands the MsgSnap to a
// goroutine of its own (sendSnapshot), which opens the file and streams it
// with the message through Transport.SendSnapshot; the follower's
// transport hands both to Node.ReceiveSnapshot, which makes the file the
// partition's own, each record checked, before it steps the message. Its
// persister then finds the file there (group.receive). Only once the
// follower answered does the leader's group report the snapshot finished
// (raft.SnapshotFinish); a transfer that fails or is cut is reported
// failed, and raft sends another.
//
// A leader of an older release sends the whole file inline, in the
// snapshot's Data: group.receive still takes it so.

// snapshotRefMagic starts the Data of a snapshot that refers to its file.
// An older release's inline file starts with the file's own magic, never
// with this.
const snapshotRefMagic = "offsetd-snapref\x00"

// appendSnapshotRef appends the reference to partition's snapshot file
// index to dst:
//
//	| snapshotRefMagic | uvarint partition | uvarint index |
func appendSnapshotRef(dst []byte, partition int, index uint64) []byte {
	dst = append(dst, snapshotRefMagic...)
	dst = binary.AppendUvarint(dst, uint64(partition))
	return binary.AppendUvarint(dst, index)
}

// parseSnapshotRef parses what appendSnapshotRef made; ok is false for
// anything else (an inline file).
func parseSnapshotRef(b []byte) (partition int, index uint64, ok bool) {
	rest, found := bytes.CutPrefix(b, []byte(snapshotRefMagic))
	if !found {
		return 0, 0, false
	}
	p, n := binary.Uvarint(rest)
	if n <= 0 || p > 1<<20 {
		return 0, 0, false
	}
	rest = rest[n:]
	index, n = binary.Uvarint(rest)
	if n <= 0 || n != len(rest) {
		return 0, 0, false
	}
	return int(p), index, true
}

// sendSnapshot streams the snapshot file m, a MsgSnap raft made, refers
// to, on a goroutine of its own, and reports to raft how it went: finished
// once the follower has the file and the message, failed otherwise (raft
// then probes the follower again and sends another). It runs on the
// group's goroutine and keeps a copy of m only.
func (g *group) sendSnapshot(m *pb.Message) {
	m = proto.Clone(m).(*pb.Message)
	n := g.node
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-n.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		to, index := m.GetTo(), m.GetSnapshot().GetMetadata().GetIndex()
		size, err := g.streamSnapshot(ctx, m)
		status := raft.SnapshotFinish
		if err != nil {
			status = raft.SnapshotFailure
			if ctx.Err() == nil {
				n.opts.Logger.Warn("raft snapshot not sent", "partition", g.partition, "to", to, "index", index, "err", err)
			}
		} else {
			n.snapshotsSent.Add(1)
			n.opts.Logger.Info("raft snapshot sent", "partition", g.partition, "to", to, "index", index, "bytes", size)
		}
		select {
		case g.calls <- func(failed error) {
			if failed == nil {
				g.rn.ReportSnapshot(to, status)
			}
		}:
		case <-n.stop:
		}
	}()
}

// streamSnapshot sends m with the file it refers to, and returns the
// file's size.
func (g *group) streamSnapshot(ctx context.Context, m *pb.Message) (int64, error) {
	partition, index, ok := parseSnapshotRef(m.GetSnapshot().GetData())
	if !ok || partition != g.partition {
		return 0, fmt.Errorf("cluster: partition %d: a snapshot to send that refers to no file of it", g.partition)
	}
	f, size, err := g.storage.snaps.Open(index)
	if err != nil {
		return 0, err // replaced by a newer one meanwhile
	}
	defer f.Close()
	return size, g.node.opts.Transport.SendSnapshot(ctx, Message{Partition: g.partition, Raft: m}, f, size)
}

// ReceiveSnapshot takes a snapshot another node streams: m, its MsgSnap,
// refers to the file read from file (to its end), which becomes
// the partition's snapshot file of m's index, durably and each record
// checked (log.Snapshots.Receive: a file of another partition, partition
// count or hash is refused), before m goes to the
// group, as Receive hands it. A failure (the transfer cut, a damaged or
// foreign file) leaves no file behind and drops m; the sender reports
// the snapshot failed and its raft sends another. The transport's
// receiving end calls it, on the goroutine that reads the transfer.
func (n *Node) ReceiveSnapshot(m Message, file io.Reader) error {
	if !n.started.Load() {
		return ErrStopped
	}
	select {
	case <-n.stop:
		return ErrStopped
	default:
	}
	snap := m.Raft.GetSnapshot()
	if m.Partition < 0 || m.Partition >= len(n.groups) || m.Raft.GetType() != pb.MsgSnap || snap == nil {
		return fmt.Errorf("%w: not a snapshot of one of the %d partitions", ErrBadMessage, len(n.groups))
	}
	index := snap.GetMetadata().GetIndex()
	partition, at, ok := parseSnapshotRef(snap.GetData())
	if !ok || partition != m.Partition || at != index {
		return fmt.Errorf("%w: partition %d: snapshot %d refers to no file of it", ErrBadMessage, m.Partition, index)
	}
	g := n.groups[m.Partition]
	if err := g.storage.snaps.Receive(index, file); err != nil {
		return fmt.Errorf("cluster: partition %d: snapshot %d received: %w", m.Partition, index, err)
	}
	n.Receive([]Message{m})
	return nil
}
