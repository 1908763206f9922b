// Package log is offsetd's commit journal: one durable, segmented,
// append-only log on top of github.com/tidwall/wal, shared by every
// internal partition. Each batch of records is one wal entry under one
// checksum and one sync; every record names its partition. The package
// also writes and reads the partitions' snapshot files. It cuts a torn
// batch on open, refuses damage anywhere else (and any damage after a
// clean close), recovers from a failed write without ever showing the
// failed batch, and removes whole segments from the front. It knows
// nothing of what the records mean.
//
// # Where a commit becomes durable
//
// Committer, the commit pipeline (its comment states the invariants and
// the steps): many goroutines (committing callers, the partitions'
// writers) queue their records in tickets; whoever waits for a ticket
// while nobody appends takes everything queued, appends it as one batch
// (Log.Append: one write, one sync) on its own goroutine and answers every
// caller of the batch. There is no appending goroutine. While that sync
// runs the next batch forms in the queue, so under load one sync carries
// the commits of every partition that arrived meanwhile.
//
// The sync is not an fsync of the segment: Append writes the batch to the
// last segment without syncing it, and a copy into the sync ring, a file
// of fixed size written in place, whose data it syncs (fdatasync). A
// segment file grows with every append, so its fsync writes the file's
// size too: two writes to the device, one after the other, against one
// for the ring. wal syncs each segment as it closes it; the ring holds the
// batches of the last one since then, and Open restores from it what a
// power cut took from the segment (ring.go writes the ring, restore.go
// plans what Open restores from it).
//
// # Lifecycle
//
//	l, err := log.Open(dir, log.Options{})  // errors.Is(err, log.ErrCorrupt): damage
//	err = l.Replay(from, apply)             // rebuild state; every record, every partition
//	err = l.SkipTo(next)                    // never hand out an index twice
//	c := log.NewCommitter(l, nil)           // from now on c owns l
//	first, last, err := c.Commit(records)   // durable; on error the batch is not in the log
//	err = l.TruncateFront(index)            // any goroutine: whole segments before index
//	c.Close()
//	err = l.Close()                         // leaves the clean-close marker
//
// Memory: wal keeps the last segment in memory, so about
// 2 × Options.SegmentSize for the whole journal.
//
// # On-disk format
//
// A journal directory holds segment files named by the wal index of their
// first entry, as 20 decimal digits (00000000000000000001), the sync ring
// RING (none with UnsafeNoSync), and, after a clean close, the marker
// CLEAN. A segment is a run of wal entries; each entry carries one frame:
//
//	segment: | entry | entry | ... |
//	entry:   | uvarint(len(frame)) | frame |          (tidwall/wal's binary format)
//
//	frame:
//	+---------+--------+---------------------+------------------+
//	| version | type   | payload             | crc32c           |
//	| 1 byte  | 1 byte | len(frame)-6 bytes  | 4 bytes, LE      |
//	+---------+--------+---------------------+------------------+
//	crc32c:  CRC-32C (Castagnoli) of version, type and payload
//
//	version 2, type 1 or 2: a batch (the journal)
//	  payload: | tag u64 LE (type 2 only) | uvarint first | uvarint count |
//	           | record | ... count records ... |
//	  record:  | uvarint partition | type (1..255) | uvarint len(data) | data |
//	  The records take indexes first, first+1, ...; a batch of records
//	  starts right after the last record of the batch before it, in the
//	  same segment or the one before. A batch of no records moves the next
//	  index on to first (Log.SkipTo). The tag (FNV-1a of
//	  Options.JournalID, never 0) says which journal wrote the batch; a
//	  journal written without an ID has batches of type 1, which carry none.
//
//	version 1, type 1..255: one record of the partition the directory
//	  belongs to, whose index is the wal index (a partition's log of the
//	  previous release, read to convert it; snapshot files use these
//	  frames too)
//
//	CLEAN: | "OFFCLEAN" | 1 | last wal index u64 | last record index u64 |
//	       | last segment's size u64 | crc32c of the bytes before |  (LE)
//
//	RING:  | record | record | ... | (zeros, or older records, up to its size)
//	record: | crc32c u32 | lap nonce u64 | wal index u64 | len(frame) u32 | frame |  (LE)
//	  crc32c of the 20 bytes after it and the frame. A lap starts at byte 0
//	  with a new random nonce once everything before its first batch is
//	  synced in the segments; its records carry consecutive wal indexes
//	  and the batch's frame as the segment holds it. Reading from byte 0,
//	  the lap ends at the first record that fails its checksum, carries
//	  another nonce or skips an index.
//
// A partition's snapshot directory holds files named snap.%020d of the
// record index they cover, each a header, then the snapshot's content: a
// run of version-1 frames and a footer. The header is the file's
// (Snapshots writes and checks it); the content is what a partition writes
// (SnapshotEncoder) and restores (DecodeSnapshot), to and from any stream:
//
//	header:  | "OFFSNAP" | 2 | index u64 | partition u32 | partitions u32 |
//	         | len(hash) u8 | hash | len(dir) u8 | dir | crc32c of the bytes before |  (LE)
//	entries: | uvarint(len(frame)) | frame | ...
//	footer:  | uvarint 0 | count u64 | crc32c of count |  (LE)
//
// The header names the snapshot's owner (SnapshotOwner: the partition, the
// partition count, the hash, the data directory's identifier), and Restore
// refuses a snapshot of another. Version 1 of the header, still read,
// names none: | "OFFSNAP" | 1 | index u64 | crc32c of the 16 bytes before |.
//
// What the records of a snapshot hold is the coordinator's business: since
// the compact format, a record of a group's offsets writes each group and
// topic name once and each offset in a few bytes (coordinator/snaprecord.go
// draws it); the records of the previous format are still read.
//
// A frame is at least 6 bytes, so a zero length (zero-filled space) is
// never a valid entry. These constants and this layout are the on-disk
// format: they never change. A new layout gets a new version byte, and
// readers keep reading the old ones.
//
// TruncateFront removes whole segment files, oldest first, never the last
// one nor the last that holds a batch (it carries the last index): a crash
// part way leaves a contiguous run of segments ending at the last one, and
// Open takes the first of them as the front. Older versions truncated
// through wal, which leaves .TEMP, .START or .END files when interrupted;
// Open finishes such a truncation as wal.Open would, before repairing the
// tail.
//
// # Damage
//
// A crash can only damage what was written to the last segment since it
// was last synced, and the ring's lap holds every acknowledged batch of
// that (a batch that closed its segment, or did not fit in the ring, was
// synced in its segment instead, and the next lap starts after it). So
// after a crash Open reads the lap, and where the last segment's whole
// batches stop short of the lap's end (pages of the segment lost, in any
// order), cuts the segment there and appends the lap's batches after it;
// the lap's copies of the batches the segment kept must equal them byte
// for byte. A batch is one entry under one checksum, so a batch torn
// anyhow (cut short, some pages written and others not, zero-filled)
// fails to read; the one batch that can have been in flight, written to
// its segment and not yet to the ring, is cut when batches are restored
// before it, and otherwise kept if it reached the disk whole. Open logs
// what it cut and what it restored. Damage the lap cannot explain is not
// a torn write: damage in a segment wal closed, or before the lap, a
// whole batch after damage that goes past the lap and the batch in
// flight, a lap that starts after the segments end, whose copies differ
// from them, or that ends at a damaged record with later records of the
// lap after it (a torn record is always a lap's last). Open then fails with a *CorruptError (errors.Is
// ErrCorrupt) naming partition, file and entry, and so does Replay for
// damage it meets in older segments. After a clean close nothing can be
// torn: nothing is restored from the ring (a lap past the marker's end is
// corruption), any damage at the end is corruption, and the journal must
// end exactly where the marker says.
//
// Continuity is checked everywhere, in both states: each segment starts
// at the wal index where the one before ended, each batch of records
// starts right after the last record before it, and every batch carries
// this journal's tag. A whole frame (its checksum passes) that breaks any
// of these was written so: it is corruption wherever it is, never a torn
// end. Open decides all of this before it writes (PlanOpen reads
// everything; Plan.Open carries the plan out), so a refusal leaves the
// directory as it was; Inspect reports the same plan.
package log
