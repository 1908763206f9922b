// Package cluster replicates a coordinator's internal partitions over
// several nodes: each partition is a Raft group (go.etcd.io/raft/v3),
// replicated on the nodes of its configuration (at first every node of
// the cluster), led by one of them. A write is
// acknowledged once a quorum of the group holds it durably and the leader
// has applied it; every replica applies the group's committed records, in
// log order, through the coordinator's own apply path.
//
// A Node drives one RawNode per partition, each on a goroutine of its
// own. RawNode rather than raft's Node: one goroutine owns each group and
// handles its Ready inline, so a leader learns the index and term of what
// it proposes at once (the coordinator answers a write when that entry
// comes back committed, and knows it lost when another term's entry takes
// its index), and raft starts no goroutine of its own: a group has two,
// the one that owns it and one that hands its committed entries to the
// partition's writer (group.forward). The groups use raft's asynchronous
// storage writes: one goroutine of the node, the persister, makes every
// group's entries durable together (see persist.go), while the groups send
// their messages to the other nodes at once.
//
// # Storage
//
// The node owns its data directory, as raftexample's raft node owns its
// WAL and snapshotter: Open opens it as a coordinator would
// (coordinator.OpenDataDir: the lock, the meta file, the journal's plan,
// nothing written yet), replays the journal into its groups, and has the
// coordinator load its partitions as the groups' state machines
// (coordinator.OpenReplicated): for each partition the node picks the
// newest snapshot file its group's log allows, falling back past a
// damaged one (Node.load), and the partition restores the content it is
// handed. Only if every partition loads does the node carry the
// directory's plan out (DataDir.CarryOut). From then on the node alone
// writes the journal, through its own log.Committer, and decides what of
// it is dropped; it also keeps the snapshot files (log.Snapshots, given
// out by DataDir.Snapshots): the partition writes a snapshot's content to
// the io.Writer its replica gives it (Replica.WriteSnapshot) and restores
// a received one from the io.Reader it gives (Replica.ReadSnapshot); the
// node names, writes, syncs, renames, lists, prunes, sends and receives
// the files. The coordinator applies what the groups commit and never
// opens, writes or truncates the journal or a snapshot file. Close closes
// the coordinator first, the journal and the directory last.
//
// Each group's entries and HardState are records of the node's one commit
// journal (package log), tagged with the partition: the persister appends
// what every group handed it as one batch of the journal's Committer, so
// one sync (an fdatasync of the journal's sync ring) covers the entries of
// every group that wrote meanwhile. Record types, part of the on-disk format (the coordinator's
// own types are below them):
//
//	32 raft entry:      a raftpb.Entry (protobuf)
//	33 raft hard state: a raftpb.HardState (protobuf)
//	34 raft snapshot:   kind (1 compacted, 2 received) | raftpb.SnapshotMetadata
//
// A group's snapshots are its partition's snapshot files, whose content
// the partition writes when it decides, as on a single node, at indexes of
// the group's log. Before it writes a newer one, the group's log is
// compacted up to the newest one it has (kept to fall back to): a snapshot
// record and the hard state are written again at the journal's end, the
// node drops the journal's segments below the lowest record any group
// still needs (its snapshot record, or its first entry after it; see
// keep.go), and the snapshot files older than that one. A follower
// that needs entries a leader compacted gets the leader's snapshot file
// instead, streamed beside raft's messages (its MsgSnap only refers to the
// file: see snapstream.go), makes it its own, and its coordinator replaces
// its tables by it.
//
// On open the journal is replayed into one raft.MemoryStorage per group, as
// etcd's raftexample replays its WAL: the newest snapshot, then the
// entries after it in the order written (an entry replaces any at its
// index or after it), then the last hard state. The partition loads the
// newest snapshot the log allows, and raft hands the coordinator the
// committed entries after it.
//
// A group's configuration has no record of its own: it is the newest
// snapshot record's (whose metadata carries the configuration at its
// index) changed by the configuration entries of the log after it, and a
// group restarts with the configuration as of the index its partition
// resumes from (see confstate.go).
//
// # Membership
//
// ChangeReplicas changes one partition's replicas on its leader, one
// change at a time: a node joins as a learner, catches up from the
// leader's newest snapshot and log, and is promoted while the node it
// replaces (if any) is removed, in one joint configuration change
// (ConfChangeV2, left by raft itself); a leader that is removed hands its
// lead off first. Each step is derived from the group's configuration
// and progress alone, so a change interrupted anywhere (a new leader, a
// cancelled call) resumes when asked again. A node that joins a running
// cluster starts with Options.Join: its groups wait to be added instead of
// bootstrapping.
//
// # Reads
//
// Reads are linearizable through Raft's ReadIndex (coordinator.Barrier):
// the leader confirms with a heartbeat round to a quorum that it still
// leads, then serves once it has applied up to its commit index. ReadIndex
// rather than leader leases: a lease is only safe while clocks run at the
// same rate and no process pauses longer than the lease, ReadIndex is safe
// whatever the clocks do, for one round trip to the nearest follower.
//
// # What an operator sees
//
// A node counts and logs what its groups do (Stats, and Options.Logger):
// each new leader it learns of, each configuration change it applies, each
// leader's snapshot sent and received, each peer its transport stops and
// starts reaching (the HTTP transport probes each peer on the stream it
// keeps open to it, or with an empty POST), and its own membership: a
// joining node not yet added (it logs the command that adds it), a
// learner, a voter, or a node removed from every
// partition it held, which it learns by applying the change that removes
// it. Ready says whether it is a voter; package server turns this into the
// offsetd_raft_* metrics, /readyz and GET /v1/cluster/status.
//
// # Lifecycle
//
//	n, err := cluster.Open(dir, coordinator.Options{}, cluster.Options{ID: 1, Peers: []uint64{1, 2, 3}, Transport: t})
//	c := n.Coordinator()            // writes on the leader; others answer *coordinator.NotLeaderError
//	err = c.Barrier(ctx, group)     // then reads of group are linearizable
//	n.Receive(msgs)                 // what the transport brings from the other nodes
//	err = n.ChangeReplicas(ctx, p, cluster.ReplicaChange{Add: 4, Remove: 1}) // on p's leader
//	err = n.Close()
package cluster
