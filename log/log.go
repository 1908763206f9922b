package log

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/tidwall/wal"
)

// Options configures a log: the journal every partition shares, or a
// partition's log of format 1, read to convert it.
type Options struct {
	// SegmentSize is the target size of a segment file in bytes; a segment
	// is closed once it reaches it, so it can exceed it by one entry.
	// Default 4 MiB. A log's memory is about 2 × SegmentSize: the tail
	// segment lives in memory (wal keeps it there), and Replay holds one
	// segment at a time. Keep it a few MB.
	SegmentSize int

	// UnsafeNoSync skips the syncs of Append, and the sync ring: an
	// acknowledged entry can be lost to a crash of the machine. Open,
	// recovery and TruncateFront still sync. Open still restores from a
	// sync ring that a run without it left, and then clears it.
	UnsafeNoSync bool

	// Format1 marks a log of format 1 (one partition's log, as the
	// previous release wrote them), read to convert it: Partition is then
	// the partition of its records, which carry none of their own, and
	// names the log in errors and log messages. Without it the log is the
	// journal every partition shares, named "journal", and Partition is
	// not used.
	Format1   bool
	Partition int

	// JournalID identifies the journal (the coordinator gives its data
	// directory's identifier). Every batch Append writes carries a tag
	// made from it, and Open refuses a batch that carries another: a
	// segment, or a sync ring, copied from another journal whose indexes
	// happen to line up. Batches written without one carry none and are
	// accepted by any. Empty: batches carry no tag, and none is checked.
	JournalID string

	// Logger receives warnings (a torn tail cut on Open, a failed write).
	// Nil means slog.Default().
	Logger *slog.Logger

	// ringSize, if not 0, replaces the sync ring's size (see ringSize);
	// tests make it small.
	ringSize int64
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

// partition is the partition of a format-1 log, or -1 for the journal:
// what CorruptError.Partition holds.
func (o *Options) partition() int {
	if o.Format1 {
		return o.Partition
	}
	return -1
}

// logName names a log in errors and log messages: "journal", or
// "partition N" for a log of format 1 (partition is what
// Options.partition returns).
func logName(partition int) string {
	if partition < 0 {
		return "journal"
	}
	return fmt.Sprintf("partition %d", partition)
}

// journalTag is the tag the batches of the journal carry: FNV-1a of
// JournalID (never 0), or 0 without one.
func (o *Options) journalTag() uint64 {
	if o.JournalID == "" {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(o.JournalID))
	return max(h.Sum64(), 1)
}

// syncRingSize returns the size of the sync ring.
func (o *Options) syncRingSize() int64 {
	if o.ringSize > 0 {
		return o.ringSize
	}
	return ringSize(o.SegmentSize)
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

// Entry is one record of the log: the internal partition it belongs to,
// and a type and payload that are opaque to the log (its user defines the
// record types) except that type 0 is invalid.
type Entry struct {
	Partition int
	Type      byte
	Payload   []byte
}

// Log is a segmented, append-only log of records. Each Append is one
// batch: one wal entry, one checksum, one sync (of the sync ring, see the
// package documentation), all its records or none.
// Records have increasing indexes, starting at 1; they are contiguous but
// where SkipTo skipped ahead. Every record names its partition, so
// one Log is the journal of every internal partition.
//
// A Log has one owner goroutine: Append, Replay, Recover and Close must
// not run concurrently (a Committer is such an owner). TruncateFront,
// FirstIndex, LastIndex, Poisoned and Dir may be called from any goroutine
// (Close must still come after them).
//
// What Log relies on of wal beyond its API is listed in wal.go.
type Log struct {
	dir    string
	opts   Options
	logger *slog.Logger

	wal *wal.Log // nil after Close, and while poisoned
	buf []byte   // the frame being written
	// ring makes the batches of the last segment durable (see ring.go);
	// nil with UnsafeNoSync.
	ring *ring

	// Two index spaces, named apart: record indexes (what Append returns)
	// and wal indexes of batches (what segment files are named by).
	firstRecord atomic.Uint64 // record index of the first record held
	lastRecord  atomic.Uint64 // last record index durably appended: a failed batch never counts
	lastBatch   atomic.Uint64 // wal index of the last batch durably appended
	poisoned    atomic.Bool
	empty       bool // the log holds no batch
	cycled      int  // segments wal created since it was opened
	// dirUnsynced is set, with UnsafeNoSync, when a segment was created
	// since the directory was last synced: Sync syncs it.
	dirUnsynced bool

	// tailStart and tailSize mirror wal's last segment (the wal index of its
	// first entry and its size in bytes), to know when a batch creates a
	// segment file. tailStart is atomic because TruncateFront reads it
	// beside Append.
	tailStart atomic.Uint64
	tailSize  int64

	// files serializes the code that removes or cuts segment files:
	// TruncateFront, which may run beside the owner, against poisoning,
	// recovery and Close on the owner.
	files sync.Mutex

	closed bool
}

// Open opens the log in dir, creating dir if needed. It first plans
// (PlanOpen), reading everything and writing nothing, and refuses a
// damaged directory as the plan does, untouched: damage before the tail
// is an ErrCorrupt error naming partition, file and index; so is any
// damage at all after a clean close (Close leaves a marker that Open
// checks and removes). Then it carries the plan out (Plan.Open). opts is
// copied; bad values are ErrInvalid errors naming the field.
func Open(dir string, opts Options) (*Log, error) {
	p, err := PlanOpen(dir, opts)
	if err != nil {
		return nil, err
	}
	return p.Open()
}

// SkipTo makes the next record index at least next, durably: it appends a
// batch of no records that says so (one sync), unless the log is there
// already. Its user calls it with one more than any index a snapshot or a
// version it handed out may name, so that no index is ever given twice,
// even after a tail was cut or a journal was started afresh.
func (l *Log) SkipTo(next uint64) error {
	if l.closed {
		return l.errorf("skip: %w", ErrClosed)
	}
	if next <= l.lastRecord.Load()+1 {
		return nil
	}
	_, _, err := l.write(next, nil)
	return err
}

// Append writes entries as one batch: one wal entry with one checksum, and
// one sync. It returns the record indexes given to the first and the
// last entry. Nothing is written if an entry has type 0, a negative
// partition, or the batch is empty (ErrInvalid). Append does not keep
// entries or their payloads.
//
// Any write or sync error poisons the handle: the batch is failed, its
// copy in the sync ring is overwritten, the segment files are cut back to
// the last acknowledged batch, and the next Append (or TruncateFront)
// first reopens the log through Recover. The records of a failed batch
// never show up later, not even after a reopen, but for one window: a
// crash after the failure and before the segment is cut back and the
// copy overwritten, where the batch reached the disk whole (its copy in
// the ring, if only the copy's sync failed; or the segment wal closed and
// synced with it, if creating the next one failed), brings it back, as a
// batch whose sync succeeded but whose answer a crash lost. If recovery
// fails, Append returns its error and tries again the next time.
func (l *Log) Append(entries []Entry) (first, last uint64, err error) {
	if l.closed {
		return 0, 0, l.errorf("append: %w", ErrClosed)
	}
	if len(entries) == 0 {
		return 0, 0, fmt.Errorf("%w: empty batch", ErrInvalid)
	}
	if len(entries) > maxBatchRecords {
		return 0, 0, fmt.Errorf("%w: %d entries in one batch, at most %d", ErrInvalid, len(entries), maxBatchRecords)
	}
	for i := range entries {
		if entries[i].Type == 0 {
			return 0, 0, fmt.Errorf("%w: entry %d of %d has type 0", ErrInvalid, i, len(entries))
		}
		if entries[i].Partition < 0 || entries[i].Partition > maxPartition {
			return 0, 0, fmt.Errorf("%w: entry %d of %d has partition %d", ErrInvalid, i, len(entries), entries[i].Partition)
		}
	}
	return l.write(l.lastRecord.Load()+1, entries)
}

// write appends entries (maybe none) as one batch whose first record index
// is first.
func (l *Log) write(first uint64, entries []Entry) (_, last uint64, err error) {
	if l.poisoned.Load() {
		if err := l.recover(); err != nil {
			return 0, 0, l.errorf("append refused, the log is still poisoned: %w", err)
		}
	}
	last = first + uint64(len(entries)) - 1
	l.buf = appendBatchFrame(l.buf[:0], l.opts.journalTag(), first, entries)
	err = l.appendFrame(l.lastBatch.Load()+1, l.buf, first, last, true)
	if cap(l.buf) > 1<<20 {
		l.buf = nil // do not hold on to the memory of one huge batch
	}
	if err != nil {
		return 0, 0, err
	}
	if l.cycled >= reopenAfterSegments {
		// wal's list of segments grows by one for each it creates, even
		// once TruncateFront removed them; a reopen lists the directory
		// afresh. The batch is durable whatever happens here: a failed
		// reopen leaves the handle poisoned, and the next write retries.
		l.cycled = 0
		if err := l.recover(); err != nil {
			l.logger.Error("log: reopen to forget removed segments failed; the next write retries", "err", err.Error())
		}
	}
	return first, last, nil
}

// appendFrame writes frame, the batch of records first to last, as wal
// entry batch, and, if sync, makes it durable: in the sync ring, or by
// an fsync of the last segment when the ring has no room for it (a
// segment wal closes it syncs itself). A failure poisons the handle.
func (l *Log) appendFrame(batch uint64, frame []byte, first, last uint64, sync bool) error {
	tailStart, tailSize, created := l.nextTail(len(frame), batch)
	if err := l.wal.Write(batch, frame); err != nil {
		return l.poison(fmt.Errorf("append %d-%d: %w", first, last, err))
	}
	if created {
		if l.opts.UnsafeNoSync {
			l.dirUnsynced = true // until Sync
		} else if err := SyncDir(l.dir); err != nil {
			return l.poison(fmt.Errorf("append %d-%d: sync directory after new segment: %w", first, last, err))
		}
		// wal caches the segment it just closed; we never read it back.
		l.wal.ClearCache()
		l.cycled++
		if l.ring != nil {
			l.ring.restart() // wal synced the segment it closed
		}
	}
	if sync && l.ring != nil && tailStart <= batch {
		if err := l.syncTail(batch, frame); err != nil {
			return l.poison(fmt.Errorf("append %d-%d: %w", first, last, err))
		}
	}
	l.tailStart.Store(tailStart)
	l.tailSize = tailSize
	l.lastBatch.Store(batch)
	if l.empty {
		l.firstRecord.Store(first) // the first batch the log holds
		l.empty = false
	}
	l.lastRecord.Store(last)
	return nil
}

// syncTail makes durable the batch just written to the last segment: in
// the sync ring if it has room, else by an fsync of the segment, after
// which a new lap starts.
func (l *Log) syncTail(batch uint64, frame []byte) error {
	if l.ring.fits(len(frame)) {
		return l.ring.put(batch, frame)
	}
	if err := l.wal.Sync(); err != nil {
		return fmt.Errorf("sync the last segment: %w", err)
	}
	l.ring.restart()
	return nil
}

// Sync fsyncs the last segment, and the directory if segments were made
// since the last sync: with UnsafeNoSync, what Append wrote becomes
// durable (wal synced the earlier segments as it closed them). Without
// it, Append already synced, and Sync costs one more fsync. A failed sync
// poisons the handle, as in Append.
func (l *Log) Sync() error {
	if l.closed {
		return l.errorf("sync: %w", ErrClosed)
	}
	if l.poisoned.Load() {
		if err := l.recover(); err != nil {
			return l.errorf("sync refused, the log is still poisoned: %w", err)
		}
	}
	if err := l.wal.Sync(); err != nil {
		return l.poison(fmt.Errorf("sync: %w", err))
	}
	if l.dirUnsynced {
		if err := SyncDir(l.dir); err != nil {
			return l.poison(fmt.Errorf("sync directory after new segments: %w", err))
		}
		l.dirUnsynced = false
	}
	return nil
}

// FirstIndex returns the record index where the oldest batch held starts
// (the log holds every record from there to LastIndex), or LastIndex()+1
// when it holds no batch (1 for a new log).
func (l *Log) FirstIndex() uint64 { return l.firstRecord.Load() }

// LastIndex returns the record index of the last acknowledged record, 0
// when nothing has ever been written. A failed batch never counts, even
// while the handle is poisoned.
func (l *Log) LastIndex() uint64 { return l.lastRecord.Load() }

// Poisoned reports whether a write failed since the last successful
// recovery. Append recovers a poisoned log first; TruncateFront refuses
// until it has.
func (l *Log) Poisoned() bool { return l.poisoned.Load() }

// Dir returns the directory given to Open.
func (l *Log) Dir() string { return l.dir }

// Close syncs and closes the log, and leaves the clean-close marker that
// tells the next Open that nothing at the end can be a torn write. Closing
// a poisoned log cuts the segment files back to the last acknowledged
// batch, so that the failed batch cannot come back on the next Open, and
// leaves no marker.
func (l *Log) Close() error {
	l.files.Lock()
	defer l.files.Unlock()
	if l.closed {
		return l.errorf("close: %w", ErrClosed)
	}
	l.closed = true
	var errs []error
	if l.wal != nil {
		errs = append(errs, closeWAL(l.wal))
		l.wal = nil
	}
	if l.poisoned.Load() {
		errs = append(errs, restoreFiles(l.dir, l.lastBatch.Load(), l.opts.partition()), l.forgetFailed())
	} else if len(errs) == 0 || errs[0] == nil {
		m := cleanMarker{lastBatch: l.lastBatch.Load(), lastRecord: l.lastRecord.Load(), tailSize: l.tailSize}
		errs = append(errs, writeCleanMarker(l.dir, m))
	}
	errs = append(errs, l.ring.close())
	if err := errors.Join(errs...); err != nil {
		return l.errorf("close: %w", err)
	}
	return nil
}

// errorf prefixes an error with the package and the log's name.
func (l *Log) errorf(format string, args ...any) error {
	return fmt.Errorf("log: %s: "+format, append([]any{logName(l.opts.partition())}, args...)...)
}
