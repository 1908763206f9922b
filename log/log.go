package log

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/tidwall/wal"
	"github.com/valyala/bytebufferpool"
)

// Options configures one partition's log.
type Options struct {
	// SegmentSize is the target size of a segment file in bytes; a segment
	// is closed once it reaches it, so it can exceed it by one entry.
	// Default 4 MiB. Memory per partition is about 2 × SegmentSize: the
	// tail segment lives in memory (wal keeps it there), and Replay holds
	// one segment at a time. Keep it a few MB.
	SegmentSize int

	// UnsafeNoSync skips the fsyncs of Append: an acknowledged entry can
	// be lost to a crash of the machine. Open, recovery and TruncateFront
	// still sync.
	UnsafeNoSync bool

	// Partition is the internal partition this log holds. It only appears
	// in errors and log messages.
	Partition int

	// Logger receives warnings (a torn tail cut on Open, a failed write).
	// Nil means slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the options Open uses for zero fields.
func DefaultOptions() Options {
	return Options{SegmentSize: 4 << 20}
}

// maxSegmentSize bounds SegmentSize: the tail segment is held in memory.
const maxSegmentSize = 1 << 30

func (o *Options) ensureDefaults() {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultOptions().SegmentSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o *Options) validate() error {
	if o.SegmentSize < 0 || o.SegmentSize > maxSegmentSize {
		return fmt.Errorf("%w: Options.SegmentSize is %d, want 1 to %d", ErrInvalid, o.SegmentSize, maxSegmentSize)
	}
	if o.Partition < 0 {
		return fmt.Errorf("%w: Options.Partition is %d, want >= 0", ErrInvalid, o.Partition)
	}
	return nil
}

// Entry is one record of the log. Type is opaque to the log (its user
// defines the record types) except that 0 is invalid.
type Entry struct {
	Type    byte
	Payload []byte
}

// Log is one partition's segmented, append-only log. Its entries have
// contiguous indexes starting at 1.
//
// A Log has one owner goroutine: Append, Replay, Recover and Close must
// not run concurrently. TruncateFront, the snapshot calls, FirstIndex,
// LastIndex, Poisoned and Dir may be called from any goroutine (Close
// must still come after them).
//
// Invariant: nothing in this package calls wal's Read, TruncateFront or
// TruncateBack (TestWALUse checks), nor asks its FirstIndex but right after
// wal.Open. TruncateFront removes segment files behind the open wal handle,
// which is safe only because, without those calls, wal touches nothing but
// its last segment.
type Log struct {
	dir    string
	opts   Options
	logger *slog.Logger

	wal   *wal.Log // nil after Close, and while poisoned
	batch wal.Batch

	first    atomic.Uint64
	last     atomic.Uint64 // last index durably appended: a failed batch never counts
	poisoned atomic.Bool

	// tailStart and tailSize mirror wal's last segment (its first index
	// and its size in bytes), to know when a batch creates a segment file.
	// tailStart is atomic because TruncateFront reads it beside Append.
	tailStart atomic.Uint64
	tailSize  int64

	// files serializes the code that removes or cuts segment files:
	// TruncateFront, which may run beside the owner, against poisoning,
	// recovery and Close on the owner.
	files sync.Mutex

	closed bool
}

// Open opens the log in dir, creating dir if needed. It first finishes
// any truncation that a crash interrupted, cuts a torn tail off the last
// segment (logging what it dropped) and syncs; damage before the tail is
// an ErrCorrupt error naming partition, segment and index. opts is copied;
// bad values are ErrInvalid errors naming the field.
func Open(dir string, opts Options) (*Log, error) {
	opts.ensureDefaults() // opts is the caller's copy already
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory name", ErrInvalid)
	}
	l := &Log{dir: dir, opts: opts, logger: opts.Logger.With("partition", opts.Partition)}
	if err := makeDir(dir); err != nil {
		return nil, l.errorf("open: %w", err)
	}
	if err := l.openWAL(); err != nil {
		return nil, err
	}
	return l, nil
}

// makeDir creates dir and makes its entry in the parent durable.
func makeDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	return syncDir(filepath.Dir(filepath.Clean(dir)))
}

// openWAL prepares the directory (finished truncations, repaired tail,
// everything synced) and opens wal on it.
func (l *Log) openWAL() error {
	segs, tailSize, err := prepareDir(l.dir, l.opts.Partition, l.logger)
	if err != nil {
		return err
	}
	w, err := wal.Open(l.dir, l.walOptions())
	if err != nil {
		return l.errorf("open wal: %w", err)
	}
	if len(segs) == 0 {
		// wal created the first segment file.
		if err := syncDir(l.dir); err != nil {
			w.Close()
			return l.errorf("open: %w", err)
		}
		l.tailStart.Store(1)
		l.tailSize = 0
	} else {
		l.tailStart.Store(segs[len(segs)-1].index)
		l.tailSize = tailSize
	}
	first, err1 := w.FirstIndex()
	last, err2 := w.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		w.Close()
		return l.errorf("open wal: %w", err)
	}
	l.wal = w
	l.first.Store(first)
	l.last.Store(last)
	return nil
}

// walOptions returns a fresh copy each time, since wal.Open writes to it.
func (l *Log) walOptions() *wal.Options {
	return &wal.Options{
		NoSync:           l.opts.UnsafeNoSync,
		SegmentSize:      l.opts.SegmentSize,
		LogFormat:        wal.Binary,
		SegmentCacheSize: 1,    // we never read through wal
		NoCopy:           true, // nor copy
		AllowEmpty:       true, // the only segment left may be empty: just cycled, repaired or cut back
		DirPerms:         0o750,
		FilePerms:        0o640,
	}
}

// Append writes entries as one batch with one fsync, and returns the
// indexes given to the first and the last. Nothing is written if an entry
// has type 0 or the batch is empty (ErrInvalid). Append does not keep
// entries or their payloads.
//
// Any write or sync error poisons the handle: the batch is failed, the
// segment files are cut back to the last acknowledged entry, and the next
// Append (or TruncateFront) first reopens the log through Recover. The
// entries of a failed batch never show up later, not even after a
// reopen. If recovery fails, Append returns its error and tries again the
// next time.
func (l *Log) Append(entries []Entry) (first, last uint64, err error) {
	if l.closed {
		return 0, 0, l.errorf("append: %w", ErrClosed)
	}
	if len(entries) == 0 {
		return 0, 0, fmt.Errorf("%w: empty batch", ErrInvalid)
	}
	for i := range entries {
		if entries[i].Type == 0 {
			return 0, 0, fmt.Errorf("%w: entry %d of %d has type 0", ErrInvalid, i, len(entries))
		}
	}
	if l.poisoned.Load() {
		if err := l.recover(); err != nil {
			return 0, 0, l.errorf("append refused, the log is still poisoned: %w", err)
		}
	}
	first = l.last.Load() + 1
	last = first + uint64(len(entries)) - 1

	buf := bytebufferpool.Get()
	l.batch.Clear()
	for i := range entries {
		buf.B = appendFrame(buf.B[:0], entries[i].Type, entries[i].Payload)
		l.batch.Write(first+uint64(i), buf.B) // copies
	}
	bytebufferpool.Put(buf)

	tailStart, tailSize, created := l.nextTail(entries, first)
	if err := l.wal.WriteBatch(&l.batch); err != nil {
		l.batch.Clear()
		return 0, 0, l.poison(fmt.Errorf("append %d-%d: %w", first, last, err))
	}
	if created {
		if !l.opts.UnsafeNoSync {
			if err := syncDir(l.dir); err != nil {
				return 0, 0, l.poison(fmt.Errorf("append %d-%d: sync directory after new segment: %w", first, last, err))
			}
		}
		// wal caches the segment it just closed; we never read it back.
		l.wal.ClearCache()
	}
	l.tailStart.Store(tailStart)
	l.tailSize = tailSize
	l.last.Store(last)
	return first, last, nil
}

// nextTail predicts where wal's last segment will be after writing
// entries, and whether it creates segment files. It mirrors writeBatch and
// cycle of wal v1.2.1: a segment is closed before a batch if it is over
// SegmentSize, and after any entry that brings it to SegmentSize.
// TestTailPrediction checks it against the directory.
func (l *Log) nextTail(entries []Entry, first uint64) (start uint64, size int64, created bool) {
	start, size = l.tailStart.Load(), l.tailSize
	limit := int64(l.opts.SegmentSize)
	if size > limit {
		start, size, created = first, 0, true
	}
	for i := range entries {
		n := frameSize(len(entries[i].Payload))
		size += int64(uvarintLen(uint64(n)) + n)
		if size >= limit {
			start, size, created = first+uint64(i)+1, 0, true
		}
	}
	return start, size, created
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// FirstIndex returns the index of the first entry, where the oldest
// segment file starts, or LastIndex()+1 when the log holds no entries (1
// for a new log; after TruncateFront when the last segment was empty).
// These are wal's values with its AllowEmpty option.
func (l *Log) FirstIndex() uint64 { return l.first.Load() }

// LastIndex returns the index of the last acknowledged entry, 0 when
// nothing has ever been written. A failed batch never counts, even while
// the handle is poisoned.
func (l *Log) LastIndex() uint64 { return l.last.Load() }

// Poisoned reports whether a write failed since the last successful
// recovery. Append recovers a poisoned log first; TruncateFront refuses
// until it has.
func (l *Log) Poisoned() bool { return l.poisoned.Load() }

// Dir returns the directory given to Open.
func (l *Log) Dir() string { return l.dir }

// TruncateFront removes the whole segments before the one holding index:
// every segment file all of whose entries come before index, but never the
// last segment. It is meant for after a snapshot covering index-1. The
// entries from the start of the segment holding index stay, so FirstIndex
// becomes the first index of the oldest remaining segment, which may be
// below index. index must be in [FirstIndex, LastIndex+1]. It writes no
// data: it lists the directory, unlinks the files, oldest first, and syncs
// the directory once if it removed any.
//
// A failed unlink or directory sync returns an error but does not poison
// the handle: the files left are a contiguous run of segments ending at
// the last one either way, FirstIndex names the oldest of them, and a
// crash before the sync leaves such a run too, which Open accepts.
//
// Unlike the other methods, TruncateFront may run on another goroutine
// while the owner appends: unlinking segments can take milliseconds each
// (more on a filesystem mounted with discard), and commits need not wait
// for it. It refuses a poisoned log, whose recovery is the owner's.
func (l *Log) TruncateFront(index uint64) error {
	l.files.Lock()
	defer l.files.Unlock()
	if l.closed {
		return l.errorf("truncate front: %w", ErrClosed)
	}
	if l.poisoned.Load() {
		// Recovery is the owner's, on its next Append.
		return l.errorf("truncate front refused: the log is poisoned until the next append recovers it")
	}
	first, last := l.first.Load(), l.last.Load()
	if index < first || index > last+1 {
		return fmt.Errorf("%w: truncate front to %d, outside [%d, %d]", ErrInvalid, index, first, last+1)
	}
	if index == first {
		return nil
	}
	st, err := readDirState(l.dir)
	if err != nil {
		return l.errorf("truncate front to %d: %w", index, err)
	}
	if len(st.leftovers) > 0 {
		// Open finished them and nothing writes them since: someone else
		// is at work in the directory.
		return l.errorf("truncate front to %d: unexpected files %v", index, st.leftovers)
	}
	// Segment n can go when segment n+1 starts at or before index. The
	// tail is never removed: wal writes to it.
	segs := st.segments
	n := 0
	for n+1 < len(segs) && segs[n+1].index <= index && segs[n].index < l.tailStart.Load() {
		n++
	}
	if n == 0 {
		return nil
	}
	// Once open, wal only writes to and cycles its last segment; it opens
	// older ones only to read or truncate, which Log never asks of it (see
	// Log). So they can go behind its back: its list of segments goes
	// stale (about 100 bytes and a path per segment created since Open),
	// nothing consults it, and the next wal.Open lists the directory afresh.
	for i, s := range segs[:n] {
		if err := os.Remove(s.path); err != nil {
			l.first.Store(s.index) // segs[:i] are gone
			return l.errorf("truncate front to %d: remove segment %d of %d: %w", index, i+1, n, err)
		}
	}
	l.first.Store(segs[n].index)
	if err := syncDir(l.dir); err != nil {
		return l.errorf("truncate front to %d: sync directory: %w", index, err)
	}
	return nil
}

// Close syncs and closes the log. Closing a poisoned log cuts the segment
// files back to LastIndex, so that the failed batch cannot come back on
// the next Open.
func (l *Log) Close() error {
	l.files.Lock()
	defer l.files.Unlock()
	if l.closed {
		return l.errorf("close: %w", ErrClosed)
	}
	l.closed = true
	var errs []error
	if l.wal != nil {
		errs = append(errs, l.wal.Close())
		l.wal = nil
	}
	if l.poisoned.Load() {
		errs = append(errs, restoreFiles(l.dir, l.last.Load(), l.opts.Partition))
	}
	if err := errors.Join(errs...); err != nil {
		return l.errorf("close: %w", err)
	}
	return nil
}

// errorf prefixes an error with the package and partition.
func (l *Log) errorf(format string, args ...any) error {
	return fmt.Errorf("log: partition %d: "+format, append([]any{l.opts.Partition}, args...)...)
}
