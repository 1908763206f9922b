package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/offsetd/offsetd/partitioner"
)

// metaFile records what a data directory was created with. The partition
// count and hash decide where every record lives, so they can never change.
const metaFile = "offsetd.meta"

// formatVersion is the version of the data directory's layout.
const formatVersion = 1

type meta struct {
	Format     int    `json:"format"`
	Partitions int    `json:"partitions"`
	Hash       string `json:"hash"`
}

// loadOrCreateMeta reads dir's meta file, or writes one for a new directory,
// and checks it against the options.
func loadOrCreateMeta(dir string, partitions int) error {
	path := filepath.Join(dir, metaFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		m := meta{Format: formatVersion, Partitions: partitions, Hash: partitioner.Hash}
		b, _ := json.Marshal(m)
		return writeFileAtomic(path, append(b, '\n'))
	}
	if err != nil {
		return err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	if m.Format != formatVersion {
		return fmt.Errorf("coordinator: %s: unsupported format %d (want %d)", path, m.Format, formatVersion)
	}
	if m.Hash != partitioner.Hash {
		return fmt.Errorf("%w: %s says hash %q, this build uses %q", ErrPartitionMismatch, path, m.Hash, partitioner.Hash)
	}
	if m.Partitions != partitions {
		return fmt.Errorf("%w: %s was created with %d partitions, opened with %d", ErrPartitionMismatch, dir, m.Partitions, partitions)
	}
	return nil
}

// ReadPartitions returns the partition count a data directory was created
// with, so that tools can open it without being told.
func ReadPartitions(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return 0, err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, metaFile, err)
	}
	return m.Partitions, nil
}

// writeFileAtomic writes path through a synced temporary file and a rename,
// then syncs the directory, so a crash leaves the old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// makeDir creates dir and its missing parents, syncing the parent of each
// directory it creates: without that a machine crash right after Open can
// lose the directory's entry, and every commit acknowledged in it.
func makeDir(dir string, sync func(dir string) error) error {
	dir = filepath.Clean(dir)
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := makeDir(parent, sync); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	return sync(parent)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// lockDir takes an exclusive lock on dir so that two processes never write
// the same logs. The kernel drops it when the process dies.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
	}
	return f, nil
}
