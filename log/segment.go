package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// segmentFile is one segment of the log: a file named %020d of the index of
// its first entry, holding back-to-back wal entries.
type segmentFile struct {
	index uint64 // index of its first entry
	path  string // where its bytes are: a .START or .END file until an interrupted truncation is finished
}

func (s segmentFile) name() string { return filepath.Base(s.path) }

func segmentName(index uint64) string { return fmt.Sprintf("%020d", index) }

// readSegment reads a whole segment file into buf, growing it if needed.
func readSegment(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf[:0], err
	}
	defer f.Close()
	return readFile(f, buf)
}

// readFile reads all of f into buf, growing it if needed.
func readFile(f *os.File, buf []byte) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return buf[:0], err
	}
	size := fi.Size()
	if int64(cap(buf)) < size {
		buf = make([]byte, size, size+size/8)
	}
	buf = buf[:size]
	_, err = io.ReadFull(f, buf)
	return buf, err
}

// scanResult is how far scanEntries got.
type scanResult struct {
	entries int    // whole wal entries read (those past through are not read)
	end     int    // byte offset just past the last whole entry
	first   uint64 // first record index of the first whole entry; 0 if none
	last    uint64 // last record index of the last whole entry; 0 if none
	// tagged: a whole entry carried a journal tag (so every later one
	// must); untaggedFirst: the first whole entry is a batch without one.
	tagged, untaggedFirst bool
	bad                   error     // why reading stopped short of through and of the end of data; nil if it did not
	cut                   *tornTail // what repairTail cut, if anything
}

// scanEntries reads the wal entries of one segment, whose first entry has
// wal index start, up to wal index through. It checks every frame and the
// records in it, and that record indexes go up: past prevLast, the last
// record index before the segment (0 if unknown), and from one entry to the
// next; a batch of records starts right after the last record before it.
// A batch that carries a journal tag must carry tag, unless tag is 0, and
// then no batch without a tag may follow one with it. It calls fn (if not nil) for every record with index >= from; a
// format-1 frame is one record of the given partition. An error from fn
// stops the scan and is returned as is.
func scanEntries(data []byte, start uint64, partition int, tag uint64, prevLast, from, through uint64, fn func(index uint64, e Entry) error) (scanResult, error) {
	return scan(data, start, partition, tag, prevLast, from, through, fn, false)
}

// scanHeaders is scanEntries without fn that reads each batch's header
// only: every checksum, tag and index is checked, but not that a batch's
// records fill it (which only a writer's bug breaks, and Replay finds). It
// is Open's plan's, which Replay follows before anything is written.
func scanHeaders(data []byte, start uint64, partition int, tag uint64, prevLast, through uint64) scanResult {
	res, _ := scan(data, start, partition, tag, prevLast, 0, through, nil, true)
	return res
}

func scan(data []byte, start uint64, partition int, tag uint64, prevLast, from, through uint64, fn func(index uint64, e Entry) error, headersOnly bool) (scanResult, error) {
	res := scanResult{}
	pos, index := 0, start
	last := prevLast
	stop := func(why error) (scanResult, error) {
		res.entries, res.end, res.bad = int(index-start), pos, why
		return res, nil
	}
	var cb func(uint64, Entry) error // fn, from index from on; made once, not per entry
	if fn != nil {
		cb = func(i uint64, e Entry) error {
			if i < from {
				return nil
			}
			return fn(i, e)
		}
	}
	for pos < len(data) && index <= through {
		var size uint64
		var w int
		if b := data[pos]; b < 0x80 {
			size, w = uint64(b), 1 // a frame under 128 bytes
		} else if size, w = binary.Uvarint(data[pos:]); w <= 0 {
			return stop(errEntryLength)
		}
		if size < minFrameSize {
			return stop(errEntryShort)
		}
		if size > uint64(len(data)-pos-w) {
			return stop(errEntryPastEOF)
		}
		next := pos + w + int(size)
		f, err := decodeFrame(data[pos+w : next])
		if err != nil {
			return stop(err)
		}
		if f.version == frameRecord && partition < 0 {
			return stop(errFrameVersion) // the journal holds batches only
		}
		first, count, spanErr := frameSpan(f, index)
		if spanErr != nil {
			return stop(spanErr)
		}
		if tag != 0 && f.version == frameBatch {
			if f.typ == taggedBatchType {
				if got, _, _ := batchBody(f); got != tag {
					return stop(errForeignBatch)
				}
			} else if res.tagged {
				// A journal tags every batch once it has an ID.
				return stop(errUntaggedBatch)
			}
		}
		if first <= last {
			return stop(errIndexOrder)
		}
		if count > 0 && last != 0 && first != last+1 {
			// Records are contiguous; only a batch of none (SkipTo's)
			// moves the next index on.
			return stop(errIndexGap)
		}
		lo, hi := first, first+count-1
		if !headersOnly {
			lo, hi, err = frameRecords(f, index, partition, cb)
		}
		if err != nil {
			if isCorruption(err) && lo == 0 {
				return stop(err)
			}
			res.entries, res.end = int(index-start), pos
			return res, err
		}
		if index == start {
			res.untaggedFirst = f.version == frameBatch && f.typ != taggedBatchType
		}
		res.tagged = res.tagged || f.typ == taggedBatchType
		if res.first == 0 {
			res.first = lo
		}
		last, res.last = hi, hi
		pos = next
		index++
	}
	res.entries, res.end = int(index-start), pos
	return res, nil
}

// isCorruption reports whether err is one of this package's reasons for
// refusing bytes, rather than an error of a caller's function.
func isCorruption(err error) bool {
	_, ok := err.(corruption)
	return ok
}

// findFrame returns the offset of the first wal entry at or after from
// whose frame is whole, passes its checksum and, for a batch, starts past
// record index after; or -1. A stale frame of an older write (with a lower
// index) is no evidence that the bytes before it were acknowledged. Cheap
// checks come first, so zero-filled or random bytes cost about one pass.
func findFrame(data []byte, from int, after uint64) int {
	for q := from; q+1+minFrameSize <= len(data); q++ {
		if data[q] < minFrameSize {
			continue // 0 (zero fill) or too short for a frame
		}
		size, w := binary.Uvarint(data[q:])
		if w <= 0 || size > uint64(len(data)-q-w) || size < minFrameSize {
			continue
		}
		b := data[q+w : q+w+int(size)]
		if (b[0] != frameRecord && b[0] != frameBatch) || b[1] == 0 {
			continue
		}
		f, err := decodeFrame(b)
		if err != nil {
			continue
		}
		if f.version == frameBatch {
			if first, _, err := frameSpan(f, 0); err != nil || first <= after {
				continue
			}
		}
		return q
	}
	return -1
}

// MakeDir creates dir and its missing parents, each made durable in its
// parent with sync (SyncDir, but for tests) before the next is created:
// without that a machine crash right after can lose a directory's entry,
// and with it everything written inside. A directory another goroutine
// creates meanwhile is no error. When dir exists its parent is synced
// all the same: a process that died between a mkdir and that sync left
// the entry to whoever opens the directory next.
func MakeDir(dir string, sync func(dir string) error) error {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if _, err := os.Stat(dir); err == nil {
		return sync(parent)
	}
	if parent != dir {
		if err := MakeDir(parent, sync); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return sync(parent)
}

// SyncDir makes creations, renames and removals in dir durable (wal never
// does it; the data directory's other files need it too).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// segmentFirstIndex returns the record index of the first record in a
// segment, read from the head of its first entry, or 0 if the segment is
// empty. It does not check the entry's checksum: it places the segment,
// and whoever reads the records checks them.
func segmentFirstIndex(seg segmentFile) (uint64, error) {
	f, err := os.Open(seg.path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var b [32]byte
	n, err := io.ReadFull(f, b[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	_, w := binary.Uvarint(b[:n])
	if w <= 0 || n < w+frameHeader {
		return 0, &CorruptError{File: seg.name(), Batch: seg.index, Err: errEntryLength}
	}
	switch b[w] {
	case frameRecord:
		return seg.index, nil
	case frameBatch:
		at := w + frameHeader
		if b[w+1] == taggedBatchType {
			at += batchTagSize
		}
		if at >= n {
			return 0, &CorruptError{File: seg.name(), Batch: seg.index, Err: errBatchBody}
		}
		first, m := binary.Uvarint(b[at:n])
		if m <= 0 || first == 0 {
			return 0, &CorruptError{File: seg.name(), Batch: seg.index, Err: errBatchBody}
		}
		return first, nil
	}
	return 0, &CorruptError{File: seg.name(), Batch: seg.index, Err: errFrameVersion}
}
