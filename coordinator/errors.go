package coordinator

import (
	"errors"
	"fmt"

	"github.com/offsetd/offsetd/log"
)

// Errors returned by the coordinator, checkable with errors.Is. They are
// wrapped with the offending field, partition or location.
var (
	// ErrInvalid reports bad input; nothing was written.
	ErrInvalid = errors.New("coordinator: invalid argument")
	// ErrClosed reports a call on a closed Coordinator.
	ErrClosed = errors.New("coordinator: closed")
	// ErrCorrupt reports damage in the data directory that offsetd refuses
	// to replay; it is the log's corruption error.
	ErrCorrupt = log.ErrCorrupt
	// ErrPartitionMismatch reports a data directory created with another
	// partition count.
	ErrPartitionMismatch = errors.New("coordinator: partition count mismatch")
	// ErrHashMismatch reports a data directory whose records were placed by
	// another partition hash than this build's.
	ErrHashMismatch = errors.New("coordinator: partition hash mismatch")
	// ErrFormat reports a data directory or meta file in a format this
	// build does not read (written by another version of offsetd).
	ErrFormat = errors.New("coordinator: unsupported data format")
	// ErrNotFound reports a group, offset or static topic that does not exist.
	ErrNotFound = errors.New("coordinator: not found")
	// ErrLoading reports a request for a partition that is still loading
	// (its snapshot, then the journal). Retry later.
	ErrLoading = errors.New("coordinator: partition loading")
	// ErrWriteFailed reports a commit whose journal write or fsync failed: it
	// was not acknowledged and will not appear. The journal is repaired
	// before it takes new work; retry later.
	ErrWriteFailed = errors.New("coordinator: write failed")
	// ErrStaleGeneration reports a commit whose consumer-group generation is
	// lower than one already seen for the group: a member from before a
	// rebalance must not overwrite newer progress.
	ErrStaleGeneration = errors.New("coordinator: stale generation")
	// ErrNotDataDir reports a directory that holds files but is no offsetd
	// data directory (no meta file, journal or snapshots): Open refuses to
	// write into it.
	ErrNotDataDir = errors.New("coordinator: not an offsetd data directory")
	// errFormat1 reports a directory of format 1 to Check, which does not
	// convert it.
	errFormat1 = fmt.Errorf("%w: format 1", ErrFormat)
	// ErrLocked reports a data directory already opened by another process.
	ErrLocked = errors.New("coordinator: data directory in use")
)
