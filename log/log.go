package log

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/tidwall/wal"
)

// Options configures one partition's log.
type Options struct {
	// SegmentSize is the target size of a segment file in bytes; a segment
	// is closed once it reaches it, so it can exceed it by one entry.
	// Default 4 MiB. Memory per partition is about 2 × SegmentSize: the
	// tail segment lives in memory (wal keeps it there), and Replay holds
	// one segment at a time. Keep it a few MB.
	SegmentSize int

	// UnsafeNoSync skips the syncs of Append, and the sync ring: an
	// acknowledged entry can be lost to a crash of the machine. Open,
	// recovery and TruncateFront still sync. Open still restores from a
	// sync ring that a run without it left, and then clears it.
	UnsafeNoSync bool

	// Partition names the log in errors and log messages, and is the
	// partition of the records of a format-1 log (one partition's log, as
	// the previous release wrote them), which carry none of their own. A
	// journal shared by every partition leaves it 0.
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

// reopenAfterSegments is how many segments wal may create before the Log
// reopens it, to drop its memory of segments long removed.
const reopenAfterSegments = 1024

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
// Invariant: nothing in this package calls wal's Read, TruncateFront or
// TruncateBack (TestWALUse checks), nor asks its FirstIndex but right after
// wal.Open. TruncateFront removes segment files behind the open wal handle,
// which is safe only because, without those calls, wal touches nothing but
// its last segment.
type Log struct {
	dir    string
	opts   Options
	logger *slog.Logger

	wal *wal.Log // nil after Close, and while poisoned
	buf []byte   // the frame being written
	// ring makes the batches of the last segment durable (see ring.go);
	// nil with UnsafeNoSync.
	ring *ring

	first     atomic.Uint64 // record index of the first record held
	last      atomic.Uint64 // last record index durably appended: a failed batch never counts
	lastBatch atomic.Uint64 // wal index of the last entry durably appended
	poisoned  atomic.Bool
	empty     bool // the log holds no batch
	cycled    int  // segments wal created since it was opened
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

// Open carries out the plan and returns the open log: it finishes any
// truncation that a crash interrupted, restores from the sync ring the
// batches the last segment lost, cuts a torn batch off the end of the
// last segment (logging what it dropped and restored), syncs, and removes
// the clean-close marker. Nothing may change the directory between
// PlanOpen and Open (its user holds the data directory's lock); Open
// fails if the journal it opens does not end where the plan said.
func (p *Plan) Open() (*Log, error) {
	dir, opts := p.dir, p.opts
	l := &Log{dir: dir, opts: opts, logger: opts.Logger.With("partition", opts.Partition)}
	if err := MakeDir(dir, SyncDir); err != nil {
		return nil, l.errorf("open: %w", err)
	}
	if p.cleanTmp {
		// A Close that crashed: not clean.
		if err := os.Remove(filepath.Join(dir, cleanName+".tmp")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, l.errorf("open: %w", err)
		}
	}
	clean := p.clean
	// With UnsafeNoSync the ring is read, if a run with syncs left one,
	// and then cleared: such a log keeps no lap.
	var err error
	if _, serr := os.Stat(filepath.Join(dir, ringName)); !opts.UnsafeNoSync || serr == nil {
		size := opts.syncRingSize()
		if opts.UnsafeNoSync {
			size = 0
		}
		if l.ring, _, err = openRing(dir, size); err != nil {
			return nil, l.errorf("open: %w", err)
		}
	}
	err = l.openRestoring(clean, p)
	if err == nil && (l.last.Load() != p.last || l.lastBatch.Load() != p.lastBatch) {
		closeWAL(l.wal)
		err = l.errorf("open: the journal ends at index %d (entry %d), planned %d (entry %d): the directory changed since it was planned",
			l.last.Load(), l.lastBatch.Load(), p.last, p.lastBatch)
	}
	if err == nil && opts.UnsafeNoSync && l.ring != nil {
		if err = l.ring.clear(); err != nil {
			closeWAL(l.wal)
			err = l.errorf("open: %w", err)
		}
		l.ring.close()
		l.ring = nil
	}
	if err != nil {
		l.ring.close()
		return nil, err
	}
	if clean != nil {
		// From here on a crash is not a clean close.
		if err := removeCleanMarker(dir); err != nil {
			closeWAL(l.wal)
			l.ring.close()
			return nil, l.errorf("open: %w", err)
		}
	}
	return l, nil
}

// openRestoring opens wal (openWAL) and, after a crash, appends what the
// sync ring's lap holds beyond the whole batches of the segments, after
// cutting them back to the last of those, as the plan says. After a clean
// close the segments hold everything the lap does.
func (l *Log) openRestoring(clean *cleanMarker, p *Plan) error {
	if clean != nil {
		return l.openWAL(clean)
	}
	restore, keep, lap := p.restore, p.keep, p.lap
	if restore {
		if _, err := finishTruncation(l.dir); err != nil {
			return locate(fmt.Errorf("finish interrupted truncation: %w", err), l.opts.Partition)
		}
		if err := cutBack(l.dir, keep, l.opts.Partition); err != nil {
			return err
		}
	}
	if err := l.openWAL(nil); err != nil {
		return err
	}
	if !restore {
		return nil
	}
	if got := l.lastBatch.Load(); got != keep {
		closeWAL(l.wal)
		return &CorruptError{Partition: l.opts.Partition, Segment: ringName, Index: got + 1, Err: errRingGap}
	}
	for i, frame := range lap.frames {
		batch := lap.first + uint64(i)
		if batch <= keep {
			continue
		}
		f, err := decodeFrame(frame)
		var first, last uint64
		if err == nil {
			first, last, err = frameRecords(f, batch, l.opts.Partition, nil)
		}
		if err == nil {
			err = l.appendFrame(batch, frame, first, last, false)
		}
		if err != nil {
			if l.wal != nil {
				closeWAL(l.wal)
			}
			return l.errorf("open: restore batch %d from the sync ring: %w", batch, err)
		}
	}
	if err := errors.Join(l.wal.Sync(), SyncDir(l.dir)); err != nil {
		closeWAL(l.wal)
		return l.errorf("open: sync the batches restored from the sync ring: %w", err)
	}
	l.logger.Warn("log: restored batches from the sync ring that the last segment had lost",
		"from_batch", keep+1, "to_batch", lap.lastBatch(), "last_index", l.last.Load())
	return nil
}

// openWAL prepares the directory (finished truncations, repaired tail,
// everything synced) and opens wal on it. clean, if not nil, is what the
// last clean close recorded: the directory must match it exactly.
func (l *Log) openWAL(clean *cleanMarker) error {
	info, err := prepareDir(l.dir, l.opts.Partition, l.logger, clean != nil)
	if err != nil {
		return err
	}
	if clean != nil && (clean.lastBatch != info.lastBatch || clean.last != info.last || clean.tailSize != info.tailSize) {
		return &CorruptError{Partition: l.opts.Partition, Segment: cleanName, Index: info.last,
			Err: fmt.Errorf("%w: recorded last index %d (entry %d, tail %d bytes), found %d (entry %d, tail %d bytes)",
				errCleanDiffers, clean.last, clean.lastBatch, clean.tailSize, info.last, info.lastBatch, info.tailSize)}
	}
	w, err := wal.Open(l.dir, l.walOptions())
	if err != nil {
		return l.errorf("open wal: %w", err)
	}
	if len(info.segs) == 0 {
		// wal created the first segment file.
		if err := SyncDir(l.dir); err != nil {
			closeWAL(w)
			return l.errorf("open: %w", err)
		}
		l.tailStart.Store(1)
		l.tailSize = 0
	} else {
		l.tailStart.Store(info.segs[len(info.segs)-1].index)
		l.tailSize = info.tailSize
	}
	lastBatch, err := w.LastIndex()
	if err == nil && lastBatch != info.lastBatch {
		err = fmt.Errorf("wal reports last entry %d, the files end at %d", lastBatch, info.lastBatch)
	}
	if err != nil {
		closeWAL(w)
		return l.errorf("open wal: %w", err)
	}
	l.wal = w
	l.lastBatch.Store(info.lastBatch)
	l.last.Store(info.last)
	l.first.Store(info.first)
	l.empty = info.empty
	return nil
}

// walOptions returns a fresh copy each time, since wal.Open writes to it.
func (l *Log) walOptions() *wal.Options {
	return &wal.Options{
		NoSync:           true, // Append syncs through the ring; wal still syncs each segment it closes
		SegmentSize:      l.opts.SegmentSize,
		LogFormat:        wal.Binary,
		SegmentCacheSize: 1,    // we never read through wal
		NoCopy:           true, // nor copy
		AllowEmpty:       true, // the only segment left may be empty: just cycled, repaired or cut back
		DirPerms:         0o750,
		FilePerms:        0o640,
	}
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
	if next <= l.last.Load()+1 {
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
	return l.write(l.last.Load()+1, entries)
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
		l.first.Store(first) // the first batch the log holds
		l.empty = false
	}
	l.last.Store(last)
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

// nextTail predicts where wal's last segment will be after writing one
// entry of frame size n at wal index batch, and whether it creates segment
// files. It mirrors writeBatch and cycle of wal v1.2.1: a segment is closed
// before a write if it is over SegmentSize, and after an entry that brings
// it to SegmentSize. TestTailPrediction checks it against the directory.
func (l *Log) nextTail(n int, batch uint64) (start uint64, size int64, created bool) {
	start, size = l.tailStart.Load(), l.tailSize
	limit := int64(l.opts.SegmentSize)
	if size > limit {
		start, size, created = batch, 0, true
	}
	size += int64(uvarintLen(uint64(n)) + n)
	if size >= limit {
		start, size, created = batch+1, 0, true
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

// FirstIndex returns the record index where the oldest batch held starts
// (the log holds every record from there to LastIndex), or LastIndex()+1
// when it holds no batch (1 for a new log).
func (l *Log) FirstIndex() uint64 { return l.first.Load() }

// LastIndex returns the record index of the last acknowledged record, 0
// when nothing has ever been written. A failed batch never counts, even
// while the handle is poisoned.
func (l *Log) LastIndex() uint64 { return l.last.Load() }

// Poisoned reports whether a write failed since the last successful
// recovery. Append recovers a poisoned log first; TruncateFront refuses
// until it has.
func (l *Log) Poisoned() bool { return l.poisoned.Load() }

// Dir returns the directory given to Open.
func (l *Log) Dir() string { return l.dir }

// TruncateFront removes the whole segments all of whose records come
// before record index index, but never the last segment. It is meant for
// after snapshots covering index-1. The records from the start of the
// segment holding index stay, so FirstIndex becomes the first index of the
// oldest remaining segment, which may be below index. index must be in
// [1, LastIndex+1]; below FirstIndex it removes nothing. It writes no data:
// it lists the directory, unlinks the files, oldest first, and syncs the
// directory once if it removed any.
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
	if index == 0 || index > l.last.Load()+1 {
		return fmt.Errorf("%w: truncate front to %d, past the next index %d", ErrInvalid, index, l.last.Load()+1)
	}
	if index <= l.first.Load() {
		return nil // nothing before it is held
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
	segs := st.segments
	n, firsts, err := l.segmentsBefore(segs, index)
	if err != nil {
		return l.errorf("truncate front to %d: %w", index, err)
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
			if i > 0 {
				l.first.Store(firsts[i-1]) // segs[:i] are gone
			}
			return l.errorf("truncate front to %d: remove segment %d of %d: %w", index, i+1, n, err)
		}
	}
	l.first.Store(firsts[n-1])
	if err := SyncDir(l.dir); err != nil {
		return l.errorf("truncate front to %d: sync directory: %w", index, err)
	}
	return nil
}

// segmentsBefore returns how many segments, oldest first, hold only
// records below index, and the first record index of the segment after
// each of them. It never counts the last segment, which wal writes to,
// nor the last one holding a batch, which holds the last index.
func (l *Log) segmentsBefore(segs []segmentFile, index uint64) (int, []uint64, error) {
	n := 0
	var firsts []uint64
	for n+1 < len(segs) && segs[n].index < l.tailStart.Load() {
		next, err := segmentFirstIndex(segs[n+1])
		if err != nil {
			return 0, nil, err
		}
		if next == 0 || next > index {
			// An empty segment (only the tail can be one) must not be left
			// alone: the last index would be lost with the segment before
			// it, and a reopen would give indexes again.
			break
		}
		firsts = append(firsts, next)
		n++
	}
	return n, firsts, nil
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	First uint64 // record index where its first batch starts; 0 if it holds none
	Bytes int64
}

// Segments describes the segment files, oldest first. Like TruncateFront,
// it may run beside the owner.
func (l *Log) Segments() ([]SegmentInfo, error) {
	l.files.Lock()
	defer l.files.Unlock()
	if l.closed {
		return nil, l.errorf("segments: %w", ErrClosed)
	}
	st, err := readDirState(l.dir)
	if err != nil {
		return nil, l.errorf("segments: %w", err)
	}
	out := make([]SegmentInfo, len(st.segments))
	for i, s := range st.segments {
		fi, err := os.Stat(s.path)
		if err != nil {
			return nil, l.errorf("segments: %w", err)
		}
		first, err := segmentFirstIndex(s)
		if err != nil {
			return nil, l.errorf("segments: %w", err)
		}
		out[i] = SegmentInfo{First: first, Bytes: fi.Size()}
	}
	return out, nil
}

// SegmentsBefore returns how many segment files TruncateFront(index) would
// remove. Like TruncateFront, it may run beside the owner.
func (l *Log) SegmentsBefore(index uint64) (int, error) {
	l.files.Lock()
	defer l.files.Unlock()
	if l.closed {
		return 0, l.errorf("segments: %w", ErrClosed)
	}
	st, err := readDirState(l.dir)
	if err != nil {
		return 0, l.errorf("segments: %w", err)
	}
	n, _, err := l.segmentsBefore(st.segments, index)
	return n, err
}

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
		errs = append(errs, restoreFiles(l.dir, l.lastBatch.Load(), l.opts.Partition), l.forgetFailed())
	} else if len(errs) == 0 || errs[0] == nil {
		m := cleanMarker{lastBatch: l.lastBatch.Load(), last: l.last.Load(), tailSize: l.tailSize}
		errs = append(errs, writeCleanMarker(l.dir, m))
	}
	errs = append(errs, l.ring.close())
	if err := errors.Join(errs...); err != nil {
		return l.errorf("close: %w", err)
	}
	return nil
}

// errorf prefixes an error with the package and partition.
func (l *Log) errorf(format string, args ...any) error {
	return fmt.Errorf("log: partition %d: "+format, append([]any{l.opts.Partition}, args...)...)
}
