package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
)

// prepareDir brings dir into the state wal.Open expects: an interrupted
// truncation finished, a torn tail cut off the last segment, the last
// segment and the directory synced. It returns the segments and the size
// of the last one.
func prepareDir(dir string, partition int, logger *slog.Logger) ([]segmentFile, int64, error) {
	segs, err := finishTruncation(dir)
	if err != nil {
		return nil, 0, locate(fmt.Errorf("finish interrupted truncation: %w", err), partition)
	}
	var size int64
	if len(segs) > 0 {
		size, err = repairTail(segs[len(segs)-1], partition, logger)
		if err != nil {
			return nil, 0, err
		}
	}
	if err := syncDir(dir); err != nil {
		return nil, 0, locate(err, partition)
	}
	return segs, size, nil
}

// repairTail cuts a torn tail off the last segment file and syncs the
// file; it returns the size of the file.
//
// A crash while appending can leave the end of the last segment torn: a
// partial entry, zeros (the file size was made durable before its data),
// garbage. The first entry that does not read cleanly starts the damage.
// If a whole frame that passes its checksum follows it somewhere, the
// damage is not a torn append but corruption of acknowledged entries, and
// the log refuses to open. Otherwise everything from the damage on was
// never acknowledged (acknowledged entries were synced before any later
// byte was written) and is cut. A bit flip in the very last entry cannot
// be told from a torn write, and is cut as well.
func repairTail(seg segmentFile, partition int, logger *slog.Logger) (int64, error) {
	f, err := os.OpenFile(seg.path, os.O_RDWR, 0)
	if err != nil {
		return 0, locate(err, partition)
	}
	defer f.Close()
	data, err := readFile(f, nil)
	if err != nil {
		return 0, locate(err, partition)
	}
	res, _ := scanEntries(data, seg.index, 0, math.MaxUint64, nil)
	if res.end < len(data) {
		if q := findFrame(data, res.end+1); q >= 0 {
			return 0, &CorruptError{
				Partition: partition,
				Segment:   seg.name(),
				Index:     seg.index + uint64(res.entries),
				Offset:    int64(res.end),
				Err:       fmt.Errorf("%w, and a whole entry follows at byte %d, so this is not a torn tail", res.bad, q),
			}
		}
		if err := f.Truncate(int64(res.end)); err != nil {
			return 0, locate(err, partition)
		}
		logger.Warn("log: cut the torn tail of the last segment",
			"segment", seg.name(),
			"offset", res.end,
			"dropped_bytes", len(data)-res.end,
			"last_whole_index", seg.index+uint64(res.entries)-1,
			"reason", res.bad.Error())
	}
	if err := f.Sync(); err != nil {
		return 0, locate(err, partition)
	}
	return int64(res.end), nil
}

// locate adds the partition to an error (nil stays nil): to a
// *CorruptError as a field, to any other as a prefix.
func locate(err error, partition int) error {
	if err == nil {
		return nil
	}
	var ce *CorruptError
	if errors.As(err, &ce) {
		ce.Partition = partition
		return err
	}
	return fmt.Errorf("log: partition %d: %w", partition, err)
}
