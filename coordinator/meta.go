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

// The versions of the data directory's layout. Format 1 kept a log per
// partition (p0000/…); format 2 keeps one journal for every partition
// (journal/) and the snapshots per partition (snapshots/p0000/…). Open
// converts format 1 to 2.
const (
	format1       = 1
	formatVersion = 2
)

type meta struct {
	Format     int    `json:"format"`
	Partitions int    `json:"partitions"`
	Hash       string `json:"hash"`
}

// loadOrCreateMeta reads dir's meta file, or writes one for a new directory,
// checks it against the options, and returns the directory's format.
func loadOrCreateMeta(dir string, partitions int) (int, error) {
	path := filepath.Join(dir, metaFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return formatVersion, writeMeta(dir, partitions)
	}
	if err != nil {
		return 0, err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	if m.Format != formatVersion && m.Format != format1 {
		return 0, fmt.Errorf("coordinator: %s: unsupported format %d (want %d or %d)", path, m.Format, format1, formatVersion)
	}
	if m.Hash != partitioner.Hash {
		return 0, fmt.Errorf("%w: %s says hash %q, this build uses %q", ErrPartitionMismatch, path, m.Hash, partitioner.Hash)
	}
	if m.Partitions != partitions {
		return 0, fmt.Errorf("%w: %s was created with %d partitions, opened with %d", ErrPartitionMismatch, dir, m.Partitions, partitions)
	}
	return m.Format, nil
}

// writeMeta writes the meta file of the current format, atomically.
func writeMeta(dir string, partitions int) error {
	m := meta{Format: formatVersion, Partitions: partitions, Hash: partitioner.Hash}
	b, _ := json.Marshal(m)
	return writeFileAtomic(filepath.Join(dir, metaFile), append(b, '\n'))
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

// Layout names the files of a data directory, for tools that read one
// offline (offsetd verify and dump).
type Layout struct {
	// Format is the directory's format: 2, or 1 until a coordinator opens
	// it and converts it.
	Format     int
	Partitions int
	// Logs are the directories of segments: the journal, or in format 1 a
	// log per partition.
	Logs []LogDir
	// Snapshots holds, per partition, the directory of its snapshots.
	Snapshots []string
}

// LogDir is a directory of log segments.
type LogDir struct {
	Dir string
	// Partition is the partition of the records of a format-1 log, which
	// carry none; the journal's records carry their own (0 here).
	Partition int
}

// ReadLayout reads the meta file of a data directory and returns where its
// files are.
func ReadLayout(dir string) (Layout, error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return Layout{}, err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Layout{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, metaFile, err)
	}
	l := Layout{Format: m.Format, Partitions: m.Partitions}
	switch m.Format {
	case format1:
		for i := range m.Partitions {
			l.Logs = append(l.Logs, LogDir{Dir: format1Dir(dir, i), Partition: i})
			l.Snapshots = append(l.Snapshots, format1Dir(dir, i))
		}
	case formatVersion:
		l.Logs = []LogDir{{Dir: JournalDir(dir)}}
		for i := range m.Partitions {
			l.Snapshots = append(l.Snapshots, SnapshotDir(dir, i))
		}
	default:
		return Layout{}, fmt.Errorf("coordinator: %s: unsupported format %d", metaFile, m.Format)
	}
	return l, nil
}
