package cluster

import (
	"math"
	"sync/atomic"
)

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
