package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
)

// tornTail is what repairTail cut.
type tornTail struct {
	segment         string
	offset, dropped int
	reason          error
}

// dirInfo is a log directory after prepareDir.
type dirInfo struct {
	segs        []segmentFile
	tailSize    int64  // size of the last segment
	lastBatch   uint64 // wal index of the last whole entry; 0 if none
	firstRecord uint64 // record index where the oldest batch starts; lastRecord+1 if none
	empty       bool   // no batch at all
	lastRecord  uint64 // record index of the last record; 0 if none
}

// prepareDir brings dir into the state wal.Open expects: an interrupted
// truncation finished, a torn batch cut off the last segment, the last
// segment and the directory synced. After a clean close (strict) nothing is
// cut: damage at the end is corruption.
func prepareDir(dir string, partition int, logger *slog.Logger, strict bool) (dirInfo, error) {
	var info dirInfo
	segs, err := finishTruncation(dir)
	if err != nil {
		return info, locate(fmt.Errorf("finish interrupted truncation: %w", err), partition)
	}
	info.segs = segs
	if len(segs) > 0 {
		tail := segs[len(segs)-1]
		res, err := repairTail(tail, partition, logger, strict)
		if err != nil {
			return info, err
		}
		info.tailSize = int64(res.end)
		info.lastBatch = tail.index + uint64(res.entries) - 1
		info.lastRecord = res.last
		// An empty tail: the last record is in an earlier segment.
		for i := len(segs) - 2; info.lastRecord == 0 && i >= 0; i-- {
			data, err := readSegment(segs[i].path, nil)
			if err != nil {
				return info, locate(err, partition)
			}
			r, _ := scanEntries(data, segs[i].index, partition, 0, 0, math.MaxUint64, math.MaxUint64, nil)
			if r.bad != nil {
				return info, &CorruptError{Partition: partition, File: segs[i].name(), Batch: segs[i].index + uint64(r.entries), Offset: int64(r.end), Err: r.bad}
			}
			info.lastRecord = r.last
		}
		info.firstRecord, err = segmentFirstIndex(segs[0])
		if err != nil {
			return info, locate(err, partition)
		}
		if c := res.cut; c != nil {
			logger.Warn("log: cut the torn batch at the end of the last segment",
				"segment", c.segment,
				"offset", c.offset,
				"dropped_bytes", c.dropped,
				"last_whole_index", info.lastRecord,
				"reason", c.reason.Error())
		}
	}
	if info.firstRecord == 0 {
		info.firstRecord, info.empty = info.lastRecord+1, true
	}
	if err := SyncDir(dir); err != nil {
		return info, locate(err, partition)
	}
	return info, nil
}

// repairTail cuts a torn batch off the end of the last segment file and
// syncs the file; it returns how far the whole entries go.
//
// A crash while appending can leave the end of the last segment torn: a
// partial batch, zeros (the file size was made durable before its data),
// garbage, or a batch of several pages of which only some reached the
// disk. A batch is one wal entry under one checksum, so any of these fails
// to read. If a whole batch that passes its checksum and comes later in
// index order follows it, the damage is not a torn append but corruption
// of acknowledged batches, and the log refuses to open. Otherwise
// everything from the damage on was never acknowledged (acknowledged
// batches were synced before any later byte was written) and is cut. A bit
// flip in the very last batch cannot be told from a torn write, and is cut
// as well, unless the log was closed cleanly (strict): then nothing was in
// flight, and any damage is corruption.
func repairTail(seg segmentFile, partition int, logger *slog.Logger, strict bool) (scanResult, error) {
	f, err := os.OpenFile(seg.path, os.O_RDWR, 0)
	if err != nil {
		return scanResult{}, locate(err, partition)
	}
	defer f.Close()
	data, err := readFile(f, nil)
	if err != nil {
		return scanResult{}, locate(err, partition)
	}
	res, _ := scanEntries(data, seg.index, partition, 0, 0, math.MaxUint64, math.MaxUint64, nil)
	if res.end < len(data) {
		bad := &CorruptError{
			Partition: partition,
			File:      seg.name(),
			Batch:     seg.index + uint64(res.entries),
			Offset:    int64(res.end),
			Err:       res.bad,
		}
		if strict {
			bad.Err = fmt.Errorf("%w: %w", errAfterClean, res.bad)
			return res, bad
		}
		if q := findFrame(data, res.end+1, res.last); q >= 0 {
			bad.Err = fmt.Errorf("%w, and a whole batch follows at byte %d, so this is not a torn tail", res.bad, q)
			return res, bad
		}
		if err := f.Truncate(int64(res.end)); err != nil {
			return res, locate(err, partition)
		}
		res.cut = &tornTail{segment: seg.name(), offset: res.end, dropped: len(data) - res.end, reason: res.bad}
	}
	if err := f.Sync(); err != nil {
		return res, locate(err, partition)
	}
	return res, nil
}

// locate adds the log's partition (-1: the journal) to an error (nil
// stays nil): to a *CorruptError as a field, to any other as a prefix.
func locate(err error, partition int) error {
	if err == nil {
		return nil
	}
	var ce *CorruptError
	if errors.As(err, &ce) {
		ce.Partition = partition
		return err
	}
	return fmt.Errorf("log: %s: %w", logName(partition), err)
}
