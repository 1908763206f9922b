// Package coordinator is offsetd's embedded API: it stores consumer-group
// offsets and static-topic mappings durably and serves them from memory.
//
// Every group hashes to one of N internal partitions (N is fixed when the data
// directory is created). Each partition's state (partition.go: tables,
// apply, watchers, snapshots) changes only through its writer: the local
// one (local.go) or, in a cluster, the replicated one (replicated.go).
// Locally, a commit is validated and encoded under the partition's lock
// on its caller's goroutine and added to the partition's batch waiting in
// the commit pipeline that all partitions share (log.Committer, whose
// comment states the protocol); every other request goes through the
// partition's goroutine, which does the same. One sync makes the waiting
// batches of every partition durable (group commit across partitions;
// package log syncs a copy in its sync ring rather than the growing
// segment), appended by a caller that waits for it while nobody else
// appends; while a batch syncs, the next forms. As each batch is durable,
// in order, it is applied to the in-memory tables by whoever next holds
// the partition's lock, and only then acknowledged. Reads are served from
// the tables and never touch the disk. On Open, nothing is written until
// everything has loaded: the journal is planned (log.PlanOpen), every
// partition loads its newest snapshot, then the journal is read once, as
// the plan will leave it, and each record goes to its partition;
// partitions apply in parallel. Only then are the journal's repairs
// carried out (DataDir.CarryOut, datadir.go). Check runs the same without
// writing: its verdict is Open's (offsetd verify).
//
// The data directory (DataDir: the lock, the meta file, the journal, the
// snapshot files) has one owner. On one node that is the Coordinator. On a
// cluster node it is package cluster, which opens it (OpenDataDir), replays
// the journal into its Raft groups, has the partitions load as state
// machines (OpenReplicated, picking the snapshot each restores), carries
// the plan out, writes and truncates the journal, keeps the snapshot
// files, and hands each partition its Replica (Start).
//
// A partition never handles a snapshot file: it writes a snapshot's
// content to an io.Writer (partition.writeSnapshot) and restores one from
// an io.Reader (partition.restoreSnapshot); its host names, syncs,
// renames, lists, prunes and picks the files: on one node the data
// directory through the local writer, on a cluster node the node through
// the Replica.
//
// Snapshots hold a partition's state in compact records (snaprecord.go):
// first the table's sizes, so that loading sizes its maps once, then each
// group with its topics in name order and their partitions in number
// order, every name written once and every offset as a flags byte and the
// fields that changed from the offset before (often two bytes). Loading
// decodes a record whole, then fills each group and topic's offsets with
// one lookup; partitions load in parallel. The previous release's records
// (a group's offsets as whole keys) are still read.
//
// Guarantees:
//   - a call that returned nil is durable (synced to the disk), unless
//     Options.UnsafeNoSync is set;
//   - a Fetch never returns a value that a crash could take back;
//   - one Commit call is one journal record: after a crash all of it is
//     there or none of it;
//   - the last write wins, in log order: a reset to a lower offset holds;
//   - bad input fails with ErrInvalid and writes nothing;
//   - an Open that refuses a data directory writes nothing to it.
//
// Lifecycle:
//
//	c, err := coordinator.Open("/var/lib/offsetd", coordinator.DefaultOptions())
//	if err != nil { ... }
//	defer c.Close()
//	err = c.Commit(ctx, "payments", []coordinator.OffsetCommit{
//		{Topic: "orders", Partition: 0, Offset: 42, LeaderEpoch: -1},
//	})
//	off, ok, err := c.Fetch("payments", "orders", 0)
package coordinator
