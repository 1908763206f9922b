package log

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
)

// Plan is what Open will do to a journal directory, decided from reading
// it alone: Open writes nothing before its plan is made, and nothing at
// all if planning refuses the directory. Inspect reports the same plan,
// so the offline check and Open agree on every directory.
//
// The plan reads every segment: each must start at the wal index where
// the one before it ended, each batch's records must start right after
// the last record of the batch before it (across segment boundaries too),
// the sync ring's copies must equal the segments' and the journal must
// end where a clean close recorded. Only a torn end is repaired: a batch
// that fails its checksum at the end of the last segment with nothing
// whole after it (cut), or batches the ring holds that the last segment
// lost (restored). A whole batch that does not continue the journal is
// corruption wherever it is.
type Plan struct {
	dir     string
	opts    Options
	missing bool // dir does not exist: Open creates an empty journal

	clean    *cleanMarker
	cleanTmp bool // a Close that crashed left CLEAN.tmp, which Open removes
	lap      ringLap
	segs     []segmentFile // as they will be once a truncation is finished, at their current paths
	firsts   []uint64      // the first record index of each segment read; 0 for one with none

	restore bool   // after a crash: cut back to wal index keep, append the lap's batches after it
	keep    uint64 // with restore
	cut     *tornTail

	firstRecord, lastRecord, lastBatch uint64
	rep                                Report
}

// PlanOpen reads the journal in dir and decides what Open would do,
// without changing anything: a damaged journal is an ErrCorrupt error
// naming file and index, as Open's would be. A directory that does not
// exist plans a new journal. opts is copied; bad values are ErrInvalid
// errors naming the field.
func PlanOpen(dir string, opts Options) (*Plan, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory name", ErrInvalid)
	}
	p, err := planJournal(dir, opts, nil)
	if errors.Is(err, fs.ErrNotExist) && p.missing {
		return &Plan{dir: dir, opts: opts, missing: true, firstRecord: 1, rep: Report{FirstIndex: 1}}, nil
	}
	return p, err
}

// FirstIndex is the record index where the oldest batch starts once the
// plan is carried out (LastIndex()+1 if the journal holds none).
func (p *Plan) FirstIndex() uint64 { return p.firstRecord }

// LastIndex is the index of the last record once the plan is carried out.
func (p *Plan) LastIndex() uint64 { return p.lastRecord }

// Report describes the journal as the plan found it; PlanOpen reads the
// batches' headers only, so Records is 0 (Inspect counts them).
func (p *Plan) Report() Report { return p.rep }

// Replay calls fn for every record the journal holds once the plan is
// carried out, from index from on, in order, without changing anything:
// the records of the segments up to the end the plan keeps, then those the
// plan restores from the sync ring. Payloads stay valid after fn returns,
// as with Log.Replay. An error from fn stops it and is returned as is.
func (p *Plan) Replay(from uint64, fn func(index uint64, e Entry) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil replay function", ErrInvalid)
	}
	if p.missing || from > p.lastRecord {
		return nil
	}
	// Start at the last segment whose first record is at or before from.
	skip := 0
	for i, first := range p.firsts {
		if first != 0 && first <= from {
			skip = i
		}
	}
	_, err := p.scanFrom(skip, from, fn)
	return err
}

// planJournal reads dir and makes the plan, calling fn (if not nil) for
// every record the journal holds once the plan is carried out. With dir
// missing it returns a plan marked missing and an error wrapping
// fs.ErrNotExist.
func planJournal(dir string, opts Options, fn func(index uint64, e Entry) error) (*Plan, error) {
	p := &Plan{dir: dir, opts: opts}
	if _, err := os.Stat(dir); err != nil {
		p.missing = errors.Is(err, fs.ErrNotExist)
		return p, p.errorf("%w", err)
	}
	clean, err := readCleanMarker(dir)
	if err != nil {
		return p, locate(err, opts.partition())
	}
	p.clean = clean
	p.rep.Clean = clean != nil
	if _, err := os.Stat(filepath.Join(dir, cleanName+".tmp")); err == nil {
		p.cleanTmp = true
	}
	st, err := readDirState(dir)
	p.rep.Leftovers = st.leftovers
	if err != nil {
		return p, locate(err, opts.partition())
	}
	p.segs = st.segments
	if data, err := os.ReadFile(filepath.Join(dir, ringName)); err == nil {
		p.lap = readLap(data)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return p, p.errorf("%w", err)
	}
	if err := lapPastClean(p.lap, clean, opts.partition()); err != nil {
		return p, err
	}
	if clean == nil {
		// After a crash, the batches of the sync ring's lap past the whole
		// batches of the segments replace what follows them.
		keep, restore, err := planRestore(p.segs, p.lap, opts.partition())
		if err != nil {
			return p, err
		}
		p.restore, p.keep = restore, keep
	}
	sc, err := p.scan(fn)
	p.rep = sc.rep
	if err != nil {
		return p, err
	}
	p.cut, p.firsts = sc.cut, sc.firsts
	p.firstRecord, p.lastRecord, p.lastBatch = sc.rep.FirstIndex, sc.rep.LastIndex, sc.lastBatch
	return p, nil
}

// scanned is what a scan of the journal found.
type scanned struct {
	rep       Report
	cut       *tornTail // what Open cuts, if anything
	lastBatch uint64    // wal index of the last batch kept
	firsts    []uint64  // the first record index of each segment read; 0 for one with none
}

// scan reads the journal as the plan will leave it, checking every batch
// and its continuity, and calls fn (if not nil) for every record.
func (p *Plan) scan(fn func(index uint64, e Entry) error) (scanned, error) {
	return p.scanFrom(0, 0, fn)
}

// scanFrom is scan from segment skip on (Replay's, once the plan's own
// scan has checked the segments before it), handing fn the records from
// index from on.
func (p *Plan) scanFrom(skip int, from uint64, fn func(index uint64, e Entry) error) (scanned, error) {
	part := p.opts.partition()
	rep := Report{Clean: p.clean != nil, Leftovers: p.rep.Leftovers, Segments: len(p.segs)}
	keep := uint64(math.MaxUint64)
	if p.restore {
		keep = p.keep
	}
	count := func(index uint64, e Entry) error {
		rep.Records++
		return fn(index, e)
	}
	// scanSeg scans one segment's bytes: all of each batch for fn, the
	// batches' headers only without one (Open's plan, whose Replay reads
	// the records before anything is written), but for the last segment,
	// whose end Open repairs by what the plan found there.
	scanSeg := func(data []byte, start, prevLast, through uint64, tail bool) (scanResult, error) {
		if fn == nil && !tail {
			return scanHeaders(data, start, part, p.opts.journalTag(), prevLast, through), nil
		}
		cb := count
		if fn == nil {
			cb = nil
		}
		return scanEntries(data, start, part, p.opts.journalTag(), prevLast, from, through, cb)
	}
	var buf []byte // reused without fn, whose records alias nothing
	next := uint64(1)
	if len(p.segs) > 0 {
		next = p.segs[skip].index
	}
	var prevLast uint64
	tagged := false    // a segment before held a tagged batch
	var tailSize int64 // of the last segment kept
	var cut *tornTail
	var firsts []uint64
	for i, s := range p.segs {
		if i < skip {
			continue
		}
		if p.restore && s.index > keep+1 {
			rep.Segments = i // Open removes the rest before it restores the ring's batches
			break
		}
		tail := i == len(p.segs)-1 || (p.restore && s.index == keep+1)
		if s.index != next {
			return scanned{rep: rep}, &CorruptError{Partition: part, File: s.name(), Batch: next, Err: errSegmentGap}
		}
		data, err := readSegment(s.path, buf)
		if err != nil {
			return scanned{rep: rep}, locate(err, part)
		}
		if fn == nil {
			buf = data
		}
		rep.Bytes += int64(len(data))
		res, err := scanSeg(data, s.index, prevLast, keep, tail)
		if tagged && res.untaggedFirst && p.opts.journalTag() != 0 {
			return scanned{rep: rep}, &CorruptError{Partition: part, File: s.name(), Batch: s.index, Err: errUntaggedBatch}
		}
		tagged = tagged || res.tagged
		firsts = append(firsts, res.first)
		rep.Batches += res.entries
		next += uint64(res.entries)
		if res.first != 0 && rep.FirstIndex == 0 {
			rep.FirstIndex = res.first
		}
		if res.last != 0 {
			prevLast = res.last
		}
		if err != nil {
			return scanned{rep: rep}, err
		}
		tailSize = int64(res.end)
		switch {
		case p.restore && res.end < len(data):
			// Open cuts what follows keep, whole or not.
			cut = &tornTail{segment: s.name(), offset: res.end, dropped: len(data) - res.end, reason: errRingRestores}
		case res.bad != nil:
			if why := p.notTorn(tail, data, res, prevLast); why != nil {
				return scanned{rep: rep}, &CorruptError{Partition: part, File: s.name(), Batch: next, Offset: int64(res.end), Err: why}
			}
			cut = &tornTail{segment: s.name(), offset: res.end, dropped: len(data) - res.end, reason: res.bad}
		}
		if res.entries == 0 && !tail {
			return scanned{rep: rep}, &CorruptError{Partition: part, File: s.name(), Batch: s.index, Err: errSegmentEmpty}
		}
	}
	if p.restore {
		res, err := scanSeg(p.lap.entries(keep+1), keep+1, prevLast, math.MaxUint64, true)
		if err != nil {
			return scanned{rep: rep}, err
		}
		if tagged && res.untaggedFirst && p.opts.journalTag() != 0 {
			return scanned{rep: rep}, &CorruptError{Partition: part, File: ringName, Batch: keep + 1, Err: errUntaggedBatch}
		}
		if res.bad != nil {
			// planRestore read the lap without the journal's tag: a lap
			// of another journal that continues the segments exactly
			// stops here, and Open would restore it whole.
			return scanned{rep: rep}, &CorruptError{Partition: part, File: ringName, Batch: keep + 1 + uint64(res.entries), Err: res.bad}
		}
		rep.Batches += res.entries
		rep.RingBatches = res.entries
		next = keep + 1 + uint64(res.entries)
		if res.first != 0 && rep.FirstIndex == 0 {
			rep.FirstIndex = res.first
		}
		if res.last != 0 {
			prevLast = res.last
		}
	}
	rep.LastIndex = prevLast
	if rep.FirstIndex == 0 {
		rep.FirstIndex = prevLast + 1
	}
	if len(p.segs) == 0 && !p.restore {
		rep.FirstIndex = 1 // what wal.Open creates
	}
	if cut != nil {
		rep.TornTailBytes, rep.TornTailSegment, rep.TornTailOffset = int64(cut.dropped), cut.segment, int64(cut.offset)
	}
	if c := p.clean; c != nil && (c.lastRecord != rep.LastIndex || c.lastBatch != next-1 || c.tailSize != tailSize) {
		return scanned{rep: rep}, &CorruptError{Partition: part, File: cleanName, Record: rep.LastIndex,
			Err: fmt.Errorf("%w: recorded last index %d (entry %d, tail %d bytes), found %d (entry %d, tail %d bytes)",
				errCleanDiffers, c.lastRecord, c.lastBatch, c.tailSize, rep.LastIndex, next-1, tailSize)}
	}
	return scanned{rep: rep, cut: cut, lastBatch: next - 1, firsts: firsts}, nil
}

// notTorn returns why damage that stopped a scan of segment data (res)
// is not a torn end that Open may cut, or nil if it is one. Only the last
// segment, after a crash, can be torn, and only by bytes that fail to
// read: a whole frame whose checksum passes but which does not continue
// the journal was written so, and a whole batch after the damage that
// continues the journal was acknowledged.
func (p *Plan) notTorn(tail bool, data []byte, res scanResult, prevLast uint64) error {
	switch {
	case !tail:
		return res.bad
	case p.clean != nil:
		return fmt.Errorf("%w: %w", errAfterClean, res.bad)
	case !torn(res.bad):
		return res.bad
	}
	if q := findFrame(data, res.end+1, prevLast); q >= 0 {
		return fmt.Errorf("%w, and a whole batch follows at byte %d, so this is not a torn tail", res.bad, q)
	}
	return nil
}

// torn reports whether why, the reason a scan stopped, can be a write cut
// short or pages lost: bytes that do not read as a whole frame. A frame
// whose checksum passes was written whole, so its content is no torn
// write.
func torn(why error) bool {
	switch why {
	case errEntryLength, errEntryShort, errEntryPastEOF, errFrameShort, errFrameCRC:
		return true
	}
	return false
}

func (p *Plan) errorf(format string, args ...any) error {
	return fmt.Errorf("log: %s: "+format, append([]any{logName(p.opts.partition())}, args...)...)
}
