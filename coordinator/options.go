package coordinator

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/offsetd/offsetd/log"
	"github.com/offsetd/offsetd/partitioner"
)

// Limits on a single request. They bound the size of one log entry.
const (
	// MaxNameBytes bounds group, topic and scope names.
	MaxNameBytes = 255
	// MaxOffsetsPerCommit bounds the offsets of one Commit call.
	MaxOffsetsPerCommit = 10000
)

// Settings that switch something off. A zero field always means its
// default, so switching off takes a value of its own.
const (
	// KeepForever as Options.Retention keeps groups without commits forever.
	KeepForever time.Duration = -1
	// NoSnapshots as Options.SnapshotBytes turns snapshots off.
	NoSnapshots int64 = -1
	// NoMetadata as Options.MaxMetadataBytes refuses any offset metadata.
	NoMetadata = -1
)

// Options configures a Coordinator. Every zero field means its default, the
// value in DefaultOptions (as the zero Options does); the few settings that
// can be switched off take a named negative value for it. Open copies the
// options and reports bad values by name.
type Options struct {
	// Partitions is the number of internal partitions, fixed when the data
	// directory is created; opening it with another count fails with
	// ErrPartitionMismatch. Zero means the count the directory was created
	// with, or 16 for a new directory.
	Partitions int
	// SegmentSize is the target size of a journal segment file in bytes.
	// The journal keeps its last segment in memory, and drops old ones
	// whole, so segments that are small beside the live state keep the
	// disk close to it; its sync ring (see package log) is twice this
	// size, from 64 KiB to 64 MiB. Zero means 256 KiB; it must be at
	// least 4096.
	SegmentSize int
	// MaxMetadataBytes bounds the metadata string of one offset. Zero means
	// 4096; NoMetadata (any negative value) refuses every non-empty
	// metadata string.
	MaxMetadataBytes int
	// UnsafeNoSync acknowledges commits without fsync. A crash of the
	// machine (not only of the process) can then lose acknowledged commits.
	// Zero (false) syncs every batch.
	UnsafeNoSync bool
	// LoadInBackground makes Open return before the partitions have replayed
	// their logs. Until a partition is loaded, requests for it fail with
	// ErrLoading; Ready and WaitReady tell when all are. If one fails to
	// load, none is served and nothing is written, as when Open refuses.
	// Zero (false) makes Open wait for every partition.
	LoadInBackground bool
	// Logger receives warnings (repaired tails, failed writes) and load
	// progress. Nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock stamped on commits. Nil means time.Now.
	Now func() time.Time
	// SnapshotBytes is the least journal traffic between two snapshots of
	// a partition, shared out over the partitions: a partition snapshots
	// once the journal bytes it appended since its last snapshot reach
	// half that snapshot's size, or SnapshotBytes/Partitions if that is
	// more. So disk and restart time follow the live state, not the
	// history (SnapshotInterval bounds how often). Zero means 256 KiB;
	// NoSnapshots (any negative value)
	// disables snapshots: the journal then grows without bound.
	SnapshotBytes int64
	// Retention is how long a group may go without a commit before all of
	// its offsets expire at once. Zero means 7 days; KeepForever (any
	// negative value) keeps groups forever.
	Retention time.Duration
	// SnapshotInterval is the least time between two snapshots of a
	// partition that its journal traffic makes due (snapshots asked for,
	// by Snapshot or to let the journal go, do not wait). It bounds the
	// snapshots' own fsyncs while a small state takes many commits; a
	// snapshot it holds back is taken when it ends, with or without more
	// commits. Zero means 1 second; a negative value sets no minimum.
	SnapshotInterval time.Duration
	// RetentionCheckInterval is how often the coordinator looks for expired
	// groups. Zero means one minute.
	RetentionCheckInterval time.Duration
	// Observer, if set, is told about every log append and partition load,
	// for metrics. Its methods are called by the partitions' writers, where
	// they own a partition's state (see writer), and must be quick.
	// Nil means none.
	Observer Observer

	// syncDir syncs a directory; tests replace it to see which are synced.
	syncDir func(dir string) error
}

// Observer receives measurements of the write path and of loading.
type Observer interface {
	// ObserveAppend reports one partition's batch: how many requests it
	// carried, its bytes, and how long it took from its hand-over to the
	// journal until it was durable (the wait in the shared journal's queue
	// and its fsync). err is the append's error, if any.
	ObserveAppend(partition, requests, bytes int, took time.Duration, err error)
	// ObserveLoad reports a partition's replay at open.
	ObserveLoad(partition int, records int, took time.Duration)
}

// JournalObserver, when the Observer also implements it, is told about
// every batch the journal makes durable: how many partitions' batches it
// carried (calls), from how many distinct partitions, their records and
// payload bytes, and how long its append and fsync took. It is called, one
// batch at a time, on the goroutine that appended the batch (a caller
// waiting for it, see log.Committer) before the batch's callers are
// answered, and must be quick.
type JournalObserver interface {
	ObserveJournalBatch(calls, partitions, records, bytes int, took time.Duration, err error)
}

// MaintenanceObserver, when the Observer also implements it, is told about
// snapshots, log truncations and expired groups.
type MaintenanceObserver interface {
	// ObserveSnapshot reports a snapshot written (or failed) in the
	// background, its size and how long it took.
	ObserveSnapshot(partition int, bytes int64, took time.Duration, err error)
	// ObserveTruncate reports the journal's front dropped after a
	// snapshot.
	ObserveTruncate(took time.Duration, err error)
	// ObserveExpire reports groups expired by retention.
	ObserveExpire(partition int, groups int)
}

// DefaultOptions returns the options offsetd runs with unless told otherwise.
func DefaultOptions() Options {
	return Options{
		Partitions:             16,
		SegmentSize:            256 << 10,
		MaxMetadataBytes:       4096,
		SnapshotBytes:          256 << 10,
		Retention:              7 * 24 * time.Hour,
		RetentionCheckInterval: time.Minute,
		SnapshotInterval:       time.Second,
	}
}

// ensureDefaults gives every zero field its default. A zero Partitions is
// left for Open, which takes the data directory's own count.
func (o *Options) ensureDefaults() {
	d := DefaultOptions()
	if o.SegmentSize == 0 {
		o.SegmentSize = d.SegmentSize
	}
	if o.MaxMetadataBytes == 0 {
		o.MaxMetadataBytes = d.MaxMetadataBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SnapshotBytes == 0 {
		o.SnapshotBytes = d.SnapshotBytes
	}
	if o.Retention == 0 {
		o.Retention = d.Retention
	}
	if o.RetentionCheckInterval == 0 {
		o.RetentionCheckInterval = d.RetentionCheckInterval
	}
	if o.SnapshotInterval == 0 {
		o.SnapshotInterval = d.SnapshotInterval
	}
	if o.syncDir == nil {
		o.syncDir = log.SyncDir
	}
}

func (o Options) validate() error {
	if o.Partitions < 0 || o.Partitions > partitioner.MaxPartitions {
		return fmt.Errorf("%w: Partitions %d (want 1..%d, or 0 for the directory's own)", ErrInvalid, o.Partitions, partitioner.MaxPartitions)
	}
	if o.SegmentSize < 4096 {
		return fmt.Errorf("%w: SegmentSize %d (want at least 4096)", ErrInvalid, o.SegmentSize)
	}
	if o.RetentionCheckInterval < 0 {
		return fmt.Errorf("%w: RetentionCheckInterval %v", ErrInvalid, o.RetentionCheckInterval)
	}
	return nil
}
