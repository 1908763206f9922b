package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
// cover; log/doc.go draws the format. The header of version 2 names the
// snapshot's owner (SnapshotOwner), which Restore checks; version 1 named
// none, and is still read.
//
// A snapshot is written to a temporary file, snap.%020d.N.tmp, fsynced,
// renamed and the directory fsynced, so a crash leaves a whole snapshot or
// none. The footer makes a snapshot cut short detectable. These constants
// never change.
const (
	snapPrefix  = "snap."
	snapTemp    = ".tmp"
	snapMagic   = "OFFSNAP"
	snapVersion = 1 // a header naming no owner, read only
	snapOwned   = 2 // a header naming its owner
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
	owner     *SnapshotOwner // nil: write version 1 headers, check none
}

// SnapshotOwner says whose state a snapshot holds. Create writes it in the
// file's header and Restore refuses a file whose header names another owner
// (errors.Is ErrSnapshotOwner and ErrCorrupt): a snapshot copied into
// another partition's directory, or from another data directory, is never
// loaded as that partition's state.
type SnapshotOwner struct {
	Partition  int    // the internal partition whose state it is
	Partitions int    // of how many
	Hash       string // the hash that places keys in partitions
	Dir        string // the identifier of the data directory (at most 255 bytes)
}

func (o SnapshotOwner) String() string {
	return fmt.Sprintf("partition %d of %d (hash %s) of data directory %s", o.Partition, o.Partitions, o.Hash, o.Dir)
}

// ErrSnapshotOwner marks a snapshot whose header names another owner.
var ErrSnapshotOwner = errors.New("log: snapshot of another partition or data directory")

// OpenSnapshots returns the snapshots of partition in dir, creating dir
// (durably) if needed. Their headers name no owner.
func OpenSnapshots(dir string, partition int) (*Snapshots, error) {
	if err := MakeDir(dir, SyncDir); err != nil {
		return nil, fmt.Errorf("log: partition %d: snapshots: %w", partition, err)
	}
	return &Snapshots{dir: dir, partition: partition}, nil
}

// NewSnapshots returns the snapshots of owner's partition in dir, without
// creating dir: until the first Create, which makes it, a missing dir
// holds none. Create names owner in every header, and Restore refuses a
// snapshot whose header names another.
func NewSnapshots(dir string, owner SnapshotOwner) (*Snapshots, error) {
	if len(owner.Hash) > 255 || len(owner.Dir) > 255 || owner.Partition < 0 || owner.Partitions <= owner.Partition {
		return nil, fmt.Errorf("%w: snapshot owner %v", ErrInvalid, owner)
	}
	return &Snapshots{dir: dir, partition: owner.Partition, owner: &owner}, nil
}

// Dir returns the snapshots' directory.
func (s *Snapshots) Dir() string { return s.dir }

// snapWriteBuffer is the buffer a snapshot is written through.
const snapWriteBuffer = 64 << 10

// SnapshotWriter is one snapshot file being written: the header is
// written, and the content (SnapshotEncoder) goes through Write, synced as
// it goes and paced, until Commit puts the file in place. It touches no
// file of the log, so it may run on any goroutine while the log's owner
// goes on appending.
type SnapshotWriter struct {
	dir, tmp, final string
	partition       int
	f               *os.File
	w               *bufio.Writer
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
// index: the caller writes its content, then commits. Leftover
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
	var f *os.File
	_, err := os.Stat(l.dir)
	if errors.Is(err, fs.ErrNotExist) {
		err = MakeDir(l.dir, SyncDir)
	}
	if err == nil {
		f, err = os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	}
	if err != nil {
		forget(tmp)
		return nil, fmt.Errorf("log: partition %d: snapshot %d: %w", l.partition, index, err)
	}
	w := &SnapshotWriter{start: time.Now(), dir: l.dir, tmp: tmp, final: final, partition: l.partition, f: f, w: bufio.NewWriterSize(f, snapWriteBuffer)}
	if err := w.write(appendSnapHeader(nil, index, l.owner)); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// Write writes b, part of the snapshot's content.
func (w *SnapshotWriter) Write(b []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("%w: partition %d: snapshot written after Commit or Abort", ErrInvalid, w.partition)
	}
	return len(b), w.write(b)
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

// Commit finishes the snapshot, whose content ends with its footer:
// fsync, rename into place, directory fsync. It returns the snapshot's
// size in bytes.
func (w *SnapshotWriter) Commit() (int64, error) {
	if w.done {
		return 0, fmt.Errorf("%w: partition %d: snapshot committed after Commit or Abort", ErrInvalid, w.partition)
	}
	err := w.w.Flush()
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

// Write writes the snapshot of the partition's state as of record index
// index, whose content fill writes (SnapshotEncoder), and returns its size
// in bytes: once it returns nil the snapshot is durable and in place; if
// fill or the file fails, nothing of it is left.
func (l *Snapshots) Write(index uint64, fill func(io.Writer) error) (int64, error) {
	w, err := l.Create(index)
	if err != nil {
		return 0, err
	}
	if err := fill(w); err != nil {
		w.Abort()
		return 0, err
	}
	return w.Commit()
}

// forget drops tmp from the files being written, once it is renamed or
// removed.
func forget(tmp string) {
	writing.Lock()
	delete(writing.files, filepath.Base(tmp))
	writing.Unlock()
}

// List returns the indexes of the snapshot files, newest first.
// A directory that does not exist holds none.
func (l *Snapshots) List() ([]uint64, error) {
	list, err := ListSnapshots(l.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return list, err
}

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

// Restore hands restore the content of the snapshot covering index
// (DecodeSnapshot reads it), once its header is checked: damage anywhere,
// a missing footer included, is an ErrCorrupt error naming the partition,
// the file and the offset in it; so is a header that names another owner
// than NewSnapshots was given (errors.Is ErrSnapshotOwner too), before
// restore is called.
func (l *Snapshots) Restore(index uint64, restore func(content io.Reader) error) error {
	name := snapshotName(index)
	f, err := os.Open(filepath.Join(l.dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, snapChunk)
	covers, owner, n, err := readSnapHeader(r)
	if err == nil && covers != index {
		err = errSnapHeader
	}
	if err != nil {
		return &CorruptError{Partition: l.partition, File: name, Record: covers, Err: err}
	}
	if err := l.checkOwner(name, index, owner); err != nil {
		return err
	}
	return placeDamage(restore(r), l.partition, name, index, n)
}

// placeDamage completes the damage DecodeSnapshot found in err, if any,
// with the snapshot's partition, file, index and header length n (its
// offsets count from the content's start).
func placeDamage(err error, partition int, name string, index uint64, n int64) error {
	var ce *CorruptError
	if errors.As(err, &ce) && ce.File == "" {
		ce.Partition, ce.File, ce.Record = partition, name, index
		ce.Offset += n
	}
	return err
}

// CheckOwner reads the header of the snapshot covering index and returns
// an error if it is damaged or names another owner (errors.Is
// ErrSnapshotOwner), as Restore would before the content.
func (l *Snapshots) CheckOwner(index uint64) error {
	name := snapshotName(index)
	f, err := os.Open(filepath.Join(l.dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	covers, owner, _, err := readSnapHeader(bufio.NewReader(f))
	if err != nil || covers != index {
		return &CorruptError{Partition: l.partition, File: name, Record: covers, Err: errSnapHeader}
	}
	return l.checkOwner(name, index, owner)
}

// checkOwner returns an error if owner, what the header of snapshot file
// name names, is not the owner l was given.
func (l *Snapshots) checkOwner(name string, index uint64, owner *SnapshotOwner) error {
	if l.owner == nil || owner == nil || *owner == *l.owner {
		return nil
	}
	return &CorruptError{Partition: l.partition, File: name, Record: index,
		Err: fmt.Errorf("%w (%w): its header names %v, this is %v", errSnapOwner, ErrSnapshotOwner, *owner, *l.owner)}
}

// ReadSnapshotFile reads a whole snapshot file, header and content, each
// record checked as Restore checks it, for tools that inspect a data
// directory, and returns the index it covers and its record count. It
// checks no owner.
func ReadSnapshotFile(path string, fn func(typ byte, payload []byte) error) (index uint64, records int, err error) {
	index, _, records, err = ReadSnapshotFileOwner(path, fn)
	return index, records, err
}

// ReadSnapshotFileOwner is ReadSnapshotFile that also returns the owner
// the file's header names (nil for a header of version 1, which names
// none).
func ReadSnapshotFileOwner(path string, fn func(typ byte, payload []byte) error) (index uint64, owner *SnapshotOwner, records int, err error) {
	var n int
	index, owner, err = readSnapshot(path, func(typ byte, payload []byte) error {
		n++
		if fn != nil {
			return fn(typ, payload)
		}
		return nil
	})
	return index, owner, n, err
}

// readSnapshot reads the snapshot file at path, calling fn for each
// record, and returns the index it covers and the owner its header names.
func readSnapshot(path string, fn func(typ byte, payload []byte) error) (uint64, *SnapshotOwner, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	return readSnapshotFrom(bufio.NewReaderSize(f, snapChunk), filepath.Base(path), -1, nil, fn)
}

// readSnapshotFrom reads a whole snapshot, header and content, from r, as
// readSnapshot reads the file name; the damage it finds names partition.
// If check is not nil, it judges the owner the header names before fn is
// called.
func readSnapshotFrom(r *bufio.Reader, name string, partition int, check func(*SnapshotOwner) error, fn func(typ byte, payload []byte) error) (uint64, *SnapshotOwner, error) {
	index, owner, n, err := readSnapHeader(r)
	if err != nil {
		return 0, nil, &CorruptError{Partition: partition, File: name, Err: err}
	}
	if check != nil {
		if err := check(owner); err != nil {
			return index, owner, err
		}
	}
	return index, owner, placeDamage(decodeSnapshot(r, n, fn), partition, name, index, 0)
}

// Open opens the snapshot covering index for reading, whole, as another
// replica of the partition receives it (Receive), and returns its size.
func (l *Snapshots) Open(index uint64) (*os.File, int64, error) {
	f, err := os.Open(filepath.Join(l.dir, snapshotName(index)))
	if err != nil {
		return nil, 0, fmt.Errorf("log: partition %d: snapshot %d: %w", l.partition, index, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("log: partition %d: snapshot %d: %w", l.partition, index, err)
	}
	return f, fi.Size(), nil
}

// Receive makes the snapshot read from r, another replica's snapshot
// covering index as Open gave it, the snapshot of index here: every record
// is checked as Restore checks it and written through Write, so the
// file's header names this Snapshots' owner. A snapshot whose header names
// another partition, partition count or hash than this owner is refused
// (errors.Is ErrSnapshotOwner and ErrCorrupt) before any record is
// written; one of another data directory is expected, since it is another
// replica's. A failure leaves no file behind.
func (l *Snapshots) Receive(index uint64, r io.Reader) error {
	name := fmt.Sprintf("snapshot %d received", index)
	check := func(o *SnapshotOwner) error {
		if l.owner == nil || o == nil || o.Partition == l.owner.Partition && o.Partitions == l.owner.Partitions && o.Hash == l.owner.Hash {
			return nil
		}
		return &CorruptError{Partition: l.partition, File: name, Record: index,
			Err: fmt.Errorf("%w (%w): its header names %v, this is partition %d of %d (hash %s)",
				errSnapOwner, ErrSnapshotOwner, *o, l.owner.Partition, l.owner.Partitions, l.owner.Hash)}
	}
	_, err := l.Write(index, func(w io.Writer) error {
		enc := NewSnapshotEncoder(w)
		at, _, err := readSnapshotFrom(bufio.NewReaderSize(r, snapChunk), name, l.partition, check, enc.Add)
		if err == nil && at != index {
			err = &CorruptError{Partition: l.partition, File: name, Record: at, Err: fmt.Errorf("%w: it covers index %d", errSnapHeader, at)}
		}
		if err != nil {
			return err
		}
		return enc.Finish()
	})
	return err
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
