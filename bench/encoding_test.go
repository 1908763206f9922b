package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/offsetd/offsetd/coordinator"
)

// How the byte-oriented systems (Pebble, bbolt, the file floors) store the
// workload, as a user putting offsets in them would:
//
//	key   = group 0x00 topic 0x00 partition (4 bytes, big endian)
//	value = offset (8) ‖ leader epoch (4) ‖ commit time in Unix ms (8) ‖ metadata
//
// Keys sort by group, then topic, then partition (the names hold no NUL), so
// a group's offsets are one range that starts with group 0x00.

const valueHeaderSize = 8 + 4 + 8

var errBadEncoding = errors.New("bench: bad key or value encoding")

// appendKey appends the key of group, topic and partition to dst.
func appendKey(dst []byte, group, topic string, partition int32) []byte {
	dst = append(append(dst, group...), 0)
	dst = append(append(dst, topic...), 0)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

// groupRange returns the bounds [lower, upper) of group's keys, in dst's
// storage when it is large enough.
func groupRange(dst []byte, group string) (lower, upper []byte) {
	n := len(group) + 1
	dst = append(append(dst[:0], group...), 0)
	dst = append(append(dst, group...), 1)
	return dst[:n:n], dst[n:]
}

// decodeKey returns the topic and partition of a key of group.
func decodeKey(key []byte, group string) (topic string, partition int32, err error) {
	rest, ok := bytes.CutPrefix(key, []byte(group))
	if !ok || len(rest) < 1+1+4 || rest[0] != 0 || rest[len(rest)-5] != 0 {
		return "", 0, errBadEncoding
	}
	return string(rest[1 : len(rest)-5]), int32(binary.BigEndian.Uint32(rest[len(rest)-4:])), nil
}

// appendValue appends the value of o, committed at now, to dst.
func appendValue(dst []byte, o *coordinator.OffsetCommit, now int64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(o.Offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(o.LeaderEpoch))
	dst = binary.BigEndian.AppendUint64(dst, uint64(now))
	return append(dst, o.Metadata...)
}

// decodeValue decodes a value. The metadata is copied: the systems' buffers
// are theirs.
func decodeValue(b []byte) (coordinator.Offset, error) {
	if len(b) < valueHeaderSize {
		return coordinator.Offset{}, errBadEncoding
	}
	return coordinator.Offset{
		Offset:      int64(binary.BigEndian.Uint64(b)),
		LeaderEpoch: int32(binary.BigEndian.Uint32(b[8:])),
		CommitTime:  time.UnixMilli(int64(binary.BigEndian.Uint64(b[12:]))),
		Metadata:    string(b[valueHeaderSize:]),
	}, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecord appends one commit as a log record, the way a minimal log
// frames it: length (4) ‖ CRC32C of the payload (4) ‖ payload, where the
// payload is every key and value of the commit, each length-prefixed.
func appendRecord(dst []byte, group string, offsets []coordinator.OffsetCommit, now int64) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, 8)...)
	for i := range offsets {
		o := &offsets[i]
		dst = binary.AppendUvarint(dst, uint64(len(group)+len(o.Topic)+6))
		dst = appendKey(dst, group, o.Topic, o.Partition)
		dst = binary.AppendUvarint(dst, uint64(valueHeaderSize+len(o.Metadata)))
		dst = appendValue(dst, o, now)
	}
	payload := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli))
	return dst
}

func TestKeyValueRoundTrip(t *testing.T) {
	o := coordinator.OffsetCommit{Topic: "orders-3", Partition: 15, Offset: offset(42, 5), LeaderEpoch: 6, Metadata: metadata}
	key := appendKey(nil, "g-000001", o.Topic, o.Partition)
	topic, part, err := decodeKey(key, "g-000001")
	if err != nil || topic != o.Topic || part != o.Partition {
		t.Fatalf("decodeKey = %q %d %v", topic, part, err)
	}
	if _, _, err := decodeKey(key, "g-000002"); !errors.Is(err, errBadEncoding) {
		t.Fatalf("decodeKey with another group: %v", err)
	}
	now := time.Now().UnixMilli()
	v, err := decodeValue(appendValue(nil, &o, now))
	if err != nil || v.Offset != o.Offset || v.LeaderEpoch != o.LeaderEpoch || v.Metadata != o.Metadata || v.CommitTime.UnixMilli() != now {
		t.Fatalf("decodeValue = %+v %v", v, err)
	}
	if _, err := decodeValue(make([]byte, valueHeaderSize-1)); !errors.Is(err, errBadEncoding) {
		t.Fatalf("decodeValue of a short value: %v", err)
	}
}

func TestGroupRangeHoldsOnlyTheGroup(t *testing.T) {
	lower, upper := groupRange(nil, "g-000001")
	inside := [][]byte{
		appendKey(nil, "g-000001", "orders-0", 0),
		appendKey(nil, "g-000001", "orders-7", 15),
	}
	outside := [][]byte{
		appendKey(nil, "g-000000", "orders-7", 15),
		appendKey(nil, "g-0000010", "orders-0", 0), // a longer name with the same prefix
		appendKey(nil, "g-000002", "orders-0", 0),
	}
	in := func(k []byte) bool { return bytes.Compare(k, lower) >= 0 && bytes.Compare(k, upper) < 0 }
	for _, k := range inside {
		if !in(k) {
			t.Errorf("key %q is outside [%q, %q)", k, lower, upper)
		}
	}
	for _, k := range outside {
		if in(k) {
			t.Errorf("key %q is inside [%q, %q)", k, lower, upper)
		}
	}
}

func TestRecordFrame(t *testing.T) {
	offs := []coordinator.OffsetCommit{{Topic: "orders-1", Partition: 3, Offset: 7, Metadata: metadata}}
	rec := appendRecord([]byte("previous"), "g-000001", offs, 1)[len("previous"):]
	n := binary.BigEndian.Uint32(rec)
	if int(n) != len(rec)-8 {
		t.Fatalf("length field %d, payload %d bytes", n, len(rec)-8)
	}
	if crc := binary.BigEndian.Uint32(rec[4:]); crc != crc32.Checksum(rec[8:], castagnoli) {
		t.Fatalf("CRC field %#x does not match the payload", crc)
	}
}
