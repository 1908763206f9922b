package cache

import (
	"cmp"
	"slices"
)

// minDense is how many partition numbers a topic's offsets hold densely
// before sparseness counts: topics have from one to a few hundred
// partitions, numbered from 0.
const minDense = 32

// slot is one partition's offset: its metadata is a number in the table's
// metadataTable, so a slot holds no pointer (32 bytes, never scanned by
// the garbage collector).
type slot struct {
	offset     int64
	commitTime int64
	metadata   uint32
	epoch      int32
	live       bool
}

// partitions are the offsets of one group on one topic. Partition numbers
// are dense from 0 in practice, so they index a slice; a number far beyond
// the live count (a sparse commit, a negative number from a damaged
// record) goes to a map instead, so that one stray number never allocates
// a huge slice.
type partitions struct {
	topic  string
	live   int            // live offsets, in dense and sparse together
	dense  []slot         // by partition number
	sparse map[int32]slot // numbers outside dense; nil when none
}

// get returns the slot of partition p.
func (ps *partitions) get(p int32) (slot, bool) {
	if uint32(p) < uint32(len(ps.dense)) {
		s := ps.dense[p]
		return s, s.live
	}
	if ps.sparse == nil {
		return slot{}, false
	}
	s, ok := ps.sparse[p]
	return s, ok
}

// denseFor reports whether partition p belongs in the dense slice, growing
// it if p is close enough to the live count.
func (ps *partitions) denseFor(p int32) bool {
	if uint32(p) < uint32(len(ps.dense)) {
		return true
	}
	if p < 0 || int(p) >= max(minDense, 2*ps.live+2) {
		return false
	}
	ps.grow(int(p)+1, 2*cap(ps.dense))
	return true
}

// grow lengthens the dense slice to n numbers, with room for at least
// capacity, and moves the sparse offsets it now covers into it. Slots past
// the length were never written (the length never shrinks), so they are
// zero.
func (ps *partitions) grow(n, capacity int) {
	if n <= len(ps.dense) {
		return
	}
	if n <= cap(ps.dense) {
		ps.dense = ps.dense[:n]
	} else {
		d := make([]slot, n, max(n, capacity))
		copy(d, ps.dense)
		ps.dense = d
	}
	for p, s := range ps.sparse {
		if p >= 0 && int(p) < n {
			ps.dense[p] = s
			delete(ps.sparse, p)
		}
	}
}

// put stores s (live) for partition p and returns the slot it replaced.
func (ps *partitions) put(p int32, s slot) (old slot) {
	if ps.denseFor(p) {
		old = ps.dense[p]
		ps.dense[p] = s
	} else {
		if ps.sparse == nil {
			ps.sparse = make(map[int32]slot)
		}
		old = ps.sparse[p]
		ps.sparse[p] = s
	}
	if !old.live {
		ps.live++
	}
	return old
}

// delete removes partition p and returns the slot it held.
func (ps *partitions) delete(p int32) (old slot) {
	if uint32(p) < uint32(len(ps.dense)) {
		old = ps.dense[p]
		ps.dense[p] = slot{}
	} else if old = ps.sparse[p]; old.live {
		delete(ps.sparse, p)
	}
	if old.live {
		ps.live--
	}
	return old
}

// each calls fn for every live slot, by partition number.
func (ps *partitions) each(fn func(p int32, s slot)) {
	if len(ps.sparse) == 0 {
		for i, s := range ps.dense {
			if s.live {
				fn(int32(i), s)
			}
		}
		return
	}
	keys := make([]int32, 0, len(ps.sparse))
	for p := range ps.sparse {
		keys = append(keys, p)
	}
	slices.SortFunc(keys, cmp.Compare)
	i := 0
	for ; i < len(keys) && keys[i] < 0; i++ {
		fn(keys[i], ps.sparse[keys[i]])
	}
	for p, s := range ps.dense {
		if s.live {
			fn(int32(p), s)
		}
	}
	for _, p := range keys[i:] {
		fn(p, ps.sparse[p])
	}
}
