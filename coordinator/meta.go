package coordinator

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/offsetd/offsetd/log"
	"github.com/offsetd/offsetd/partitioner"
)

// metaFile records what a data directory was created with. The partition
// count and hash decide where every record lives, so they can never change;
// a missing or damaged meta file over existing data refuses to open rather
// than guess them.
const metaFile = "offsetd.meta"

// metaVersion is the version of the meta file's own encoding. Version 2
// added Version and Checksum; a file without them (written by offsetd
// before they existed) is read as version 1 and rewritten at Open.
// Version 3 added ID; a file of an older version gets one, rewritten in
// version 3, the first time Open succeeds.
const metaVersion = 3

// The versions of the data directory's layout: the files of the logs and
// snapshots and their framing. Format 1 kept a log per partition
// (p0000/…); format 2 keeps one journal for every partition (journal/) and
// the snapshots per partition (snapshots/p0000/…). Open converts format 1
// to format 2; a change of layout bumps dataFormat.
const (
	format1    = 1
	dataFormat = 2
	// formatTxn is format 2's layout in a directory whose journal or
	// snapshots may hold records of transactional offsets (types 10-12).
	// A directory moves to it (its meta file rewritten) before its first
	// such record is written (useTxnFormat), so that a release that does
	// not know them refuses the directory by its format (ErrFormat)
	// rather than as damage; one that never held a transaction stays at
	// format 2, readable by earlier releases.
	formatTxn = 3
)

// meta is the meta file: one line of JSON. Checksum is the CRC-32C of the
// JSON of the other fields (Checksum zero), so a flipped digit is damage,
// not another partition count.
type meta struct {
	Version    int    `json:"version"`
	Format     int    `json:"format"`
	Partitions int    `json:"partitions"`
	Hash       string `json:"hash"`
	// ID identifies the data directory: every snapshot names it in its
	// header, so that one copied from another data directory is refused.
	// Written when the directory is created (or, for one created before
	// IDs, at its first successful open).
	ID       string `json:"id,omitempty"`
	Checksum uint32 `json:"crc32c"`
}

// newID returns a fresh data directory identifier: 16 random bytes in hex.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (m meta) sum() uint32 {
	m.Checksum = 0
	b, _ := json.Marshal(m)
	return crc32.Checksum(b, castagnoli)
}

func (m meta) encode() []byte {
	m.Checksum = m.sum()
	b, _ := json.Marshal(m)
	return append(b, '\n')
}

// decodeMeta parses and checks a meta file's bytes. legacy reports a file
// of version 1, which has no checksum.
func decodeMeta(path string, b []byte) (m meta, legacy bool, err error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil {
		return meta{}, false, fmt.Errorf("%w: meta file %s does not parse: %v", ErrCorrupt, path, err)
	}
	if d.More() {
		return meta{}, false, fmt.Errorf("%w: meta file %s has data after its record", ErrCorrupt, path)
	}
	switch {
	case m.Version == 0 && m.Checksum == 0:
		legacy = true
	case m.Version != metaVersion && m.Version != 2:
		return meta{}, false, fmt.Errorf("%w: meta file %s has version %d; this build reads versions 1 to %d", ErrFormat, path, m.Version, metaVersion)
	case m.Checksum != m.sum():
		return meta{}, false, fmt.Errorf("%w: meta file %s fails its checksum (crc32c %08x, stored %08x)", ErrCorrupt, path, m.sum(), m.Checksum)
	}
	if m.Format != dataFormat && m.Format != format1 && m.Format != formatTxn {
		return meta{}, false, fmt.Errorf("%w: %s says data format %d; this build reads formats %d to %d", ErrFormat, path, m.Format, format1, formatTxn)
	}
	if m.Hash != partitioner.Hash {
		return meta{}, false, fmt.Errorf("%w: %s says hash %q; this build uses %q", ErrHashMismatch, path, m.Hash, partitioner.Hash)
	}
	if m.Partitions < 1 || m.Partitions > partitioner.MaxPartitions {
		return meta{}, false, fmt.Errorf("%w: meta file %s says %d partitions (want 1..%d)", ErrCorrupt, path, m.Partitions, partitioner.MaxPartitions)
	}
	if m.ID != "" && (m.Version < 3 || len(m.ID) > 255) {
		return meta{}, false, fmt.Errorf("%w: meta file %s has an id of %d bytes at version %d", ErrCorrupt, path, len(m.ID), m.Version)
	}
	return m, legacy, nil
}

// readMeta reads and checks dir's meta file. A directory without one fails
// with an error wrapping fs.ErrNotExist when it holds no data (it is new),
// and with ErrCorrupt when it does: its partition count is then unknown. A
// version 1 file, which has no checksum, is checked against the partition
// directories that exist.
func readMeta(dir string) (m meta, legacy bool, err error) {
	path := filepath.Join(dir, metaFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if data, derr := dataEntries(dir); derr != nil {
			return meta{}, false, derr
		} else if len(data) > 0 {
			return meta{}, false, missingMeta(dir, data)
		}
		return meta{}, false, err
	}
	if err != nil {
		return meta{}, false, err
	}
	if m, legacy, err = decodeMeta(path, b); err != nil || !legacy || m.Format != format1 {
		return m, legacy, err
	}
	// Without a checksum, a damaged count shows only against the
	// partitions that hold data.
	if n, err := PartitionsOnDisk(dir); err != nil {
		return meta{}, false, err
	} else if n > m.Partitions {
		return meta{}, false, fmt.Errorf("%w: meta file %s says %d partitions but %s exists",
			ErrCorrupt, path, m.Partitions, filepath.Base(format1Dir(dir, n-1)))
	}
	return m, true, nil
}

// dataEntries lists what dir holds besides a legacy lock file and a meta
// file being written: a directory with none is new.
func dataEntries(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if name := e.Name(); name != legacyLockFile && name != metaFile+".tmp" {
			out = append(out, name)
		}
	}
	return out, nil
}

// planMeta reads dir's meta file, or makes one for a new directory,
// checks it against partitions (0: take the directory's own, or the
// default for a new one) and returns it, writing nothing. write reports a
// meta file that Open writes once it has decided to open: a new
// directory's, one of an older version, or one without an ID (which it
// gets here).
func planMeta(dir string, partitions int) (m meta, write bool, err error) {
	m, _, err = readMeta(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if partitions == 0 {
			partitions = DefaultOptions().Partitions
		}
		m = meta{Version: metaVersion, Format: dataFormat, Partitions: partitions, Hash: partitioner.Hash, ID: newID()}
		return m, true, nil
	}
	if err != nil {
		return meta{}, false, err
	}
	if partitions != 0 && m.Partitions != partitions {
		return meta{}, false, fmt.Errorf("%w: %s was created with %d partitions, opened with %d", ErrPartitionMismatch, dir, m.Partitions, partitions)
	}
	if m.Version != metaVersion || m.ID == "" {
		write = true
		m.Version = metaVersion
		if m.ID == "" {
			m.ID = newID()
		}
	}
	return m, write, nil
}

// writeMeta writes m as dir's meta file, atomically.
func writeMeta(dir string, m meta) error {
	path := filepath.Join(dir, metaFile)
	if err := writeFileAtomic(path, m.encode()); err != nil {
		return fmt.Errorf("coordinator: writing %s: %w", path, err)
	}
	return nil
}

// missingMeta is the error for a directory whose meta file is missing,
// though it holds data (the names in data). A directory that holds
// neither a journal nor snapshots nor the logs of format 1 is no data
// directory at all, and says so.
func missingMeta(dir string, data []string) error {
	path := filepath.Join(dir, metaFile)
	ours := 0
	for _, name := range data {
		if name == journalDir || name == "snapshots" || isFormat1Dir(name) {
			ours++
		}
	}
	if ours == 0 {
		return fmt.Errorf("%w: %s has no %s, journal or snapshots (it holds %s)",
			ErrNotDataDir, dir, metaFile, plural(len(data), "other entry", "other entries"))
	}
	return fmt.Errorf("%w: meta file %s is missing but the directory holds offsetd data: its partition count is unknown",
		ErrCorrupt, path)
}

// isFormat1Dir reports whether name is that of a format-1 partition
// directory (p0000, …).
func isFormat1Dir(name string) bool {
	var i int
	n, err := fmt.Sscanf(name, "p%04d", &i)
	return err == nil && n == 1 && name == fmt.Sprintf("p%04d", i)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// PartitionsOnDisk returns one more than the highest partition number that
// has a directory of format 1 (p0000, …) in dir (0 if none does), for
// tools that inspect such a data directory whose meta file is damaged.
func PartitionsOnDisk(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	high := -1
	for _, e := range entries {
		var i int
		if n, err := fmt.Sscanf(e.Name(), "p%04d", &i); err == nil && n == 1 && e.IsDir() && e.Name() == filepath.Base(format1Dir(dir, i)) {
			high = max(high, i)
		}
	}
	return high + 1, nil
}

// ReadPartitions returns the partition count a data directory was created
// with, so that tools can open it without being told. It checks the meta
// file as Open does: a new directory fails with an error wrapping
// fs.ErrNotExist; a missing meta file over data, or a damaged one, with
// ErrCorrupt; another hash with ErrHashMismatch; another format with
// ErrFormat.
func ReadPartitions(dir string) (int, error) {
	m, _, err := readMeta(dir)
	if err != nil {
		return 0, err
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
	return log.SyncDir(filepath.Dir(path))
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
	// carry none; -1 for the journal, whose records carry their own (as
	// log.Inspect takes it).
	Partition int
}

// ReadLayout reads the meta file of a data directory and returns where its
// files are.
//
// It checks the meta file as Open does (see ReadPartitions).
func ReadLayout(dir string) (Layout, error) {
	m, _, err := readMeta(dir)
	if err != nil {
		return Layout{}, err
	}
	return layoutOf(dir, m.Format, m.Partitions)
}

// layoutOf names the files of a data directory of the given format.
func layoutOf(dir string, format, partitions int) (Layout, error) {
	l := Layout{Format: format, Partitions: partitions}
	switch format {
	case format1:
		for i := range partitions {
			l.Logs = append(l.Logs, LogDir{Dir: format1Dir(dir, i), Partition: i})
			l.Snapshots = append(l.Snapshots, format1Dir(dir, i))
		}
	case dataFormat, formatTxn:
		l.Logs = []LogDir{{Dir: JournalDir(dir), Partition: -1}}
		for i := range partitions {
			l.Snapshots = append(l.Snapshots, SnapshotDir(dir, i))
		}
	default:
		return Layout{}, fmt.Errorf("%w: %s: data format %d", ErrFormat, metaFile, format)
	}
	return l, nil
}

// LayoutOnDisk guesses where the files of a data directory are from what
// it holds, for tools that inspect one whose meta file is missing or
// damaged: a journal means format 2, with as many partitions as snapshot
// directories; otherwise format 1, with PartitionsOnDisk partitions.
func LayoutOnDisk(dir string) (Layout, error) {
	if _, err := os.Stat(JournalDir(dir)); err == nil {
		entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Layout{}, err
		}
		n := 0
		for _, e := range entries {
			var i int
			if k, err := fmt.Sscanf(e.Name(), "p%04d", &i); err == nil && k == 1 && e.IsDir() {
				n = max(n, i+1)
			}
		}
		return layoutOf(dir, dataFormat, n)
	}
	n, err := PartitionsOnDisk(dir)
	if err != nil {
		return Layout{}, err
	}
	return layoutOf(dir, format1, n)
}
