package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// A cluster node (package cluster) owns its data directory: it opens it
// (OpenDataDir), replays the journal into its replication groups, writes
// the journal and drops its front. Its coordinator's partitions are state
// machines it drives (OpenReplicated): each loads its newest snapshot
// that the group's log allows, then applies, through its writer
// (replicatedWriter), what its group commits, its own records and other
// leaders' alike, in log order, through the same apply path as replay.
// The index of a record, and so the version it gives its group, is its
// index in the group's log.
//
// A replicated partition takes snapshots as a single one does, at indexes
// of its group's log, and then lets its group compact the log (see
// Replica.Compact); a replica that lags behind a leader's compacted log
// receives the leader's snapshot, which its node keeps, and applies it
// whole (Replica.ReadSnapshot).

// LoadFunc loads a replicated partition's snapshot, as the owner of the
// data directory decides: it has restore restore the content of the
// snapshot it picks (restore fails on damage, and may be called again
// with an older one), and returns what it found. A cluster node's picks
// its newest snapshot that its group's log allows
// (DataDir.LoadSnapshot, with the log's first index and the last known
// committed); an error fails the partition's load with it.
type LoadFunc func(partition int, restore func(index uint64, content io.Reader) error) (SnapshotLoad, error)

// OpenReplicated loads the partitions of the data directory d, which its
// caller opened (OpenDataDir) and keeps owning, as state machines of a
// replication: once the caller has replayed the journal (DataDir.Replay),
// load loads each partition's snapshot. It writes nothing: if a partition
// fails, the load's error is returned, and the caller closes d unchanged;
// if all load, the caller carries d's plan out (DataDir.CarryOut) before
// it writes the journal. The partitions serve once Start hands them their
// replicas. Closing the coordinator leaves d open.
func OpenReplicated(d *DataDir, load LoadFunc) (*Coordinator, error) {
	if load == nil {
		return nil, fmt.Errorf("%w: OpenReplicated without load", ErrInvalid)
	}
	c := newCoordinator(d)
	c.load = load
	c.loadAll()
	if err := c.loadErrors(); err != nil {
		c.closeAll()
		return nil, err
	}
	c.startSweeper()
	return c, nil
}

// AppliedIndex returns the index partition's tables hold once loaded by
// OpenReplicated (that of the snapshot it loaded): its group hands it the
// committed entries after it.
func (c *Coordinator) AppliedIndex(partition int) uint64 { return c.parts[partition].lastSnapshot }

// Start gives each partition of a coordinator that OpenReplicated opened
// its replica, in partition order, and starts their writers: from now on
// they build requests against their tables, propose them to their
// replicas, and apply what the replicas commit.
func (c *Coordinator) Start(replicas []Replica) error {
	if c.load == nil {
		return fmt.Errorf("%w: Start is for a coordinator that OpenReplicated opened", ErrInvalid)
	}
	if len(replicas) != len(c.parts) {
		return fmt.Errorf("%w: %d replicas for %d partitions", ErrInvalid, len(replicas), len(c.parts))
	}
	for _, p := range c.parts {
		if p.w != nil || p.state.Load() != stateLoading {
			return fmt.Errorf("%w: partition %d started already, or failed to load", ErrInvalid, p.id)
		}
	}
	for _, p := range c.parts {
		p.applied = p.lastSnapshot
		p.w = newReplicatedWriter(p, replicas[p.id])
	}
	c.startWriters()
	return nil
}

// Replica is one partition's replicated log, as its writer uses it.
type Replica interface {
	// Propose appends data to the group's log as consecutive entries, if
	// this node leads the group, and returns their term and the index of
	// the first. They are committed when they come back from Committed
	// with that term; entries of a later term at those indexes mean they
	// were not, and never will be.
	Propose(ctx context.Context, data [][]byte) (term, first uint64, err error)
	// Committed delivers the group's committed entries, in log order,
	// each once, and an empty batch when the leader changes; it is closed
	// when the replica stops.
	Committed() <-chan []Committed
	// Lead returns the node that leads the group as this node knows it (0
	// if none), and, when that is this node, the index of the first entry
	// of its term: before that entry is applied, a new leader's tables may
	// miss committed records, so it takes no requests yet.
	Lead() (leader uint64, termStart uint64)
	// ID returns this node's id in the group.
	ID() uint64
	// ReadIndex returns the group's commit index as its leader confirms
	// it with a quorum, after the call began: once this node has applied
	// it, its tables hold every write acknowledged before the call. An
	// error that is ErrNotLeader means this node lost the lead meanwhile.
	ReadIndex(ctx context.Context) (uint64, error)
	// Compact is called before the partition writes a snapshot: it
	// returns once every entry the partition applied is durable, and the
	// group no longer needs its log up to index, which a durable snapshot
	// of the partition holds, nor the partition's snapshots older than
	// it, which it drops; the journal's owner may then drop what no group
	// needs. An index at or below the last compaction drops no more of
	// the log but has the group rewrite what it needs at the journal's end
	// (a quiet partition that holds the journal's front lets it go).
	Compact(ctx context.Context, index uint64) error
	// WriteSnapshot keeps the partition's snapshot as of index, whose
	// content writes to the writer it is given, and returns its size in
	// bytes: once it returns nil the snapshot is durable, and the one the
	// group sends a replica that lags behind its compacted log; if content
	// or the storage fails, nothing of it is kept. It runs beside the
	// partition's writer, never on a goroutine of the group.
	WriteSnapshot(index uint64, content func(io.Writer) error) (int64, error)
	// ReadSnapshot hands read the content of the partition's snapshot as
	// of index, a leader's that Committed announced (Snapshot set), once
	// its header is checked: the content's own damage is found as read
	// decodes it.
	ReadSnapshot(index uint64, read func(content io.Reader) error) error
}

// Committed is one committed entry of a replicated log. Data is nil for
// the entries the replication writes for itself (a new leader's empty
// entry, a configuration change): they take an index and change nothing.
// Snapshot marks a leader's snapshot received in place of the entries up
// to Index, which replaces the tables (Replica.ReadSnapshot reads it).
type Committed struct {
	Index, Term uint64
	Data        []byte
	Snapshot    bool
}

// ErrNotLeader reports a write sent to a node that does not lead the
// partition's replication group; a *NotLeaderError names the leader.
var ErrNotLeader = errors.New("coordinator: not the partition's leader")

// ErrLeadershipLost reports a replicated write whose node lost the lead
// before it learnt whether the write was committed: it may be, or not.
// Retry it, on the new leader, if writing it twice does no harm (a commit
// of the same offsets does none).
var ErrLeadershipLost = errors.New("coordinator: leadership lost, the write may or may not be committed")

// ErrNotCommitted reports a replicated write that is certainly not in the
// log: leadership changed before it was committed. Retry it.
var ErrNotCommitted = errors.New("coordinator: not committed, leadership changed")

// NotLeaderError is ErrNotLeader with the partition and the node that
// leads it (0 when unknown, during an election).
type NotLeaderError struct {
	Partition int
	Leader    uint64
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("coordinator: partition %d: not the leader (leader %d)", e.Partition, e.Leader)
}

// Unwrap makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// Barrier returns once this node leads the partition of group and has
// applied every write acknowledged, by any node, before Barrier was
// called: reads of the group that follow it are linearizable. It uses
// Raft's ReadIndex: the leader confirms with a quorum that it still leads,
// then waits to have applied up to its commit index. On one node it
// returns at once.
func (c *Coordinator) Barrier(ctx context.Context, group string) error {
	return c.barrier(ctx, c.groupPartition(group))
}

// TopicBarrier is Barrier for the partition of a static topic: reads of
// its mappings and routes that follow it are linearizable.
func (c *Coordinator) TopicBarrier(ctx context.Context, topic string) error {
	return c.barrier(ctx, c.topicPartition(topic))
}

func (c *Coordinator) barrier(ctx context.Context, p *partition) error {
	if err := c.readable(p); err != nil {
		return err
	}
	return p.w.barrier(ctx)
}

// Leader returns the replication id of the node that leads the partition
// of group, as this node knows it, and whether that is this node; 0 when
// unknown. On one node this node always leads, as id 0.
func (c *Coordinator) Leader(group string) (leader uint64, self bool) {
	return c.leader(c.groupPartition(group))
}

// TopicLeader is Leader for the partition of a static topic.
func (c *Coordinator) TopicLeader(topic string) (leader uint64, self bool) {
	return c.leader(c.topicPartition(topic))
}

func (c *Coordinator) leader(p *partition) (leader uint64, self bool) {
	if c.load == nil {
		return 0, true
	}
	if p.state.Load() == stateLoading || p.w == nil { // loading, or failed to
		return 0, false
	}
	return p.w.lead()
}
