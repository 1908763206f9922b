package log

import (
	"encoding/binary"
)

// A batch frame's payload holds the records of one Append, each tagged with
// its partition, after the journal's tag; log/doc.go draws it. A batch of
// no records marks where the next record index starts (Log.SkipTo).

// maxBatchRecords bounds the records of one batch, so that a damaged count
// can never make a reader allocate much.
const maxBatchRecords = 1 << 24

// appendBatchFrame appends the frame of a batch of entries, the first of
// which gets record index first.
// A tag that is not 0 goes first in the payload, under a type of its own.
func appendBatchFrame(dst []byte, tag, first uint64, entries []Entry) []byte {
	start := len(dst)
	if tag != 0 {
		dst = append(dst, frameBatch, taggedBatchType)
		dst = binary.LittleEndian.AppendUint64(dst, tag)
	} else {
		dst = append(dst, frameBatch, batchType)
	}
	dst = binary.AppendUvarint(dst, first)
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	for _, e := range entries {
		dst = binary.AppendUvarint(dst, uint64(e.Partition))
		dst = append(dst, e.Type)
		dst = binary.AppendUvarint(dst, uint64(len(e.Payload)))
		dst = append(dst, e.Payload...)
	}
	return sealFrame(dst, start)
}

// batchBody returns the payload of a batch frame after its tag, and the
// tag (0 if it carries none).
func batchBody(f frame) (tag uint64, body []byte, err error) {
	if f.typ != taggedBatchType {
		return 0, f.payload, nil
	}
	if len(f.payload) < batchTagSize {
		return 0, nil, errBatchBody
	}
	tag = binary.LittleEndian.Uint64(f.payload)
	if tag == 0 {
		return 0, nil, errBatchBody
	}
	return tag, f.payload[batchTagSize:], nil
}

// batchHeader reads the first record index and the record count of a batch
// payload (after its tag).
func batchHeader(b []byte) (first, count uint64, rest []byte, err error) {
	first, n := binary.Uvarint(b)
	if n <= 0 || first == 0 {
		return 0, 0, nil, errBatchBody
	}
	count, m := binary.Uvarint(b[n:])
	if m <= 0 || count > maxBatchRecords {
		return 0, 0, nil, errBatchBody
	}
	return first, count, b[n+m:], nil
}

// frameRecords calls fn for every record of a frame: a batch frame's
// records, or the one record of a format-1 frame, which takes index
// walIndex and the given partition. It returns the first and last record
// indexes; a batch of no records (see Log.SkipTo) at index F returns F and
// F-1. A batch whose records do not fill its payload exactly is
// corrupt, although its checksum passed (a writer's bug, never a torn
// write).
func frameRecords(f frame, walIndex uint64, partition int, fn func(index uint64, e Entry) error) (first, last uint64, err error) {
	if f.version == frameRecord {
		if fn != nil {
			if err := fn(walIndex, Entry{Partition: partition, Type: f.typ, Payload: f.payload}); err != nil {
				return walIndex, walIndex, err
			}
		}
		return walIndex, walIndex, nil
	}
	_, body, err := batchBody(f)
	if err != nil {
		return 0, 0, err
	}
	first, count, b, err := batchHeader(body)
	if err != nil {
		return 0, 0, err
	}
	for i := range count {
		p, n := binary.Uvarint(b)
		if n <= 0 || p > maxPartition || len(b) < n+1 {
			return 0, 0, errBatchBody
		}
		typ := b[n]
		size, m := binary.Uvarint(b[n+1:])
		if typ == 0 || m <= 0 || size > uint64(len(b)-n-1-m) {
			return 0, 0, errBatchBody
		}
		payload := b[n+1+m : n+1+m+int(size)]
		b = b[n+1+m+int(size):]
		if fn != nil {
			if err := fn(first+i, Entry{Partition: int(p), Type: typ, Payload: payload}); err != nil {
				return first, first + i, err
			}
		}
	}
	if len(b) != 0 {
		return 0, 0, errBatchBody
	}
	return first, first + count - 1, nil
}

// maxPartition bounds the partition number of a record.
const maxPartition = 1 << 20

// frameFirstIndex returns the first record index of a frame without
// reading its records.
func frameFirstIndex(f frame, walIndex uint64) (uint64, error) {
	if f.version == frameRecord {
		return walIndex, nil
	}
	first, _, err := frameSpan(f, walIndex)
	return first, err
}

// frameSpan returns the first record index of a frame and how many records
// it holds, without reading them.
func frameSpan(f frame, walIndex uint64) (first, count uint64, err error) {
	if f.version == frameRecord {
		return walIndex, 1, nil
	}
	_, body, err := batchBody(f)
	if err != nil {
		return 0, 0, err
	}
	first, count, _, err = batchHeader(body)
	return first, count, err
}
