// Package log is offsetd's commit journal: one durable, segmented,
// append-only log on top of github.com/tidwall/wal, shared by every
// internal partition. Each batch of records is one wal entry under one
// checksum and one fsync; every record names its partition. The package
// also writes and reads the partitions' snapshot files. It cuts a torn
// batch on open, refuses damage anywhere else (and any damage after a
// clean close), recovers from a failed write without ever showing the
// failed batch, and removes whole segments from the front. It knows
// nothing of what the records mean.
//
// # Where a commit becomes durable
//
// Committer.Commit: many goroutines (committing callers, the partitions'
// writers) hand it their records; one goroutine takes everything queued,
// appends it as one batch (Log.Append: one write, one fsync) and answers
// every caller. While
// that fsync runs the next batch forms in the queue, so under load one
// fsync carries the commits of every partition that arrived meanwhile. A
// caller that finds it idle and nothing queued appends its own batch on
// its goroutine (StartOwn, Flush), without the two hand-offs.
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
// 2 × Options.SegmentSize.
//
// # On-disk format
//
// A journal directory holds segment files named by the wal index of their
// first entry, as 20 decimal digits (00000000000000000001), and, after a
// clean close, the marker CLEAN. A segment is a run of wal entries; each
// entry carries one frame:
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
//	version 2, type 1: a batch (the journal)
//	  payload: | uvarint first | uvarint count | record | ... count records ... |
//	  record:  | uvarint partition | type (1..255) | uvarint len(data) | data |
//	  The records take indexes first, first+1, ...; indexes only grow from
//	  batch to batch. A batch of no records moves the next index to first
//	  (Log.SkipTo).
//
//	version 1, type 1..255: one record of the partition the directory
//	  belongs to, whose index is the wal index (a partition's log of the
//	  previous release, read to convert it; snapshot files use these
//	  frames too)
//
//	CLEAN: | "OFFCLEAN" | 1 | last wal index u64 | last record index u64 |
//	       | last segment's size u64 | crc32c of the bytes before |  (LE)
//
// A partition's snapshot directory holds files named snap.%020d of the
// record index they cover, each a run of version-1 frames between a header
// and a footer (see Snapshots):
//
//	header:  | "OFFSNAP" | 1 | index u64 | crc32c of the 16 bytes before |  (LE)
//	entries: | uvarint(len(frame)) | frame | ...
//	footer:  | uvarint 0 | count u64 | crc32c of count |  (LE)
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
// A crash while appending can only damage the end of the last segment,
// which held no acknowledged batch (every acknowledged batch was synced
// before later bytes were written). A batch is one entry under one
// checksum, so a batch torn anyhow (cut short, some pages written and
// others not, zero-filled) fails to read, and Open cuts it and logs what
// it dropped. Damage followed by a whole batch with higher indexes is not
// a torn tail: Open fails with a *CorruptError (errors.Is ErrCorrupt)
// naming partition, segment file and entry, and so does Replay for damage
// it meets in older segments. After a clean close nothing can be torn:
// any damage at the end is corruption, and the journal must end exactly
// where the marker says. Inspect reports all of this without changing
// anything.
package log
