package log

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrCorrupt marks damage found before the tail of the log: a frame
	// that fails its checksum, an unreadable entry, a missing or empty
	// segment. Errors carrying it are *CorruptError values naming the
	// partition, segment file and index; test for it with errors.Is.
	ErrCorrupt = errors.New("log: corrupt")

	// ErrClosed is returned by every method of a closed Log.
	ErrClosed = errors.New("log: closed")

	// ErrInvalid marks a bad argument: an option out of range, an entry of
	// type 0, an empty batch, an index outside the log.
	ErrInvalid = errors.New("log: invalid argument")
)

// corruption says why bytes on disk were rejected. Every corruption is
// ErrCorrupt under errors.Is, and is comparable, so tests can name the
// exact reason.
type corruption string

func (c corruption) Error() string { return string(c) }

// Is makes every corruption match ErrCorrupt.
func (c corruption) Is(target error) bool { return target == ErrCorrupt }

const (
	errFrameShort    corruption = "frame shorter than 6 bytes"
	errFrameCRC      corruption = "frame checksum mismatch"
	errFrameVersion  corruption = "unknown frame version"
	errFrameType     corruption = "frame of type 0"
	errEntryLength   corruption = "unreadable entry length"
	errEntryShort    corruption = "entry length below the 6-byte minimum frame"
	errEntryPastEOF  corruption = "entry runs past the end of the segment"
	errSegmentGap    corruption = "segment does not start where the previous one ended"
	errSegmentEmpty  corruption = "empty segment before the last one"
	errMissing       corruption = "segments end before the last index of the log"
	errTruncation    corruption = "both .START and .END files from interrupted truncations"
	errSnapHeader    corruption = "snapshot header missing or damaged"
	errSnapShort     corruption = "snapshot cut short"
	errSnapOwner     corruption = "snapshot of another owner"
	errSnapFooter    corruption = "snapshot footer damaged or record count wrong"
	errBatchBody     corruption = "batch records do not fill the batch, though its checksum passed"
	errIndexOrder    corruption = "batch does not continue the record indexes of the batch before it"
	errIndexGap      corruption = "batch skips record indexes after the batch before it"
	errForeignBatch  corruption = "batch of another journal (its tag is not this journal's)"
	errUntaggedBatch corruption = "batch without a journal tag after tagged ones: of another journal"
	errRingRestores  corruption = "the sync ring holds the batches from here on"
	errAfterClean    corruption = "damage at the end of a journal that was closed cleanly"
	errCleanDiffers  corruption = "the journal does not end where its clean close recorded"
	errCleanMarker   corruption = "clean-close marker damaged"
	errRingGap       corruption = "the sync ring starts after the last whole batch of the segments"
	errPastRing      corruption = "a whole batch follows damage in the last segment, past what the sync ring holds"
	errRingBatch     corruption = "a batch in the sync ring does not read, or does not follow the segments, though its checksum passed"
	errRingDiffers   corruption = "the sync ring's copy of a batch differs from the segment's"
	errRingStray     corruption = "the sync ring's lap ends at a damaged record, and records of the lap follow it"
)

// CorruptError locates damage in a log directory. It matches ErrCorrupt
// under errors.Is, and its Err field says what was wrong. A journal has
// two index spaces, named apart: Batch is the wal index of an entry (one
// batch: what segment files are named by), Record the index of a record,
// the index users see.
type CorruptError struct {
	// Partition is the partition of a log of format 1 or of snapshots;
	// -1 for the journal, which every partition shares.
	Partition int
	File      string // base name of the file holding the damage: a segment, RING, CLEAN or a snapshot
	Batch     uint64 // wal index of the batch that could not be read; 0 if not a batch's
	Record    uint64 // record index the damage concerns; 0 if not known
	Offset    int64  // byte offset of the damage in File
	Err       error  // the reason
}

// Error names the journal or partition, the file, the batch or record
// index, and the byte offset.
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("log: corrupt: ")
	if e.Partition >= 0 {
		fmt.Fprintf(&b, "partition %d", e.Partition)
	} else {
		b.WriteString("journal")
	}
	if isSegmentName(e.File) {
		fmt.Fprintf(&b, ", segment %s", e.File)
	} else {
		fmt.Fprintf(&b, ", file %s", e.File)
	}
	if e.Batch != 0 {
		fmt.Fprintf(&b, ", batch %d", e.Batch)
	}
	if e.Record != 0 {
		fmt.Fprintf(&b, ", record index %d", e.Record)
	}
	if e.Offset != 0 || e.Batch != 0 {
		fmt.Fprintf(&b, " (byte %d)", e.Offset)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns the reason.
func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes every CorruptError match ErrCorrupt, whatever its reason.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// isSegmentName reports whether name is that of a segment file.
func isSegmentName(name string) bool {
	if len(name) != len(segmentName(0)) {
		return false
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
