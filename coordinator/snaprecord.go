package coordinator

import (
	"math"

	"github.com/offsetd/offsetd/cache"
)

// Snapshot records of the compact format. A snapshot's offsets take a few
// bytes each: the names are written once per group and topic, metadata
// once per record, and each offset says only what changed from the one
// before it:
//
//	snapshot sizes:  groups, topics (group and topic pairs), keys
//	snapshot groups: group, capturedAt, version, lastCommitMillis, generation,
//	                 mdCount, mdCount × metadata,
//	                 topicCount, topicCount × (topic, count, count × offset)
//	offset:          flags byte,
//	                 [partition - previous partition]   flags&snapPartition
//	                 [leaderEpoch]                      flags&snapEpoch
//	                 [metadata number]                  flags&snapMetadata (0 is "", n is the n-th of the table)
//	                 [commitTimeMillis - previous one]  flags&snapTime
//	                 offset - previous offset
//
// Each field left out is the previous offset's: partition + 1, then the
// same leader epoch, metadata and commit time. A topic starts from
// partition -1 and offset 0; a record starts from leader epoch -1, metadata
// "" and commit time lastCommitMillis. Integers are varints, strings
// uvarint-length-prefixed. Topics come in name order and partitions in
// number order, as the table holds them, so loading fills each group and
// topic's offsets in one pass (a group of more than maxSnapEntries offsets
// takes several records, which may split a topic).
const (
	snapPartition byte = 1 << iota
	snapEpoch
	snapMetadata
	snapTime
	snapFlags = snapPartition | snapEpoch | snapMetadata | snapTime
)

// snapWriter encodes a group's entries, as GroupAt returns them (by topic,
// then partition), into compact snapshot records.
type snapWriter struct {
	md     map[string]uint64 // metadata → its number in the record
	mdList []string
	mdNums []uint64 // each entry's metadata number
}

// encode appends one snapshot groups record of entries to dst.
func (s *snapWriter) encode(dst []byte, group string, info cache.GroupInfo, capturedAt uint64, entries []cache.Entry) []byte {
	if s.md == nil {
		s.md = make(map[string]uint64)
	}
	clear(s.md)
	s.mdList = s.mdList[:0]
	// Each entry's metadata number, looked up once: the entries of a
	// group mostly repeat the one before (the table hands out one string
	// per distinct metadata, so the comparison is mostly of two pointers).
	s.mdNums = s.mdNums[:0]
	last, lastNum := "", uint64(0)
	for _, x := range entries {
		if x.Metadata != last {
			n, ok := s.md[x.Metadata]
			if !ok && x.Metadata != "" { // "" is number 0
				s.mdList = append(s.mdList, x.Metadata)
				n = uint64(len(s.mdList))
				s.md[x.Metadata] = n
			}
			last, lastNum = x.Metadata, n
		}
		s.mdNums = append(s.mdNums, lastNum)
	}
	e := encoder{dst}
	e.snapHeader(group, info, capturedAt)
	e.int(int64(len(s.mdList)))
	for _, m := range s.mdList {
		e.string(m)
	}
	topics := 0
	for i, x := range entries {
		if i == 0 || x.Topic != entries[i-1].Topic {
			topics++
		}
	}
	e.int(int64(topics))
	epoch, md, commitTime := int32(-1), uint64(0), info.LastCommit
	for start := 0; start < len(entries); {
		end := start + 1
		for end < len(entries) && entries[end].Topic == entries[start].Topic {
			end++
		}
		e.string(entries[start].Topic)
		e.int(int64(end - start))
		partition, offset := int64(-1), int64(0)
		for i, x := range entries[start:end] {
			xmd := s.mdNums[start+i]
			flags := byte(0)
			if int64(x.Partition) != partition+1 {
				flags |= snapPartition
			}
			if x.LeaderEpoch != epoch {
				flags |= snapEpoch
			}
			if xmd != md {
				flags |= snapMetadata
			}
			if x.CommitTime != commitTime {
				flags |= snapTime
			}
			e.b = append(e.b, flags)
			if flags&snapPartition != 0 {
				e.int(int64(x.Partition) - partition)
			}
			if flags&snapEpoch != 0 {
				e.int(int64(x.LeaderEpoch))
			}
			if flags&snapMetadata != 0 {
				e.int(int64(xmd))
			}
			if flags&snapTime != 0 {
				e.int(x.CommitTime - commitTime)
			}
			e.int(x.Offset.Offset - offset)
			partition, offset = int64(x.Partition), x.Offset.Offset
			epoch, md, commitTime = x.LeaderEpoch, xmd, x.CommitTime
		}
		start = end
	}
	return e.b
}

func encodeSnapSizes(dst []byte, groups, topics, keys int) []byte {
	e := encoder{dst}
	e.int(int64(groups))
	e.int(int64(topics))
	e.int(int64(keys))
	return e.b
}

// snapOffset is one offset of a compact snapshot record. It holds no
// pointer: its topic is its topicView's, its metadata a number in the
// record's table (0 for ""), so decoding a million of them writes no
// pointer the garbage collector must see.
type snapOffset struct {
	partition, epoch, md int32
	offset, commitTime   int64
}

// topicView is one topic of a compact snapshot record: its offsets are
// snap[start:end] of the record, of partitions below below.
type topicView struct {
	name       []byte
	start, end int
	below      int
}

// decodeSnapGroups decodes a compact snapshot record into r (topics, mds
// and snap); d is past the group header.
func (r *recordView) decodeSnapGroups(d *decoder) {
	r.mds = r.mds[:0]
	r.topics = r.topics[:0]
	r.snap = r.snap[:0]
	n := d.count()
	for range n {
		m := d.bytes()
		if d.bad {
			return
		}
		r.mds = append(r.mds, m)
	}
	topics := d.count()
	epoch, md, commitTime := int32(-1), 0, r.lastCommit
	for range topics {
		tv := topicView{name: d.bytes(), start: len(r.snap)}
		count := d.count()
		partition, offset := int64(-1), int64(0)
		for range count {
			if len(d.b) == 0 {
				d.bad = true
				return
			}
			flags := d.b[0]
			d.b = d.b[1:]
			if flags&^snapFlags != 0 {
				d.bad = true
				return
			}
			partition++
			if flags&snapPartition != 0 {
				partition += d.int() - 1
			}
			if flags&snapEpoch != 0 {
				epoch = d.int32()
			}
			if flags&snapMetadata != 0 {
				v := d.int()
				if v < 0 || v > int64(len(r.mds)) {
					d.bad = true
				}
				md = int(v)
			}
			if flags&snapTime != 0 {
				commitTime += d.int()
			}
			offset += d.int()
			if d.bad || partition < math.MinInt32 || partition > math.MaxInt32 {
				d.bad = true
				return
			}
			r.snap = append(r.snap, snapOffset{partition: int32(partition), epoch: epoch, md: int32(md), offset: offset, commitTime: commitTime})
			tv.below = max(tv.below, int(partition)+1)
		}
		if d.bad {
			return
		}
		tv.end = len(r.snap)
		r.topics = append(r.topics, tv)
	}
}
