package log

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/tidwall/wal"
)

// Everything offsetd relies on of github.com/tidwall/wal beyond its
// documented API is here, at the version go.mod pins (v1.2.1). Log uses
// wal to append entries and to create and close segment files; it reads,
// checks, repairs and truncates the files itself. What it relies on:
//
//  1. The files. A segment is named %020d of the index of its first entry
//     and holds entries back to back as | uvarint(len) | data | (the
//     Binary format): the log reads them directly (Replay, Open's plan),
//     so a damaged entry is found and named, never skipped.
//  2. Once open, wal writes only to its last segment, and opens older ones
//     only for Read, TruncateFront and TruncateBack, which this package
//     never calls (TestWALUse checks), nor FirstIndex but right after
//     wal.Open. So Log.TruncateFront unlinks older segments behind the
//     open handle, and Replay reads them, without wal noticing.
//  3. When a segment closes (before a write if it is over SegmentSize,
//     after an entry that brings it to SegmentSize) wal fsyncs it and
//     creates the next: nextTail predicts this (TestTailPrediction checks
//     it), so that the sync ring restarts its lap and the directory is
//     synced when a segment is made. With NoSync, Write syncs nothing and
//     Sync fsyncs the last segment.
//  4. wal keeps every segment it created in a list that TruncateFront
//     behind its back never shrinks, and caches segments it closed: the
//     Log calls ClearCache after each cycle and reopens wal every
//     reopenAfterSegments segments.
//  5. Close begins with an fsync and, when that fails, returns with the
//     last segment's file still open: closeWAL closes it through wal's
//     private field.
//  6. wal.Open finishes a truncation a crash interrupted (.TEMP, .START,
//     .END files) and reads an empty last segment (AllowEmpty) as ending
//     at its name's index minus one; readDirState mirrors the former, so
//     that Open's plan judges the files that will really be the segments,
//     and openWAL checks wal's LastIndex against the files.

// reopenAfterSegments is how many segments wal may create before the Log
// reopens it, to drop its memory of segments long removed.
const reopenAfterSegments = 1024

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

// closeWAL closes w and returns what its Close returned. wal's Close begins
// with an fsync of the last segment and, when that fails, returns at once,
// leaving the file open; a device that fails an fsync often fails every
// one after it (a dead disk, a lost network mount), so no later Close
// closes it either. Every handle a failed sync poisons would then keep a
// file descriptor, and a store that retries a failing disk would run out
// of them. So when Close fails, the segment file is closed here, through
// the handle's own field (at the version go.mod pins); no caller uses the
// handle after closeWAL (TestCloseAfterFailedSyncClosesFiles checks that
// no file stays open).
func closeWAL(w *wal.Log) error {
	err := w.Close()
	if err != nil {
		if f := walSegmentFile(w); f != nil {
			f.Close() // a second close of a file wal did close only fails
		}
	}
	return err
}

// walSegmentFile returns the last segment's file that w holds open, or nil
// if w's layout is not the one closeWAL knows.
func walSegmentFile(w *wal.Log) *os.File {
	v := reflect.ValueOf(w).Elem().FieldByName("sfile")
	if !v.IsValid() || v.Type() != reflect.TypeFor[*os.File]() || v.IsNil() {
		return nil
	}
	return (*os.File)(v.UnsafePointer())
}

// dirState is a log directory as wal.Open sees it. wal truncates through
// temporary files (a .TEMP written and synced, renamed to .START or .END,
// older segments removed, then renamed to the plain name) and wal.Open
// finishes a truncation that a crash interrupted. This package no longer
// truncates through wal, but a directory written by an older version may
// hold such files. dirState mirrors that logic of wal v1.2.1 (Log.load), so
// that tail repair and Inspect look at the file that will really be the
// last segment.
type dirState struct {
	segments  []segmentFile // the segments once the truncation is finished, in index order, at their current paths
	remove    []string      // paths that finishing deletes
	renames   [][2]string   // old path, new path
	leftovers []string      // names of .START, .END and .TEMP files
}

// readDirState lists dir without changing it.
func readDirState(dir string) (dirState, error) {
	var st dirState
	des, err := os.ReadDir(dir) // sorted by name, so by index
	if err != nil {
		return st, err
	}
	start, end := -1, -1
	for _, de := range des {
		name := de.Name()
		if de.IsDir() || len(name) < 20 {
			continue
		}
		index, err := strconv.ParseUint(name[:20], 10, 64)
		if err != nil || index == 0 {
			continue
		}
		path := filepath.Join(dir, name)
		switch suffix := name[20:]; {
		case suffix == "":
		case suffix == ".START":
			start = len(st.segments)
		case suffix == ".END":
			if end == -1 {
				end = len(st.segments)
			}
		case strings.HasSuffix(suffix, ".TEMP"):
			// A truncation crashed before its rename: never referenced.
			st.leftovers = append(st.leftovers, name)
			st.remove = append(st.remove, path)
			continue
		default:
			continue
		}
		if len(name) > 20 {
			st.leftovers = append(st.leftovers, name)
		}
		st.segments = append(st.segments, segmentFile{index: index, path: path})
	}
	if start != -1 && end != -1 {
		return st, &CorruptError{File: st.segments[start].name(), Batch: st.segments[start].index, Err: errTruncation}
	}
	if start != -1 {
		// TruncateFront crashed: the START file is the new first segment.
		for _, s := range st.segments[:start] {
			st.remove = append(st.remove, s.path)
		}
		st.segments = st.segments[start:]
		st.rename(dir, 0)
	}
	if end != -1 {
		// TruncateBack crashed: the END file is the new last segment.
		for _, s := range st.segments[end+1:] {
			st.remove = append(st.remove, s.path)
		}
		st.segments = st.segments[:end+1]
		if n := len(st.segments); n > 1 && st.segments[n-2].index == st.segments[n-1].index {
			// The END file replaces the segment of the same name.
			st.segments = append(st.segments[:n-2], st.segments[n-1])
		}
		st.rename(dir, len(st.segments)-1)
	}
	return st, nil
}

func (st *dirState) rename(dir string, i int) {
	s := st.segments[i]
	st.renames = append(st.renames, [2]string{s.path, filepath.Join(dir, segmentName(s.index))})
}

// finishTruncation does what wal.Open would do to an interrupted
// truncation, syncs the directory if that changed anything, and returns the
// segments.
func finishTruncation(dir string) ([]segmentFile, error) {
	st, err := readDirState(dir)
	if err != nil {
		return nil, err
	}
	if len(st.remove) == 0 && len(st.renames) == 0 {
		return st.segments, nil
	}
	for _, p := range st.remove {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	for _, r := range st.renames {
		if err := os.Rename(r[0], r[1]); err != nil {
			return nil, err
		}
	}
	for i := range st.segments {
		st.segments[i].path = filepath.Join(dir, segmentName(st.segments[i].index))
	}
	return st.segments, SyncDir(dir)
}
