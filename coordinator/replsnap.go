package coordinator

import (
	"fmt"
	"io"

	"github.com/offsetd/offsetd/log"
)

// PartitionSnapshots are a replicated partition's snapshot files as the
// replication that drives it reads and writes them: the newest, to send to a replica that
// lags behind the compacted log, and a leader's, received in its place.
// The files' names and format are the coordinator's and package log's
// alone. Its methods may run on any goroutine.
type PartitionSnapshots struct {
	snaps *log.Snapshots
	owner log.SnapshotOwner
}

// PartitionSnapshots returns partition's snapshot files, for the
// replication that drives the partition (see OpenReplicated).
func (d *DataDir) PartitionSnapshots(partition int) *PartitionSnapshots {
	return &PartitionSnapshots{snaps: d.snapshots[partition], owner: snapshotOwner(d.meta, partition)}
}

// List returns the indexes of the partition's snapshot files, newest
// first.
func (s *PartitionSnapshots) List() ([]uint64, error) { return s.snaps.List() }

// Open opens the partition's snapshot file index, as another replica
// receives it, and returns its size in bytes.
func (s *PartitionSnapshots) Open(index uint64) (io.ReadCloser, int64, error) {
	return s.snaps.Open(index)
}

// Receive makes r, another replica's snapshot file index of the partition
// (as Open gave it, of at most size bytes), the partition's snapshot file
// index, durably, each record checked: the coordinator loads it when the
// replication hands it a Committed with Snapshot set. A file of another
// partition, partition count or hash is refused (errors.Is
// log.ErrSnapshotOwner); one of another data directory is expected, since
// it is another replica's. A failure leaves no file behind.
func (s *PartitionSnapshots) Receive(index uint64, r io.Reader, size int64) error {
	return s.snaps.Receive(index, r, size, func(o *log.SnapshotOwner) error {
		if o == nil || o.Partition == s.owner.Partition && o.Partitions == s.owner.Partitions && o.Hash == s.owner.Hash {
			return nil
		}
		return fmt.Errorf("%w (%w): snapshot %d received names %v, this is partition %d of %d (hash %s)",
			log.ErrCorrupt, log.ErrSnapshotOwner, index, *o, s.owner.Partition, s.owner.Partitions, s.owner.Hash)
	})
}
