package log

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Snapshot files hold a partition's live state as of a record index of the
// journal, so that a restart replays only the journal after it. Each
// partition has a directory of them, named snap.%020d of the index they
// cover, in the record frames of the log:
//
//	header:  | "OFFSNAP" | version 1 | index uint64 LE | crc32c of the 16 bytes before, LE |
//	entries: | uvarint(len(frame)) | frame |  ...       (frames as in the segments)
//	footer:  | uvarint 0 | count uint64 LE | crc32c of count, LE |
//
// A snapshot is written to a temporary file, snap.%020d.N.tmp, fsynced,
// renamed and the directory fsynced, so a crash leaves a whole snapshot or
// none. The footer makes a snapshot cut short detectable. These constants
// never change.
const (
	snapPrefix  = "snap."
	snapTemp    = ".tmp"
	snapMagic   = "OFFSNAP"
	snapVersion = 1
	snapHeader  = len(snapMagic) + 1 + 8 + 4
	snapFooter  = 8 + 4
	// snapSyncEvery bounds the dirty bytes of a snapshot being written:
	// syncing as it goes keeps one huge write-back from holding up the
	// log's own fsyncs.
	snapSyncEvery = 1 << 20
)

// snapRate caps how fast a snapshot is written, in bytes per second. A
// snapshot is background work: written flat out it fills the disk's queue
// and every commit's fsync waits behind it (p999 commit latency rose from
// about 1 ms to 21 ms while a 1M-key partition was snapshotted back to back;
// at this rate it stays near 6 ms).
const snapRate = 16 << 20

func snapshotName(index uint64) string { return fmt.Sprintf("%s%020d", snapPrefix, index) }

// SnapshotPath returns the path of the snapshot covering index in the log
// directory dir.
func SnapshotPath(dir string, index uint64) string { return filepath.Join(dir, snapshotName(index)) }

// Snapshots are one partition's snapshot files, in a directory of their
// own. Its methods may run on any goroutine, beside the journal's writer.
// Snapshots may be written side by side, through one Snapshots or several
// of one directory (a partition's own, and one a Raft leader sent), even
// of the same index: each has a temporary file of its own, and the
// leftovers Create removes are only those no writer of this process holds.
type Snapshots struct {
	dir       string
	partition int
}

// OpenSnapshots returns the snapshots of partition in dir, creating dir
// (durably) if needed.
func OpenSnapshots(dir string, partition int) (*Snapshots, error) {
	if err := MakeDir(dir, SyncDir); err != nil {
		return nil, fmt.Errorf("log: partition %d: snapshots: %w", partition, err)
	}
	return &Snapshots{dir: dir, partition: partition}, nil
}

// Dir returns the snapshots' directory.
func (s *Snapshots) Dir() string { return s.dir }

// snapWriteBuffer is the buffer a snapshot is written through.
const snapWriteBuffer = 64 << 10

// SnapshotWriter writes one snapshot file. It touches no file of the log,
// so it may run on any goroutine while the log's owner goes on appending.
type SnapshotWriter struct {
	dir, tmp, final string
	partition       int
	f               *os.File
	w               *bufio.Writer
	frame           []byte
	count           uint64
	unsynced        int
	size            int64
	start           time.Time
	done            bool
}

// writing holds the names of the temporary files of the snapshots this
// process is writing, which Create does not take for leftovers. The names
// are unique in the process (numbered from next), so that two handles of
// one directory, whatever path each has for it, agree on them.
var writing struct {
	sync.Mutex
	files map[string]bool
	next  uint64
}

// Create starts a snapshot of the partition's state as of record index
// index: the caller adds the state's records, then commits. Leftover
// temporary files of earlier, unfinished snapshots (a crash's) are removed;
// those of snapshots being written beside it are not.
func (l *Snapshots) Create(index uint64) (*SnapshotWriter, error) {
	if index == 0 {
		return nil, fmt.Errorf("%w: snapshot of index 0", ErrInvalid)
	}
	final := filepath.Join(l.dir, snapshotName(index))
	leftovers, _ := filepath.Glob(filepath.Join(l.dir, snapPrefix+"*"+snapTemp))
	writing.Lock()
	for _, p := range leftovers {
		if !writing.files[filepath.Base(p)] {
			os.Remove(p)
		}
	}
	writing.next++
	tmp := fmt.Sprintf("%s.%d%s", final, writing.next, snapTemp)
	if writing.files == nil {
		writing.files = make(map[string]bool)
	}
	writing.files[filepath.Base(tmp)] = true
	writing.Unlock()
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		forget(tmp)
		return nil, fmt.Errorf("log: partition %d: snapshot %d: %w", l.partition, index, err)
	}
	w := &SnapshotWriter{start: time.Now(), dir: l.dir, tmp: tmp, final: final, partition: l.partition, f: f, w: bufio.NewWriterSize(f, snapWriteBuffer)}
	var h [snapHeader]byte
	copy(h[:], snapMagic)
	h[len(snapMagic)] = snapVersion
	binary.LittleEndian.PutUint64(h[len(snapMagic)+1:], index)
	binary.LittleEndian.PutUint32(h[snapHeader-4:], crc32.Checksum(h[:snapHeader-4], castagnoli))
	if err := w.write(h[:]); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

func (w *SnapshotWriter) write(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("log: partition %d: snapshot: %w", w.partition, err)
	}
	w.size += int64(len(b))
	w.unsynced += len(b)
	if w.unsynced >= snapSyncEvery {
		w.unsynced = 0
		if err := w.w.Flush(); err != nil {
			return fmt.Errorf("log: partition %d: snapshot: %w", w.partition, err)
		}
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("log: partition %d: snapshot: %w", w.partition, err)
		}
		w.pace()
	}
	return nil
}

// pace holds the writer back to snapRate bytes per second.
func (w *SnapshotWriter) pace() {
	due := time.Duration(float64(w.size) / float64(snapRate) * float64(time.Second))
	if ahead := due - time.Since(w.start); ahead > 0 {
		time.Sleep(ahead)
	}
}

// Add appends one record to the snapshot. typ 0 is invalid.
func (w *SnapshotWriter) Add(typ byte, payload []byte) error {
	if typ == 0 {
		return fmt.Errorf("%w: snapshot record of type 0", ErrInvalid)
	}
	n := frameSize(len(payload))
	w.frame = binary.AppendUvarint(w.frame[:0], uint64(n))
	w.frame = appendFrame(w.frame, frameRecord, typ, payload)
	w.count++
	return w.write(w.frame)
}

// Commit finishes the snapshot: footer, fsync, rename into place, directory
// fsync. It returns the snapshot's size in bytes.
func (w *SnapshotWriter) Commit() (int64, error) {
	var foot [1 + snapFooter]byte
	binary.LittleEndian.PutUint64(foot[1:], w.count)
	binary.LittleEndian.PutUint32(foot[9:], crc32.Checksum(foot[1:9], castagnoli))
	err := w.write(foot[:])
	if err == nil {
		err = w.w.Flush()
	}
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.done = true
	if err == nil {
		err = os.Rename(w.tmp, w.final)
	}
	if err == nil {
		err = SyncDir(w.dir)
	}
	if err != nil {
		os.Remove(w.tmp)
	}
	forget(w.tmp)
	if err != nil {
		return 0, fmt.Errorf("log: partition %d: snapshot: %w", w.partition, err)
	}
	return w.size, nil
}

// Abort drops an unfinished snapshot.
func (w *SnapshotWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	os.Remove(w.tmp)
	forget(w.tmp)
}

// forget drops tmp from the files being written, once it is renamed or
// removed.
func forget(tmp string) {
	writing.Lock()
	delete(writing.files, filepath.Base(tmp))
	writing.Unlock()
}

// List returns the indexes of the snapshot files, newest first.
func (l *Snapshots) List() ([]uint64, error) { return ListSnapshots(l.dir) }

// ListSnapshots returns the indexes of the snapshot files in a log
// directory, newest first.
func ListSnapshots(dir string) ([]uint64, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, de := range des {
		name := de.Name()
		if de.IsDir() || !strings.HasPrefix(name, snapPrefix) || strings.HasSuffix(name, snapTemp) {
			continue
		}
		if i, err := strconv.ParseUint(name[len(snapPrefix):], 10, 64); err == nil && len(name) == len(snapPrefix)+20 {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out, nil
}

// Read calls fn for every record of the snapshot covering index, in the
// order they were added, after checking each record's checksum. Damage
// anywhere, a missing footer included, is an ErrCorrupt error naming the
// partition and file. payload is valid only during fn.
func (l *Snapshots) Read(index uint64, fn func(typ byte, payload []byte) error) error {
	name := snapshotName(index)
	covers, err := readSnapshot(filepath.Join(l.dir, name), l.partition, fn)
	if err == nil && covers != index {
		return &CorruptError{Partition: l.partition, Segment: name, Index: covers, Err: errSnapHeader}
	}
	return err
}

// ReadSnapshotFile reads a snapshot file as ReadSnapshot does, for tools
// that inspect a data directory, and returns the index it covers and its
// record count.
func ReadSnapshotFile(path string, fn func(typ byte, payload []byte) error) (index uint64, records int, err error) {
	var n int
	index, err = readSnapshot(path, -1, func(typ byte, payload []byte) error {
		n++
		if fn != nil {
			return fn(typ, payload)
		}
		return nil
	})
	return index, n, err
}

func readSnapshot(path string, partition int, fn func(typ byte, payload []byte) error) (uint64, error) {
	name := filepath.Base(path)
	bad := func(index uint64, off int64, why error) error {
		return &CorruptError{Partition: partition, Segment: name, Index: index, Offset: off, Err: why}
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	fileSize := fi.Size()
	r := bufio.NewReaderSize(f, 1<<20)
	var h [snapHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, bad(0, 0, errSnapHeader)
	}
	if string(h[:len(snapMagic)]) != snapMagic || h[len(snapMagic)] != snapVersion ||
		crc32.Checksum(h[:snapHeader-4], castagnoli) != binary.LittleEndian.Uint32(h[snapHeader-4:]) {
		return 0, bad(0, 0, errSnapHeader)
	}
	index := binary.LittleEndian.Uint64(h[len(snapMagic)+1:])
	off := int64(snapHeader)
	var buf []byte
	for n := uint64(0); ; n++ {
		size, err := binary.ReadUvarint(r)
		if err != nil {
			return index, bad(index, off, errSnapShort)
		}
		if size == 0 {
			var foot [snapFooter]byte
			if _, err := io.ReadFull(r, foot[:]); err != nil {
				return index, bad(index, off, errSnapShort)
			}
			count := binary.LittleEndian.Uint64(foot[:8])
			if crc32.Checksum(foot[:8], castagnoli) != binary.LittleEndian.Uint32(foot[8:]) || count != n {
				return index, bad(index, off, errSnapFooter)
			}
			if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
				return index, bad(index, off, errSnapFooter)
			}
			return index, nil
		}
		if size < minFrameSize {
			return index, bad(index, off, errEntryShort)
		}
		if size > uint64(fileSize-off) {
			// The length is not under the checksum: never trust it past
			// the end of the file (a flipped bit would allocate gigabytes).
			return index, bad(index, off, errSnapShort)
		}
		buf = slices.Grow(buf[:0], int(size))[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			return index, bad(index, off, errSnapShort)
		}
		f, err := decodeFrame(buf)
		if err == nil && f.version != frameRecord {
			err = errFrameVersion
		}
		if err != nil {
			return index, bad(index, off, err)
		}
		if err := fn(f.typ, f.payload); err != nil {
			return index, err
		}
		off += int64(uvarintLen(size)) + int64(size)
	}
}

// Prune deletes every snapshot older than newest but previous (0: none
// kept), and syncs the directory. A partition keeps its newest snapshot
// and the one before it to fall back to; a snapshot between the two is
// one that did not read back whole when the partition loaded, and would
// otherwise pass for the one to fall back to after the next restart.
func (l *Snapshots) Prune(newest, previous uint64) error {
	return l.remove(func(i uint64) bool { return i < newest && i != previous })
}

// RemoveAfter deletes every snapshot newer than index and syncs the
// directory: a snapshot ahead of the journal (whose tail was cut) must
// never be loaded later, when new records have taken its indexes.
func (l *Snapshots) RemoveAfter(index uint64) error {
	return l.remove(func(i uint64) bool { return i > index })
}

func (l *Snapshots) remove(match func(uint64) bool) error {
	all, err := l.List()
	if err != nil {
		return fmt.Errorf("log: partition %d: remove snapshots: %w", l.partition, err)
	}
	removed := false
	for _, i := range all {
		if match(i) {
			if err := os.Remove(filepath.Join(l.dir, snapshotName(i))); err != nil {
				return fmt.Errorf("log: partition %d: remove snapshots: %w", l.partition, err)
			}
			removed = true
		}
	}
	if removed {
		if err := SyncDir(l.dir); err != nil {
			return fmt.Errorf("log: partition %d: remove snapshots: %w", l.partition, err)
		}
	}
	return nil
}
