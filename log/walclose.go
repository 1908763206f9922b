package log

import (
	"os"
	"reflect"

	"github.com/tidwall/wal"
)

// closeWAL closes w and returns what its Close returned. wal's Close begins
// with an fsync of the last segment and, when that fails, returns at once,
// leaving the file open; a device that fails an fsync often fails every
// one after it (a dead disk, a lost network mount), so no later Close
// closes it either. Every handle a failed sync poisons would then keep a
// file descriptor, and a store that retries a failing disk would run out
// of them. So when Close fails, the segment file is closed here, through
// the handle's own field (at the version go.mod pins); no caller uses the
// handle after closeWAL (TestCloseAfterFailedSyncClosesFiles checks that
// no file stays open).
func closeWAL(w *wal.Log) error {
	err := w.Close()
	if err != nil {
		if f := walSegmentFile(w); f != nil {
			f.Close() // a second close of a file wal did close only fails
		}
	}
	return err
}

// walSegmentFile returns the last segment's file that w holds open, or nil
// if w's layout is not the one closeWAL knows.
func walSegmentFile(w *wal.Log) *os.File {
	v := reflect.ValueOf(w).Elem().FieldByName("sfile")
	if !v.IsValid() || v.Type() != reflect.TypeFor[*os.File]() || v.IsNil() {
		return nil
	}
	return (*os.File)(v.UnsafePointer())
}
