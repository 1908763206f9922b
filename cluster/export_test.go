package cluster

import (
	"context"
	"fmt"
	"io"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// WithTicks makes a node's Raft clock tick on what ticks brings instead of
// every Options.TickInterval: a test that stops sending stops the clock.
func WithTicks(o Options, ticks <-chan time.Time) Options {
	o.ticks = ticks
	return o
}

// LeadersChanged returns a channel closed when a group's leader changes.
func (n *Node) LeadersChanged() <-chan struct{} { return n.leaders.Wait() }

// Progressed returns a channel closed on the next tick or configuration
// change.
func (n *Node) Progressed() <-chan struct{} { return n.progress.Wait() }

// RaftStatus returns partition's raft status, as raft prints it.
func (n *Node) RaftStatus(partition int) string {
	var st string
	g := n.groups[partition]
	g.call(context.Background(), func(error) { st = fmt.Sprint(g.rn.Status()) })
	return st
}

// CommitIndex returns partition's commit index as this node knows it.
func (n *Node) CommitIndex(ctx context.Context, partition int) (uint64, error) {
	var commit uint64
	g := n.groups[partition]
	err := g.call(ctx, func(error) { commit = g.rn.BasicStatus().GetCommit() })
	return commit, err
}

// ReadIndex asks partition's group for a read index, as the coordinator
// does once Lead said this node leads.
func (n *Node) ReadIndex(ctx context.Context, partition int) (uint64, error) {
	return replica{n.groups[partition]}.ReadIndex(ctx)
}

// InlineSnapshot returns the MsgSnap to node to that a leader of an older
// release sends for partition: its snapshot's Data holds the whole file.
func (n *Node) InlineSnapshot(ctx context.Context, partition int, to uint64) (Message, error) {
	g := n.groups[partition]
	var snap *pb.Snapshot
	var term uint64
	err := g.call(ctx, func(failed error) {
		if failed == nil {
			snap, failed = g.storage.Snapshot()
		}
		if failed != nil {
			snap = nil
			return
		}
		term = g.rn.BasicStatus().GetTerm()
	})
	if err != nil || snap == nil {
		return Message{}, fmt.Errorf("partition %d: no snapshot to send: %v", partition, err)
	}
	f, size, err := g.storage.snaps.Open(snap.GetMetadata().GetIndex())
	if err != nil {
		return Message{}, err
	}
	defer f.Close()
	snap.Data = make([]byte, size)
	if _, err := io.ReadFull(f, snap.Data); err != nil {
		return Message{}, err
	}
	m := &pb.Message{Type: pb.MsgSnap.Enum(), From: new(n.opts.ID), To: new(to), Term: new(term), Snapshot: snap}
	return Message{Partition: partition, Raft: m}, nil
}
