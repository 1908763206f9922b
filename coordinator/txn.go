package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/offsetd/offsetd/cache"
)

// Transactional offsets. A producer's transaction commits a group's
// offsets (TxnCommit) that stay pending, apart from the group's committed
// offsets, until the transaction ends (EndTxn): a commit makes them the
// group's committed offsets, an abort drops them. Both are journal records
// (txn commit, txn end), replayed at Open like every other, and a
// snapshot holds the pending offsets as of its index (snapshot txn), so
// offsets pending at a restart are pending after it.
//
// A group's pending offsets are kept per producer id, with the newest
// producer epoch seen: a transaction of an older epoch is fenced
// (ErrProducerFenced), as Kafka fences a zombie producer. Once a
// transaction ends, its producer's epoch is kept (with no offsets) until
// the group is deleted or expires, so that a zombie of an older epoch is
// still fenced. Pending offsets are not the group's: deleting or expiring
// the group leaves them pending, and its commit brings them back.
//
// The end record carries the offsets it makes visible, so that it applies
// without the pending ones: the snapshot captures the pending offsets at
// its own index and each group at another (see snapshot.go), and the
// replay applies an end's pending part and its group part apart.

// ErrProducerFenced reports a transactional commit or end whose producer
// epoch is older than the group has seen for that producer id: a newer
// instance of the producer took over. Nothing was written.
var ErrProducerFenced = errors.New("coordinator: producer fenced")

// errNothingPending fails an end whose group holds nothing of the
// producer's transaction: nothing is written, and EndTxn succeeds.
var errNothingPending = errors.New("coordinator: no pending offsets")

// PendingOffset is one offset of a group pending in a producer's
// transaction.
type PendingOffset struct {
	ProducerID    int64
	ProducerEpoch int16
	Topic         string
	Partition     int32
	Offset
}

// txnOffset is one pending offset, as the table and the records hold it.
type txnOffset struct {
	topicPartition
	Offset cache.Offset
	// at is the index of the txn commit record that wrote it. superseded
	// says a commit of its partition was written after it (a plain
	// commit, or another transaction's offset written later and
	// committed): as in Kafka, the offset written last is kept, so a
	// commit marker leaves the partition as it is. It stays pending
	// until the marker all the same.
	at         uint64
	superseded bool
}

// txnEntry is one producer's state in a group: the newest epoch seen and
// the offsets pending in its transaction.
type txnEntry struct {
	epoch   int16
	offsets map[topicPartition]txnOffset
}

// txnTable is a partition's transactional state. apply changes it (on the
// writer's side, as every table); readers on any goroutine take mu.
type txnTable struct {
	mu     sync.RWMutex
	groups map[string]map[int64]*txnEntry // group → producer id → entry
	// npending counts the pending offsets of every entry, so that a commit
	// looks for pending offsets to supersede only when there are some.
	npending atomic.Int64
}

func newTxnTable() *txnTable {
	return &txnTable{groups: map[string]map[int64]*txnEntry{}}
}

// reset empties the table, before a snapshot replaces it.
func (t *txnTable) reset() {
	t.mu.Lock()
	clear(t.groups)
	t.npending.Store(0)
	t.mu.Unlock()
}

// entry returns the producer's entry in group, made if missing; t.mu is
// held.
func (t *txnTable) entry(group string, producer int64) *txnEntry {
	ps := t.groups[group]
	if ps == nil {
		ps = map[int64]*txnEntry{}
		t.groups[group] = ps
	}
	e := ps[producer]
	if e == nil {
		e = &txnEntry{epoch: -1, offsets: map[topicPartition]txnOffset{}}
		ps[producer] = e
	}
	return e
}

// applyView applies a txn commit at index, a txn end (its pending part)
// or a snapshot txn record, decoded in r.
func (t *txnTable) applyView(p *partition, r *recordView, index uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(string(r.group), r.producerID)
	e.epoch = max(e.epoch, r.producerEp)
	if r.typ == recTxnEnd {
		if r.committed {
			// The offsets it makes visible supersede the others' pending
			// offsets written before them.
			for k, o := range e.offsets {
				if !o.superseded {
					t.supersede(string(r.group), r.producerID, k, o.at)
				}
			}
		}
		t.npending.Add(-int64(len(e.offsets)))
		clear(e.offsets)
		return
	}
	for _, o := range r.offsets {
		k := topicPartition{Topic: string(o.topic), Partition: o.partition}
		x := txnOffset{topicPartition: k, Offset: cache.Offset{
			Offset: o.offset, LeaderEpoch: o.leaderEpoch, Metadata: p.metadata(o.metadata), CommitTime: o.commitTime,
		}, at: index}
		if r.typ == recSnapTxn {
			x.at, x.superseded = o.at, o.superseded
		}
		if _, ok := e.offsets[k]; !ok {
			t.npending.Add(1)
		}
		e.offsets[k] = x
	}
}

// applyCommit marks the pending offsets of group that the commit in r, at
// index, supersedes: every one of its partitions.
func (t *txnTable) applyCommit(r *recordView, index uint64) {
	if t.npending.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.groups[string(r.group)]) == 0 {
		return
	}
	for _, o := range r.offsets {
		t.supersede(string(r.group), -1, topicPartition{Topic: string(o.topic), Partition: o.partition}, index)
	}
}

// supersede marks the offsets pending on k in group, but those of
// producer, that were written before index; t.mu is held.
func (t *txnTable) supersede(group string, producer int64, k topicPartition, index uint64) {
	for id, e := range t.groups[group] {
		if o, ok := e.offsets[k]; ok && id != producer && o.at < index {
			o.superseded = true
			e.offsets[k] = o
		}
	}
}

// dropEnded forgets the producers of group with nothing pending: the group
// was deleted or expired.
func (t *txnTable) dropEnded(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.groups[group]
	for id, e := range ps {
		if len(e.offsets) == 0 {
			delete(ps, id)
		}
	}
	if len(ps) == 0 {
		delete(t.groups, group)
	}
}

// lookup returns the producer's epoch in group and a copy of its pending
// offsets, sorted; ok is false when the group has no entry for it.
func (t *txnTable) lookup(group string, producer int64) (epoch int16, offsets []txnOffset, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e := t.groups[group][producer]
	if e == nil {
		return -1, nil, false
	}
	return e.epoch, sortedOffsets(e.offsets), true
}

func sortedOffsets(m map[topicPartition]txnOffset) []txnOffset {
	out := make([]txnOffset, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b txnOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// txnSnapEntry is one producer's entry of a group, as a snapshot copies it.
type txnSnapEntry struct {
	group    string
	producer int64
	epoch    int16
	offsets  []txnOffset
}

// copyAll copies the table, sorted by group then producer, for a snapshot.
func (t *txnTable) copyAll() []txnSnapEntry {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []txnSnapEntry
	for g, ps := range t.groups {
		for id, e := range ps {
			out = append(out, txnSnapEntry{group: g, producer: id, epoch: e.epoch, offsets: sortedOffsets(e.offsets)})
		}
	}
	slices.SortFunc(out, func(a, b txnSnapEntry) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.producer, b.producer))
	})
	return out
}

// pending returns group's pending offsets, by producer, topic, partition.
func (t *txnTable) pending(group string) []PendingOffset {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []PendingOffset
	for id, e := range t.groups[group] {
		for _, o := range sortedOffsets(e.offsets) {
			out = append(out, PendingOffset{ProducerID: id, ProducerEpoch: e.epoch, Topic: o.Topic, Partition: o.Partition, Offset: toOffset(o.Offset)})
		}
	}
	slices.SortFunc(out, func(a, b PendingOffset) int {
		return cmp.Or(cmp.Compare(a.ProducerID, b.ProducerID), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// producerGroups returns the groups in which producer has offsets pending.
func (t *txnTable) producerGroups(producer int64, out []string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for g, ps := range t.groups {
		if e := ps[producer]; e != nil && len(e.offsets) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// TxnCommit stores group's offsets as pending in the transaction of the
// producer (producerID, producerEpoch): they are durable, but not the
// group's committed offsets (Fetch does not see them) until EndTxn commits
// the transaction. A later TxnCommit of the same producer and partition
// replaces the pending offset. It fails with ErrProducerFenced when the
// group has seen a newer epoch of the producer, and with
// ErrStaleGeneration, as CommitGeneration does, when generation is below
// the group's; either way nothing is written.
func (c *Coordinator) TxnCommit(ctx context.Context, group string, producerID int64, producerEpoch int16, generation int32, offsets []OffsetCommit) error {
	if err := c.validateCommit(group, generation, offsets); err != nil {
		return err
	}
	if err := validProducer(producerID, producerEpoch); err != nil {
		return err
	}
	p := c.groupPartition(group)
	// Open and loaded: Open is done with the meta file.
	if err := c.readable(p); err != nil {
		return err
	}
	if err := c.d.useTxnFormat(); err != nil {
		return err
	}
	offsets = slices.Clone(offsets)
	now := c.opts.Now
	_, err := c.submit(ctx, p, &request{
		typ:        recTxnCommit,
		readsState: true,
		build: func(p *partition, dst []byte) ([]byte, any, error) {
			if epoch, _, ok := p.txns.lookup(group, producerID); ok && producerEpoch < epoch {
				return nil, nil, fmt.Errorf("%w: group %q producer %d epoch %d is below %d", ErrProducerFenced, group, producerID, producerEpoch, epoch)
			}
			if generation != NoGeneration {
				highest := p.batchGen[group]
				if info, ok := p.offsets.Info(group); ok && info.Generation > highest {
					highest = info.Generation
				}
				if generation < highest {
					return nil, nil, fmt.Errorf("%w: group %q generation %d is below %d", ErrStaleGeneration, group, generation, highest)
				}
			}
			return encodeTxnCommit(dst, group, producerID, producerEpoch, generation, now().UnixMilli(), offsets), nil, nil
		},
	})
	return err
}

// EndTxn ends the producer's transaction in group: with commit, its
// pending offsets become the group's committed offsets (each with the
// time of its TxnCommit), replacing those committed before; without, they
// are dropped. It is the transaction marker a Kafka transaction
// coordinator writes. A group with nothing pending of the producer is
// left as it is, and EndTxn succeeds (markers are retried). It fails with
// ErrProducerFenced, writing nothing, when the group has seen a newer
// epoch of the producer than producerEpoch.
func (c *Coordinator) EndTxn(ctx context.Context, group string, producerID int64, producerEpoch int16, commit bool) error {
	if err := validName("group", group); err != nil {
		return err
	}
	if err := validProducer(producerID, producerEpoch); err != nil {
		return err
	}
	_, err := c.submit(ctx, c.groupPartition(group), &request{
		typ:        recTxnEnd,
		readsState: true,
		build: func(p *partition, dst []byte) ([]byte, any, error) {
			epoch, offsets, ok := p.txns.lookup(group, producerID)
			switch {
			case !ok || len(offsets) == 0:
				return nil, nil, errNothingPending
			case producerEpoch < epoch:
				return nil, nil, fmt.Errorf("%w: group %q producer %d epoch %d is below %d", ErrProducerFenced, group, producerID, producerEpoch, epoch)
			}
			if !commit {
				offsets = nil
			}
			// Those a later commit superseded stay as they are.
			offsets = slices.DeleteFunc(offsets, func(o txnOffset) bool { return o.superseded })
			return encodeTxnEnd(dst, group, producerID, producerEpoch, commit, offsets), nil, nil
		},
	})
	if errors.Is(err, errNothingPending) {
		return nil
	}
	return err
}

func validProducer(id int64, epoch int16) error {
	if id < 0 || epoch < 0 {
		return fmt.Errorf("%w: producer id %d epoch %d", ErrInvalid, id, epoch)
	}
	return nil
}

// PendingOffsets returns group's offsets pending in transactions, sorted
// by producer id, topic and partition. OffsetFetch answers "unstable" for
// a partition among them when its client asks for stable offsets.
func (c *Coordinator) PendingOffsets(group string) ([]PendingOffset, error) {
	if err := validName("group", group); err != nil {
		return nil, err
	}
	p := c.groupPartition(group)
	if err := c.readable(p); err != nil {
		return nil, err
	}
	return p.txns.pending(group), nil
}

// TxnGroups returns, sorted, the groups in which the producer has offsets
// pending: those a transaction marker that names only the producer ends.
func (c *Coordinator) TxnGroups(producerID int64) ([]string, error) {
	var out []string
	for _, p := range c.parts {
		if err := c.readable(p); err != nil {
			return nil, err
		}
		out = p.txns.producerGroups(producerID, out)
	}
	slices.Sort(out)
	return out, nil
}
