// Package log is one partition's durable, segmented, append-only log, on
// top of github.com/tidwall/wal. It frames and checksums every entry,
// appends a batch with one fsync, replays from any index, removes whole
// segments from the front after a snapshot, cuts a torn tail on open,
// refuses to open on damage before the tail, and recovers from a failed
// write without ever showing the failed batch. It knows nothing of what
// the entries mean.
//
// # Lifecycle
//
//	l, err := log.Open(dir, log.Options{Partition: 3})
//	if err != nil { ... }                 // errors.Is(err, log.ErrCorrupt): damage before the tail
//	defer l.Close()
//	err = l.Replay(l.FirstIndex(), apply) // rebuild state; payloads alias a buffer
//	first, last, err := l.Append(batch)   // one fsync; on error the handle is poisoned
//	...                                   // the next Append recovers first (or call Recover)
//	err = l.TruncateFront(snapshot + 1)   // removes whole segments before the one holding it
//
// A Log is owned by one goroutine. Memory per partition is about
// 2 × Options.SegmentSize.
//
// # On-disk format
//
// A partition's directory holds segment files named by the index of the
// first entry they hold, as 20 decimal digits (00000000000000000001). A
// segment is a run of wal entries; each entry carries one frame:
//
//	segment: | entry | entry | ... |
//	entry:   | uvarint(len(frame)) | frame |          (tidwall/wal's binary format)
//
//	frame:
//	+---------+--------+---------------------+------------------+
//	| version | type   | payload             | crc32c           |
//	| 1 byte  | 1 byte | len(frame)-6 bytes  | 4 bytes, LE      |
//	+---------+--------+---------------------+------------------+
//	version: 1
//	type:    1..255, chosen by the user of the log; 0 is invalid
//	crc32c:  CRC-32C (Castagnoli) of version, type and payload
//
// A frame is at least 6 bytes, so a zero length (zero-filled space) is
// never a valid entry. These constants and this layout are the on-disk
// format: they never change. A new layout gets a new version byte, and
// readers keep reading version 1.
//
// TruncateFront removes whole segment files before the one holding its
// index, oldest first, and never the last: a crash part way leaves a
// contiguous run of segments ending at the last one, and Open takes the
// first of them as the front. Older versions truncated through wal, which
// leaves .TEMP, .START or .END files when interrupted; Open finishes such
// a truncation as wal.Open would, before repairing the tail.
//
// # Damage
//
// A crash while appending can only damage the end of the last segment,
// which held no acknowledged entry (every acknowledged entry was synced
// before later bytes were written). Open cuts such a torn tail (partial,
// zero-filled or garbage bytes) back to the last whole entry and logs
// what it dropped. Damage followed by a valid entry is not a torn tail:
// Open fails with a *CorruptError (errors.Is ErrCorrupt) naming
// partition, segment file and index, and so does Replay for damage it
// meets in older segments. Inspect reports both without changing
// anything.
package log
