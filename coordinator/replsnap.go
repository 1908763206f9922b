package coordinator

import "github.com/offsetd/offsetd/log"

// Snapshots returns partition's snapshot files, for the owner of the data
// directory on a cluster node: the node writes them for its partitions
// (Replica.WriteSnapshot), sends the newest to a replica that lags behind
// and receives a leader's in its place (log.Snapshots.Receive: its header
// must name this partition, partition count and hash), and the
// partitions restore them (Replica.ReadSnapshot). The files' names are
// the data directory's layout, built here only.
func (d *DataDir) Snapshots(partition int) *log.Snapshots { return d.snapshots[partition] }
