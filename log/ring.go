package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// The sync ring: where a batch in the last segment becomes durable.
//
// wal appends to its segment files, so every fsync of a segment must
// write the file's new size as well as its data: two writes to the
// device, one after the other, where a file written in place needs one.
// So Append writes each batch to its segment without a sync, and a copy
// of it into a file of fixed size written round and round, and syncs only
// that file (fdatasync: the data alone). wal syncs a segment when it closes
// it, so everything below the last segment is durable on its own; the
// ring holds the batches of the last segment since it was last synced.
//
// The file is written in full with zeros when it is made, so that a sync
// of it never writes its size or allocates blocks. A lap starts at byte 0
// when everything before its first batch is durable in the segments:
// after wal closes a segment, at Open, and when the next batch does not
// fit before the end of the file (the last segment is then fsynced
// instead). A failed write overwrites the place of its batch's copy, and
// the lap goes on. log/doc.go draws the records. After a crash, Open's
// plan compares the lap with the segments (restore.go).
const (
	ringName   = "RING"
	ringHeader = 4 + 8 + 8 + 4
)

// ring is the open sync ring of a journal; its owner is the Log's owner.
type ring struct {
	path  string
	f     *os.File
	size  int64 // the bytes a lap may use
	pos   int64 // where the next record goes, in the current lap
	nonce uint64
	// next is the wal index the next record must carry, in the current
	// lap; 0 when a lap must start (restart).
	next uint64
	buf  []byte
}

// ringLap is the lap a ring file holds: frames for the wal indexes first,
// first+1, ... in order.
type ringLap struct {
	first  uint64
	frames [][]byte
	// stray is the offset of a whole record of the lap's nonce past its
	// end (the lap ended at a damaged record, not at its last), -1 if none.
	stray int64
}

// lastBatch returns the wal index of the lap's last batch, first-1 if it
// holds none.
func (r ringLap) lastBatch() uint64 { return r.first + uint64(len(r.frames)) - 1 }

// entries returns the lap's batches from wal index from on as wal's
// binary entries, as a segment starting at from would hold them.
func (r ringLap) entries(from uint64) []byte {
	var b []byte
	for i, f := range r.frames {
		if r.first+uint64(i) >= from {
			b = binary.AppendUvarint(b, uint64(len(f)))
			b = append(b, f...)
		}
	}
	return b
}

// ringSize is the length of one lap for segments of segmentSize bytes: a
// lap normally ends with its segment, so two segments' worth leaves room.
func ringSize(segmentSize int) int64 {
	return min(max(2*int64(segmentSize), 64<<10), 64<<20)
}

// openRing opens (or creates) the ring file of the journal in dir, and
// reads the lap it holds. A file shorter than size is filled up with
// zeros and synced; a new one is synced with the directory.
func openRing(dir string, size int64) (*ring, ringLap, error) {
	path := filepath.Join(dir, ringName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640); err == nil {
			err = errors.Join(f.Sync(), SyncDir(dir))
			if err != nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return nil, ringLap{}, fmt.Errorf("open %s: %w", ringName, err)
	}
	data, err := io.ReadAll(f)
	if err == nil && int64(len(data)) < size {
		err = fill(f, int64(len(data)), size)
	}
	if err != nil {
		f.Close()
		return nil, ringLap{}, fmt.Errorf("%s: %w", ringName, err)
	}
	return &ring{path: path, f: f, size: size}, readLap(data), nil
}

// fill writes zeros to f from byte from up to byte to, and syncs it: the
// ring is written in place from then on, so a sync never has to write its
// size or allocate blocks.
func fill(f *os.File, from, to int64) error {
	zeros := make([]byte, min(to-from, 1<<20))
	for off := from; off < to; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off); err != nil {
			return err
		}
	}
	return f.Sync()
}

// readLap returns the lap that data, a ring file, holds from byte 0.
func readLap(data []byte) ringLap {
	var lap ringLap
	var nonce uint64
	pos := 0
	for pos+ringHeader <= len(data) {
		h := data[pos : pos+ringHeader]
		n := binary.LittleEndian.Uint32(h[20:])
		if uint64(n) > uint64(len(data)-pos-ringHeader) || n < minFrameSize {
			break
		}
		body := data[pos+4 : pos+ringHeader+int(n)]
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(h) {
			break
		}
		rn, index := binary.LittleEndian.Uint64(h[4:]), binary.LittleEndian.Uint64(h[12:])
		if len(lap.frames) == 0 {
			if index == 0 {
				break
			}
			nonce, lap.first = rn, index
		} else if rn != nonce || index != lap.lastBatch()+1 {
			break
		}
		lap.frames = append(lap.frames, data[pos+ringHeader:pos+ringHeader+int(n)])
		pos += ringHeader + int(n)
	}
	lap.stray = -1
	if len(lap.frames) > 0 {
		var nb [8]byte
		binary.LittleEndian.PutUint64(nb[:], nonce)
		for q := pos + 1; q < len(data); {
			i := bytes.Index(data[q:], nb[:])
			if i < 0 {
				break
			}
			h := q + i - 4
			q += i + 1
			if h < pos || h+ringHeader > len(data) {
				continue
			}
			n := binary.LittleEndian.Uint32(data[h+20:])
			if n < minFrameSize || uint64(n) > uint64(len(data)-h-ringHeader) {
				continue
			}
			if crc32.Checksum(data[h+4:h+ringHeader+int(n)], castagnoli) == binary.LittleEndian.Uint32(data[h:]) &&
				binary.LittleEndian.Uint64(data[h+12:]) > lap.lastBatch() {
				lap.stray = int64(h)
				break
			}
		}
	}
	return lap
}

// restart makes the next record start a new lap: everything appended so
// far is durable in the segments.
func (r *ring) restart() { r.next = 0 }

// fits reports whether a frame of n bytes fits in the current lap, or at
// the start of a new one if one must start.
func (r *ring) fits(n int) bool {
	pos := r.pos
	if r.next == 0 {
		pos = 0
	}
	return pos+ringHeader+int64(n) <= r.size
}

// put writes the frame of the batch at wal index index and syncs its data;
// the caller checked that it fits. The batch must be the next of the lap,
// or everything before it durable in the segments if a lap starts.
func (r *ring) put(index uint64, frame []byte) error {
	if r.next == 0 {
		r.pos, r.nonce, r.next = 0, rand.Uint64(), index
	}
	if index != r.next {
		return fmt.Errorf("%s: batch %d written after %d", ringName, index, r.next-1)
	}
	b := r.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, r.nonce)
	b = binary.LittleEndian.AppendUint64(b, index)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(frame)))
	b = append(b, frame...)
	binary.LittleEndian.PutUint32(b, crc32.Checksum(b[4:], castagnoli))
	if cap(b) <= 1<<20 {
		r.buf = b
	}
	if _, err := r.f.WriteAt(b, r.pos); err != nil {
		return fmt.Errorf("write %s: %w", ringName, err)
	}
	if err := datasync(r.f); err != nil {
		return fmt.Errorf("sync %s: %w", ringName, err)
	}
	r.pos += int64(len(b))
	r.next++
	return nil
}

// clear overwrites the start of the file, so that it holds no lap, and
// syncs it. Open does so for a log opened with UnsafeNoSync, which keeps
// no lap, once what the lap held is synced in the segments.
func (r *ring) clear() error {
	r.restart()
	return r.zero(0)
}

// forget overwrites, and syncs, the place where the record of the lap's
// next batch goes: after a failed write of that batch, its copy (whole,
// if the write failed only in its sync) must never be read back as part
// of the lap. The acknowledged batches before it keep their copies.
func (r *ring) forget() error {
	if r.next == 0 || r.pos+ringHeader > r.size {
		return nil // no lap, a new one not started, or no room for the record
	}
	return r.zero(r.pos)
}

// zero overwrites the record header at pos and syncs the file.
func (r *ring) zero(pos int64) error {
	if _, err := r.f.WriteAt(make([]byte, ringHeader), pos); err != nil {
		return fmt.Errorf("clear %s: %w", ringName, err)
	}
	if err := datasync(r.f); err != nil {
		return fmt.Errorf("clear %s: %w", ringName, err)
	}
	return nil
}

// close closes the file; a nil ring is none.
func (r *ring) close() error {
	if r == nil {
		return nil
	}
	return r.f.Close()
}
