package log

// Report describes a log directory as Inspect found it.
type Report struct {
	Segments   int    // segment files
	Batches    int    // whole batches (wal entries) that pass their checksum
	Records    int    // records in them
	Bytes      int64  // total size of the segment files
	FirstIndex uint64 // as Log.FirstIndex would report after Open
	LastIndex  uint64 // as Log.LastIndex would report after Open

	// Clean reports a clean-close marker: the log was closed cleanly, so
	// any damage at its end is corruption, not a torn write.
	Clean bool

	// TornTailBytes is what Open would cut off the last segment (0 if
	// nothing), starting at TornTailOffset in TornTailSegment.
	TornTailBytes   int64
	TornTailSegment string
	TornTailOffset  int64

	// Leftovers names the files of an interrupted truncation (.START,
	// .END, .TEMP) that Open would finish; the segments above are counted
	// as they will be afterwards.
	Leftovers []string

	// RingBatches counts the batches Open would restore from the sync
	// ring after a crash, where the last segment lost them (they are
	// counted in Batches and Records too); what Open would cut off the
	// segments first is in the TornTail fields.
	RingBatches int
}

// Inspect reads the log in dir without changing anything, as Open plans
// it (see Plan), for operators' verify and dump commands. It calls fn (if
// not nil) for every record in order. partition is -1 for the journal, or
// the partition of a log of format 1 (see Options.Format1). A torn tail,
// which Open would cut, is reported in the Report, not as an error;
// damage before the tail, or anywhere after a clean close, is an
// ErrCorrupt error naming the file and the batch or record index. It
// checks no journal tag (Options.JournalID). An error from fn stops the
// inspection and is returned as is. e.Payload is valid only until fn
// returns.
func Inspect(dir string, partition int, fn func(index uint64, e Entry) error) (Report, error) {
	if fn == nil {
		fn = func(uint64, Entry) error { return nil } // every record read, and counted
	}
	p, err := planJournal(dir, Options{Partition: max(partition, 0), Format1: partition >= 0}, fn)
	return p.rep, err
}
