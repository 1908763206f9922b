package cache

import (
	"cmp"
	"slices"
)

// minDense is how many partition numbers a topic's offsets hold densely
// before sparseness counts: topics have from one to a few hundred
// partitions, numbered from 0.
const minDense = 32

// slot is one partition's offset in a dense run. It is an Offset with a
// live mark packed into its padding (40 bytes, as Offset).
type slot struct {
	offset     int64
	commitTime int64
	metadata   string
	epoch      int32
	live       bool
}

func (s *slot) value() Offset {
	return Offset{Offset: s.offset, LeaderEpoch: s.epoch, Metadata: s.metadata, CommitTime: s.commitTime}
}

// partitions are the offsets of one group on one topic. Partition numbers
// are dense from 0 in practice, so they index a slice; a number far beyond
// the live count (a sparse commit, a negative number from a damaged
// record) goes to a map instead, so that one stray number never allocates
// a huge slice.
type partitions struct {
	topic  string
	live   int              // live offsets, in dense and sparse together
	dense  []slot           // by partition number
	sparse map[int32]Offset // numbers outside dense; nil when none
}

// get returns the offset of partition p.
func (ps *partitions) get(p int32) (Offset, bool) {
	if uint32(p) < uint32(len(ps.dense)) {
		s := &ps.dense[p]
		return s.value(), s.live
	}
	if ps.sparse == nil {
		return Offset{}, false
	}
	v, ok := ps.sparse[p]
	return v, ok
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
	ps.grow(int(p) + 1)
	return true
}

// grow lengthens the dense slice to n numbers and moves the sparse offsets
// it now covers into it.
func (ps *partitions) grow(n int) {
	old := len(ps.dense)
	if n <= old {
		return
	}
	ps.dense = slices.Grow(ps.dense, n-old)[:n]
	clear(ps.dense[old:])
	for p, v := range ps.sparse {
		if p >= 0 && int(p) < n {
			ps.dense[p] = slot{offset: v.Offset, commitTime: v.CommitTime, metadata: v.Metadata, epoch: v.LeaderEpoch, live: true}
			delete(ps.sparse, p)
		}
	}
}

// put stores v for partition p and reports whether p was new.
func (ps *partitions) put(p int32, v Offset) (added bool) {
	if ps.denseFor(p) {
		s := &ps.dense[p]
		added = !s.live
		*s = slot{offset: v.Offset, commitTime: v.CommitTime, metadata: v.Metadata, epoch: v.LeaderEpoch, live: true}
	} else {
		if ps.sparse == nil {
			ps.sparse = make(map[int32]Offset)
		}
		n := len(ps.sparse)
		ps.sparse[p] = v
		added = len(ps.sparse) > n
	}
	if added {
		ps.live++
	}
	return added
}

// delete removes partition p and reports whether it was there.
func (ps *partitions) delete(p int32) bool {
	if uint32(p) < uint32(len(ps.dense)) {
		s := &ps.dense[p]
		if !s.live {
			return false
		}
		*s = slot{}
	} else {
		if _, ok := ps.sparse[p]; !ok {
			return false
		}
		delete(ps.sparse, p)
	}
	ps.live--
	return true
}

// has reports whether partition p has an offset.
func (ps *partitions) has(p int32) bool {
	_, ok := ps.get(p)
	return ok
}

// appendEntries appends the live offsets to dst by partition number.
func (ps *partitions) appendEntries(dst []Entry) []Entry {
	start := len(dst)
	for i := range ps.dense {
		if s := &ps.dense[i]; s.live {
			dst = append(dst, Entry{TopicPartition{ps.topic, int32(i)}, s.value()})
		}
	}
	if len(ps.sparse) == 0 {
		return dst
	}
	for p, v := range ps.sparse {
		dst = append(dst, Entry{TopicPartition{ps.topic, p}, v})
	}
	slices.SortFunc(dst[start:], func(a, b Entry) int { return cmp.Compare(a.Partition, b.Partition) })
	return dst
}
