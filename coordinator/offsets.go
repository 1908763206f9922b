package coordinator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/offsetd/offsetd/cache"
)

// OffsetCommit is one offset in a Commit call.
type OffsetCommit struct {
	Topic     string
	Partition int32
	// Offset is the next offset the group will consume; -1 means none.
	Offset int64
	// LeaderEpoch is the partition leader epoch the offset was read at, or -1.
	LeaderEpoch int32
	// Metadata is free text the consumer keeps with its offset, at most
	// Options.MaxMetadataBytes.
	Metadata string
}

// Offset is a group's committed position on one topic partition.
type Offset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	// CommitTime is when the coordinator wrote the commit.
	CommitTime time.Time
}

// PartitionOffset is one entry of a group's offsets.
type PartitionOffset struct {
	Topic     string
	Partition int32
	Offset
}

// GroupInfo describes a consumer group.
type GroupInfo struct {
	// Version is the log index of the group's last change; it grows with
	// every change, so polling clients can tell whether anything changed.
	Version uint64
	// LastCommit is the time of the group's newest commit.
	LastCommit time.Time
	// Generation is the highest consumer-group generation a commit carried,
	// or -1.
	Generation int32
	// Offsets counts the group's offsets.
	Offsets int
}

// NoGeneration is the generation of a commit that does not take part in
// generation fencing, as a simple consumer's.
const NoGeneration int32 = -1

// Commit durably stores a group's offsets. The offsets of one call are one
// log entry: after a crash, all of them are there or none. Commit returns
// once the entry is durable (synced in the journal; in a cluster, committed
// by a quorum of the partition's group) and visible to Fetch.
func (c *Coordinator) Commit(ctx context.Context, group string, offsets []OffsetCommit) error {
	_, err := c.CommitGeneration(ctx, group, NoGeneration, offsets)
	return err
}

// CommitGeneration is Commit with generation fencing: when generation is not
// NoGeneration and is lower than the highest generation already committed for
// the group, the commit fails with ErrStaleGeneration and writes nothing. It
// returns the group's new version.
func (c *Coordinator) CommitGeneration(ctx context.Context, group string, generation int32, offsets []OffsetCommit) (uint64, error) {
	r, err := c.commitRequest(group, generation, offsets)
	if err != nil {
		return 0, err
	}
	return c.commit(ctx, group, r)
}

// StoreGeneration durably raises the group's generation without committing
// an offset. A group coordinator stores a generation before the members
// learn it, as Kafka stores a group before answering its members, so that
// after a restart or a change of leader it never hands the same generation
// to another membership. Like CommitGeneration, it fails with
// ErrStaleGeneration when a higher generation is stored. A generation alone
// keeps no group alive: for a group without offsets nothing is kept.
func (c *Coordinator) StoreGeneration(ctx context.Context, group string, generation int32) error {
	if err := validName("group", group); err != nil {
		return err
	}
	if generation < 0 {
		return fmt.Errorf("%w: generation %d", ErrInvalid, generation)
	}
	_, err := c.commit(ctx, group, c.newCommitRequest(group, generation, nil))
	return err
}

// commit writes a commit request of group.
func (c *Coordinator) commit(ctx context.Context, group string, r *request) (uint64, error) {
	w, err := c.startCommit(ctx, c.groupPartition(group), r)
	if err != nil {
		return 0, err
	}
	res, err := w.wait(ctx)
	return res.index, err
}

// commitWait is a commit started by startCommit.
type commitWait struct {
	p    *partition
	r    *request
	pend pending
}

// startCommit starts r, a commit, on partition p.
func (c *Coordinator) startCommit(ctx context.Context, p *partition, r *request) (commitWait, error) {
	pend, err := c.start(ctx, p, r)
	return commitWait{p: p, r: r, pend: pend}, err
}

// wait waits for the commit's result, and puts its request back for reuse
// once it has it.
func (w commitWait) wait(ctx context.Context) (result, error) {
	res, ok := w.p.w.wait(ctx, w.r, w.pend)
	if !ok {
		return result{}, ctx.Err()
	}
	w.r.release()
	return res, res.err
}

// GroupCommit is one group's commit in a CommitMany call.
type GroupCommit struct {
	Group string
	// Generation is the consumer-group generation, or NoGeneration.
	Generation int32
	Offsets    []OffsetCommit
}

// CommitResult is the outcome of one GroupCommit: the group's new version,
// or why nothing was written.
type CommitResult struct {
	Version uint64
	Err     error
}

// CommitMany commits the offsets of several groups at once, as many
// CommitGeneration calls made together would: each commit is its own
// atomic, durable write with its own generation check, and succeeds or
// fails alone; they share fsyncs. results[i] is the outcome of commits[i].
// A commit whose ctx ends before it is answered fails with ctx's error; it
// may still be written. It is for servers that receive many commits in one
// request, without a goroutine for each.
func (c *Coordinator) CommitMany(ctx context.Context, commits []GroupCommit) []CommitResult {
	results := make([]CommitResult, len(commits))
	waits := make([]commitWait, len(commits))
	for i, gc := range commits {
		r, err := c.commitRequest(gc.Group, gc.Generation, gc.Offsets)
		if err == nil {
			waits[i], err = c.startCommit(ctx, c.groupPartition(gc.Group), r)
		}
		results[i].Err = err
	}
	// The commits that started their batch are waited for first: each
	// applies its batch, which the others may have joined (see
	// localWriter.wait).
	for _, leads := range []bool{true, false} {
		for i, w := range waits {
			if results[i].Err == nil && w.pend.leads == leads {
				res, err := w.wait(ctx)
				results[i] = CommitResult{Version: res.index, Err: err}
			}
		}
	}
	return results
}

// commitRequest validates a commit and makes its request. The request
// holds offsets as they are: the replicated writer copies them (its
// goroutine may build the commit after its caller gave up).
func (c *Coordinator) commitRequest(group string, generation int32, offsets []OffsetCommit) (*request, error) {
	if err := c.validateCommit(group, generation, offsets); err != nil {
		return nil, err
	}
	return c.newCommitRequest(group, generation, offsets), nil
}

// newCommitRequest makes the request of a checked commit. Commit requests
// are reused (commitRequests): a commit allocates nothing of its own on
// its way.
func (c *Coordinator) newCommitRequest(group string, generation int32, offsets []OffsetCommit) *request {
	r := commitRequests.Get().(*request)
	r.commit = commitArgs{group: group, generation: generation, offsets: offsets, now: c.opts.Now}
	return r
}

// commitRequests holds commit requests, each with its done channel, for
// reuse. A request goes back only once its caller has read its result
// (release): nothing refers to it after that.
var commitRequests = sync.Pool{New: func() any {
	return &request{typ: recCommit, done: make(chan result, 1)}
}}

// release puts r, a commit request whose result its caller has read,
// back for reuse.
func (r *request) release() {
	*r = request{typ: recCommit, done: r.done}
	commitRequests.Put(r)
}

// commitArgs are a commit request's inputs.
type commitArgs struct {
	group      string
	generation int32
	offsets    []OffsetCommit
	now        func() time.Time
}

// build checks the commit's generation against the group's and appends
// its record to dst.
func (a *commitArgs) build(p *partition, dst []byte) ([]byte, error) {
	if a.generation != NoGeneration {
		highest := p.batchGen[a.group]
		if info, ok := p.offsets.Info(a.group); ok && info.Generation > highest {
			highest = info.Generation
		}
		if a.generation < highest {
			return nil, fmt.Errorf("%w: group %q generation %d is below %d", ErrStaleGeneration, a.group, a.generation, highest)
		}
		p.batchGen[a.group] = a.generation
	}
	return encodeCommit(dst, a.group, a.generation, a.now().UnixMilli(), a.offsets), nil
}

func (c *Coordinator) validateCommit(group string, generation int32, offsets []OffsetCommit) error {
	if err := validName("group", group); err != nil {
		return err
	}
	if generation < NoGeneration {
		return fmt.Errorf("%w: generation %d", ErrInvalid, generation)
	}
	if len(offsets) == 0 {
		return fmt.Errorf("%w: commit of group %q has no offsets", ErrInvalid, group)
	}
	if len(offsets) > MaxOffsetsPerCommit {
		return fmt.Errorf("%w: commit of group %q has %d offsets (at most %d)", ErrInvalid, group, len(offsets), MaxOffsetsPerCommit)
	}
	for i, o := range offsets {
		if err := validName("topic", o.Topic); err != nil {
			return fmt.Errorf("offsets[%d]: %w", i, err)
		}
		if o.Partition < 0 {
			return fmt.Errorf("%w: offsets[%d]: partition %d", ErrInvalid, i, o.Partition)
		}
		if o.Offset < -1 {
			return fmt.Errorf("%w: offsets[%d]: offset %d (at least -1)", ErrInvalid, i, o.Offset)
		}
		if o.LeaderEpoch < -1 {
			return fmt.Errorf("%w: offsets[%d]: leader epoch %d (at least -1)", ErrInvalid, i, o.LeaderEpoch)
		}
		if limit := max(c.opts.MaxMetadataBytes, 0); len(o.Metadata) > limit {
			return fmt.Errorf("%w: offsets[%d]: metadata of %d bytes (at most %d)", ErrInvalid, i, len(o.Metadata), limit)
		}
		if !utf8.ValidString(o.Metadata) {
			return fmt.Errorf("%w: offsets[%d]: metadata is not valid UTF-8", ErrInvalid, i)
		}
	}
	return nil
}

// validName checks a group, topic or scope name.
func validName(field, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, field)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: %s of %d bytes (at most %d)", ErrInvalid, field, len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	}
	return nil
}

// Fetch returns the group's committed offset on topic and partition; ok is
// false when there is none.
func (c *Coordinator) Fetch(group, topic string, partition int32) (o Offset, ok bool, err error) {
	if len(group) == 0 || len(group) > MaxNameBytes || len(topic) == 0 || len(topic) > MaxNameBytes || partition < 0 {
		return Offset{}, false, fmt.Errorf("%w: fetch of group %q topic %q partition %d", ErrInvalid, group, topic, partition)
	}
	p := c.groupPartition(group)
	if err := c.readable(p); err != nil {
		return Offset{}, false, err
	}
	v, ok := p.offsets.Get(group, topic, partition)
	if !ok {
		return Offset{}, false, nil
	}
	return toOffset(v), true, nil
}

func toOffset(v cache.Offset) Offset {
	return Offset{Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata, CommitTime: time.UnixMilli(v.CommitTime)}
}

// FetchGroup returns every offset of group, sorted by topic then partition.
// A group without offsets has none: the result is empty, not an error.
func (c *Coordinator) FetchGroup(group string) ([]PartitionOffset, error) {
	out, _, err := c.GroupOffsets(group)
	return out, err
}

// GroupOffsets is FetchGroup with the group's description, whose Version
// matches the offsets returned.
func (c *Coordinator) GroupOffsets(group string) ([]PartitionOffset, GroupInfo, error) {
	if err := validName("group", group); err != nil {
		return nil, GroupInfo{}, err
	}
	p := c.groupPartition(group)
	if err := c.readable(p); err != nil {
		return nil, GroupInfo{}, err
	}
	entries, info, ok := p.offsets.Group(group, nil)
	if !ok {
		return []PartitionOffset{}, GroupInfo{Generation: NoGeneration}, nil
	}
	out := make([]PartitionOffset, len(entries))
	for i, e := range entries {
		out[i] = PartitionOffset{Topic: e.Topic, Partition: e.Partition, Offset: toOffset(e.Offset)}
	}
	return out, toGroupInfo(info), nil
}

func toGroupInfo(info cache.GroupInfo) GroupInfo {
	return GroupInfo{Version: info.Version, LastCommit: time.UnixMilli(info.LastCommit), Generation: info.Generation, Offsets: info.Offsets}
}

// Group describes group; ok is false when it has no offsets.
func (c *Coordinator) Group(group string) (info GroupInfo, ok bool, err error) {
	if err := validName("group", group); err != nil {
		return GroupInfo{}, false, err
	}
	p := c.groupPartition(group)
	if err := c.readable(p); err != nil {
		return GroupInfo{}, false, err
	}
	ci, ok := p.offsets.Info(group)
	if !ok {
		return GroupInfo{Generation: NoGeneration}, false, nil
	}
	return toGroupInfo(ci), true, nil
}

// WatchGroup returns the group's version and a channel that is closed at the
// group's next change (a commit or delete of this group; the other groups
// of its partition do not close it): a long poll waits on the channel, then
// compares versions again. stop ends the watch; call it once done waiting,
// whether the channel was closed or not.
func (c *Coordinator) WatchGroup(group string) (version uint64, changed <-chan struct{}, stop func(), err error) {
	if err := validName("group", group); err != nil {
		return 0, nil, nil, err
	}
	p := c.groupPartition(group)
	if err := c.readable(p); err != nil {
		return 0, nil, nil, err
	}
	// Watch before reading, so that a change between the two is not missed.
	changed, stop = p.watchers.watchGroup(group)
	info, _ := p.offsets.Info(group)
	return info.Version, changed, stop, nil
}

// Groups returns the name of every group with at least one offset, sorted.
func (c *Coordinator) Groups() []string {
	return c.sortedGroups()
}

// DeleteGroup removes every offset of group with one tombstone record. It
// fails with ErrNotFound, writing nothing, when the group has no offsets.
func (c *Coordinator) DeleteGroup(ctx context.Context, group string) error {
	if err := validName("group", group); err != nil {
		return err
	}
	_, err := c.submit(ctx, c.groupPartition(group), &request{
		typ:        recDeleteGroup,
		readsState: true,
		build: func(p *partition, dst []byte) ([]byte, any, error) {
			if _, ok := p.offsets.Info(group); !ok {
				return nil, nil, fmt.Errorf("%w: group %q", ErrNotFound, group)
			}
			return encodeDeleteGroup(dst, group), nil, nil
		},
	})
	return err
}

type topicPartition = cache.TopicPartition

// DeleteOffsets removes the group's offsets on topic: on the given
// partitions, or on every partition when none is given. It writes one
// tombstone record for the offsets that exist and fails with ErrNotFound,
// writing nothing, when none of them does.
func (c *Coordinator) DeleteOffsets(ctx context.Context, group, topic string, partitions ...int32) error {
	if err := validName("group", group); err != nil {
		return err
	}
	if err := validName("topic", topic); err != nil {
		return err
	}
	if len(partitions) > MaxOffsetsPerCommit {
		return fmt.Errorf("%w: %d partitions (at most %d)", ErrInvalid, len(partitions), MaxOffsetsPerCommit)
	}
	for _, part := range partitions {
		if part < 0 {
			return fmt.Errorf("%w: partition %d", ErrInvalid, part)
		}
	}
	partitions = slices.Clone(partitions)
	_, err := c.submit(ctx, c.groupPartition(group), &request{
		typ:        recDeleteOffsets,
		readsState: true,
		build: func(p *partition, dst []byte) ([]byte, any, error) {
			var keys []topicPartition
			entries, _, _ := p.offsets.Group(group, nil)
			for _, e := range entries {
				if e.Topic == topic && (len(partitions) == 0 || containsPartition(partitions, e.Partition)) {
					keys = append(keys, e.TopicPartition)
				}
			}
			if len(keys) == 0 {
				return nil, nil, fmt.Errorf("%w: offsets of group %q on topic %q", ErrNotFound, group, topic)
			}
			return encodeDeleteOffsets(dst, group, keys), nil, nil
		},
	})
	return err
}

func containsPartition(parts []int32, p int32) bool {
	for _, q := range parts {
		if q == p {
			return true
		}
	}
	return false
}
