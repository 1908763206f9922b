package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/offsetd/offsetd/log"
)

// joinMarker names the file that says a data directory belongs to a node
// that joined a running cluster: restarted before any leader added it
// (its journal still empty), without Options.Join, it must still wait to
// be added, not found a cluster of its own under ids the cluster uses.
const joinMarker = "JOINED"

// joinedBefore reports whether dir holds the marker.
func joinedBefore(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, joinMarker))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// markJoined writes the marker durably into dir, once the node has
// opened it (its meta file is written, so that the marker is not taken
// for data without one).
func markJoined(dir string) error {
	path := filepath.Join(dir, joinMarker)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = log.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("cluster: marking %s as a joining node's: %w", dir, err)
	}
	return nil
}
