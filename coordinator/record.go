package coordinator

import (
	"encoding/binary"

	"errors"
	"fmt"
	"github.com/offsetd/offsetd/cache"
	"math"
)

// Record types, the type byte of each log frame. They are part of the on-disk
// format: never renumber them.
const (
	recCommit        byte = 1 // a group's offsets, one Commit call
	recDeleteOffsets byte = 2 // tombstones for some offsets of a group
	recDeleteGroup   byte = 3 // tombstone for a whole group
	recMapping       byte = 4 // a static topic's mapping in one scope (JSON)
	recGlobalRead    byte = 5 // a scope's global-read switch
	recSnapGroup     byte = 6 // snapshots only: part of a group's state
	recExpireGroups  byte = 7 // tombstones for groups idle past the retention
)

// Record payloads (all integers varint, strings uvarint-length-prefixed):
//
//	commit:         group, generation, commitTimeMillis, count, count × (topic, partition, offset, leaderEpoch, metadata)
//	delete offsets: group, count, count × (topic, partition)
//	delete group:   group
//	mapping:        the statictopic.Mapping as JSON
//	global read:    scope, enabled (0 or 1)
//	snapshot group: group, version, lastCommitMillis, generation, count,
//	                count × (topic, partition, offset, leaderEpoch, metadata, commitTimeMillis)
//	expire groups:  count, count × group

var errShortRecord = errors.New("truncated record")

// encoder appends record fields to a byte slice.
type encoder struct{ b []byte }

func (e *encoder) string(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) int(v int64) { e.b = binary.AppendVarint(e.b, v) }

// decoder reads record fields; the first failure sticks and is reported by
// err, so callers check once at the end.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) bytes() []byte {
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)-k) {
		d.bad = true
		d.b = nil
		return nil
	}
	s := d.b[k : k+int(n)]
	d.b = d.b[k+int(n):]
	return s
}

func (d *decoder) int() int64 {
	v, k := binary.Varint(d.b)
	if k <= 0 {
		d.bad = true
		d.b = nil
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *decoder) int32() int32 {
	v := d.int()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.bad = true
	}
	return int32(v)
}

func (d *decoder) err(typ byte) error {
	if d.bad {
		return fmt.Errorf("%w: record type %d: %v", ErrCorrupt, typ, errShortRecord)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: record type %d: %d trailing bytes", ErrCorrupt, typ, len(d.b))
	}
	return nil
}

func encodeCommit(dst []byte, group string, generation int32, commitTime int64, offsets []OffsetCommit) []byte {
	e := encoder{dst}
	e.string(group)
	e.int(int64(generation))
	e.int(commitTime)
	e.int(int64(len(offsets)))
	for _, o := range offsets {
		e.string(o.Topic)
		e.int(int64(o.Partition))
		e.int(o.Offset)
		e.int(int64(o.LeaderEpoch))
		e.string(o.Metadata)
	}
	return e.b
}

func encodeDeleteOffsets(dst []byte, group string, keys []topicPartition) []byte {
	e := encoder{dst}
	e.string(group)
	e.int(int64(len(keys)))
	for _, k := range keys {
		e.string(k.Topic)
		e.int(int64(k.Partition))
	}
	return e.b
}

func encodeDeleteGroup(dst []byte, group string) []byte {
	e := encoder{dst}
	e.string(group)
	return e.b
}

func encodeGlobalRead(dst []byte, scope string, enabled bool) []byte {
	e := encoder{dst}
	e.string(scope)
	v := int64(0)
	if enabled {
		v = 1
	}
	e.int(v)
	return e.b
}

func encodeSnapGroup(dst []byte, group string, info cache.GroupInfo, entries []cache.Entry) []byte {
	e := encoder{dst}
	e.string(group)
	e.int(int64(info.Version))
	e.int(info.LastCommit)
	e.int(int64(info.Generation))
	e.int(int64(len(entries)))
	for _, x := range entries {
		e.string(x.Topic)
		e.int(int64(x.Partition))
		e.int(x.Offset.Offset)
		e.int(int64(x.LeaderEpoch))
		e.string(x.Metadata)
		e.int(x.CommitTime)
	}
	return e.b
}

func encodeExpireGroups(dst []byte, groups []string) []byte {
	e := encoder{dst}
	e.int(int64(len(groups)))
	for _, g := range groups {
		e.string(g)
	}
	return e.b
}
