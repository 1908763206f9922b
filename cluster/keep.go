package cluster

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/offsetd/offsetd/coordinator"
)

// The node owns its journal, and so decides what of it goes: after each
// compaction (Compact) it drops the whole segments below the lowest
// record any group still needs (truncate), which each group's keeper
// knows. A quiet partition whose group alone keeps the journal's oldest
// segment is asked to snapshot once the journal is over its budget
// (coordinator.Coordinator.JournalBudget): with nothing new, its snapshot
// only has the group compact again, which writes its records anew at the
// journal's end and lets the segment go.

// truncate drops the journal's segments that no group needs, and asks the
// partitions whose groups alone keep its oldest segment to snapshot. It
// runs after compactions, on the partitions' snapshot goroutines, one at
// a time.
func (n *Node) truncate() {
	n.truncating.Lock()
	defer n.truncating.Unlock()
	journal := n.data.Journal()
	lowest := journal.LastIndex() + 1
	for _, g := range n.groups {
		lowest = min(lowest, g.keeper.keep.Load())
	}
	start := time.Now()
	count, err := journal.SegmentsBefore(lowest)
	if err == nil && count > 0 {
		err = journal.TruncateFront(lowest)
		if mo, ok := n.observer.(coordinator.MaintenanceObserver); ok {
			mo.ObserveTruncate(time.Since(start), err)
		}
	}
	if err != nil {
		n.opts.Logger.Error("dropping the journal's front failed", "err", err)
		return
	}
	segs, err := journal.Segments()
	if err != nil || len(segs) < 2 || segs[1].First == 0 {
		return
	}
	var total int64
	for _, s := range segs {
		total += s.Bytes
	}
	if total <= n.coord.JournalBudget() {
		return
	}
	for i, g := range n.groups {
		if g.keeper.keep.Load() < segs[1].First {
			n.coord.AskSnapshot(i)
		}
	}
}

// keeper knows which journal records a group still needs: its newest
// snapshot record (or, before one, its first record) and the records of
// the entries after the snapshot. The latest hard state is always written
// after them. The journal may drop whole segments below the lowest point
// any group needs.
type keeper struct {
	snapAt  uint64   // journal index of the newest snapshot record, 0 if none
	firstAt uint64   // journal index of the group's first record
	live    []placed // entries after the snapshot, oldest first, with...
	liveAt  []uint64 // ...the journal index of each
	keep    atomic.Uint64
}

// add notes that the journal record at j holds what p says.
func (k *keeper) add(j uint64, p placed) {
	if k.firstAt == 0 {
		k.firstAt = j
	}
	switch p.typ {
	case recEntry:
		// An entry replaces every entry at its index or after it.
		n := len(k.live)
		for n > 0 && k.live[n-1].index >= p.index {
			n--
		}
		k.live, k.liveAt = append(k.live[:n], p), append(k.liveAt[:n], j)
	case recSnapshot:
		k.snapAt = j
		n := 0
		for n < len(k.live) && (p.kind == snapReceived || k.live[n].index <= p.index) {
			n++
		}
		k.live, k.liveAt = k.live[n:], k.liveAt[n:]
	}
	k.keep.Store(k.from())
}

// from returns the lowest journal index the group needs.
func (k *keeper) from() uint64 {
	at := k.firstAt
	if k.snapAt != 0 {
		at = k.snapAt
	}
	if len(k.liveAt) > 0 {
		at = min(at, k.liveAt[0])
	}
	if at == 0 {
		return math.MaxUint64 // nothing written yet
	}
	return at
}
