package log

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

// A snapshot is a header, which names the index it covers and its owner,
// then its content: the state's records and a footer (log/doc.go draws
// them). The content is what a partition writes (SnapshotEncoder) and
// restores (DecodeSnapshot); the header and the file around it are its
// host's (Snapshots).

// snapChunk bounds what decoding reads ahead of what it has seen: a
// record's length is not under the checksum, so a flipped bit must never
// allocate gigabytes before the end of the snapshot is found.
const snapChunk = 1 << 20

// SnapshotEncoder writes a snapshot's content, its records then its
// footer, to an io.Writer: the partition's side of a snapshot, whose host
// owns where the bytes go.
type SnapshotEncoder struct {
	w     io.Writer
	frame []byte
	count uint64
	done  bool
}

// NewSnapshotEncoder returns an encoder of a snapshot's content to w.
func NewSnapshotEncoder(w io.Writer) *SnapshotEncoder { return &SnapshotEncoder{w: w} }

// Add writes one record. typ 0 is invalid.
func (e *SnapshotEncoder) Add(typ byte, payload []byte) error {
	if typ == 0 {
		return fmt.Errorf("%w: snapshot record of type 0", ErrInvalid)
	}
	if e.done {
		return fmt.Errorf("%w: snapshot record after its footer", ErrInvalid)
	}
	e.frame = binary.AppendUvarint(e.frame[:0], uint64(frameSize(len(payload))))
	e.frame = appendFrame(e.frame, frameRecord, typ, payload)
	e.count++
	_, err := e.w.Write(e.frame)
	return err
}

// Finish writes the footer, which makes a snapshot cut short detectable.
func (e *SnapshotEncoder) Finish() error {
	var foot [1 + snapFooter]byte
	binary.LittleEndian.PutUint64(foot[1:], e.count)
	binary.LittleEndian.PutUint32(foot[9:], crc32.Checksum(foot[1:9], castagnoli))
	e.done = true
	_, err := e.w.Write(foot[:])
	return err
}

// DecodeSnapshot reads a snapshot's content, as SnapshotEncoder wrote it,
// from r to its end, calling fn for every record in order after checking
// its checksum. Damage, a content cut short or one that goes on past its
// footer included, is a *CorruptError (errors.Is ErrCorrupt) whose Offset
// counts from the content's start. payload is valid only during fn.
func DecodeSnapshot(r io.Reader, fn func(typ byte, payload []byte) error) error {
	return decodeSnapshot(byteReader(r), 0, fn)
}

// byteReader returns r as a reader of single bytes too, buffering it if it
// is not one.
func byteReader(r io.Reader) interface {
	io.Reader
	io.ByteReader
} {
	if br, ok := r.(interface {
		io.Reader
		io.ByteReader
	}); ok {
		return br
	}
	return bufio.NewReaderSize(r, snapChunk)
}

// decodeSnapshot is DecodeSnapshot with the content's offset in its file,
// off, counted in the errors.
func decodeSnapshot(r interface {
	io.Reader
	io.ByteReader
}, off int64, fn func(typ byte, payload []byte) error) error {
	bad := func(why error) error { return &CorruptError{Offset: off, Err: why} }
	var buf []byte
	for n := uint64(0); ; n++ {
		size, err := binary.ReadUvarint(r)
		if err != nil {
			return bad(errSnapShort)
		}
		if size == 0 {
			var foot [snapFooter]byte
			if _, err := io.ReadFull(r, foot[:]); err != nil {
				return bad(errSnapShort)
			}
			count := binary.LittleEndian.Uint64(foot[:8])
			if crc32.Checksum(foot[:8], castagnoli) != binary.LittleEndian.Uint32(foot[8:]) || count != n {
				return bad(errSnapFooter)
			}
			if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
				return bad(errSnapFooter)
			}
			return nil
		}
		if size < minFrameSize {
			return bad(errEntryShort)
		}
		// Read a chunk at a time: the buffer grows only as far as the
		// bytes are there.
		buf = buf[:0]
		for uint64(len(buf)) < size {
			k := len(buf)
			buf = slices.Grow(buf, int(min(size-uint64(k), snapChunk)))
			buf = buf[:k+int(min(size-uint64(k), snapChunk))]
			if _, err := io.ReadFull(r, buf[k:]); err != nil {
				return bad(errSnapShort)
			}
		}
		f, err := decodeFrame(buf)
		if err == nil && f.version != frameRecord {
			err = errFrameVersion
		}
		if err != nil {
			return bad(err)
		}
		if err := fn(f.typ, f.payload); err != nil {
			return err
		}
		off += int64(uvarintLen(size)) + int64(size)
	}
}

// appendSnapHeader appends the header of a snapshot of index: of version
// 2 naming owner, or of version 1 if owner is nil.
func appendSnapHeader(b []byte, index uint64, owner *SnapshotOwner) []byte {
	start := len(b)
	b = append(b, snapMagic...)
	if owner == nil {
		b = append(b, snapVersion)
		b = binary.LittleEndian.AppendUint64(b, index)
		return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
	}
	b = append(b, snapOwned)
	b = binary.LittleEndian.AppendUint64(b, index)
	b = binary.LittleEndian.AppendUint32(b, uint32(owner.Partition))
	b = binary.LittleEndian.AppendUint32(b, uint32(owner.Partitions))
	b = append(b, byte(len(owner.Hash)))
	b = append(b, owner.Hash...)
	b = append(b, byte(len(owner.Dir)))
	b = append(b, owner.Dir...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// readSnapHeader reads a snapshot's header from r and returns the index it
// covers, its owner (nil for version 1) and its length.
func readSnapHeader(r io.Reader) (index uint64, owner *SnapshotOwner, n int64, err error) {
	b := make([]byte, snapHeader, snapHeader+8+2+2*255+4)
	if _, err := io.ReadFull(r, b); err != nil || string(b[:len(snapMagic)]) != snapMagic {
		return 0, nil, 0, errSnapHeader
	}
	version := b[len(snapMagic)]
	index = binary.LittleEndian.Uint64(b[len(snapMagic)+1:])
	sum := func(b []byte) bool {
		n := len(b) - 4
		return crc32.Checksum(b[:n], castagnoli) == binary.LittleEndian.Uint32(b[n:])
	}
	switch version {
	case snapVersion:
		if !sum(b) {
			return 0, nil, 0, errSnapHeader
		}
		return index, nil, int64(len(b)), nil
	case snapOwned:
	default:
		return 0, nil, 0, errSnapHeader
	}
	// read appends k more bytes of the header to b.
	read := func(k int) bool {
		_, err := io.ReadFull(r, b[len(b):len(b)+k])
		b = b[:len(b)+k]
		return err == nil
	}
	p := len(snapMagic) + 1 + 8 // where the owner starts: partition, partitions
	if !read(4+1) || !read(int(b[len(b)-1])+1) || !read(int(b[len(b)-1])+4) || !sum(b) {
		return 0, nil, 0, errSnapHeader
	}
	o := SnapshotOwner{Partition: int(binary.LittleEndian.Uint32(b[p:])), Partitions: int(binary.LittleEndian.Uint32(b[p+4:]))}
	hl := int(b[p+8])
	o.Hash = string(b[p+9 : p+9+hl])
	o.Dir = string(b[p+9+hl+1 : len(b)-4])
	return index, &o, int64(len(b)), nil
}
