package log

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// The clean-close marker: Close writes it once everything is synced, Open
// checks the directory against it and removes it before the first write.
// While it exists nothing can be in flight, so nothing at the end of the
// log can be a torn write: damage there is corruption, and the log must
// end exactly where the marker says. log/doc.go draws it.
const (
	cleanName    = "CLEAN"
	cleanMagic   = "OFFCLEAN"
	cleanVersion = 1
	cleanSize    = len(cleanMagic) + 1 + 3*8 + 4
)

type cleanMarker struct {
	lastBatch  uint64
	lastRecord uint64
	tailSize   int64
}

// writeCleanMarker writes the marker through a synced temporary file and a
// rename, then syncs the directory.
func writeCleanMarker(dir string, m cleanMarker) error {
	b := m.encode()
	path := filepath.Join(dir, cleanName)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(dir)
}

// readCleanMarker returns the marker in dir, nil if there is none, or an
// ErrCorrupt error if it is damaged (it is written whole or not at all).
// It changes nothing: a CLEAN.tmp that a crashed Close left is Open's to
// remove.
func readCleanMarker(dir string) (*cleanMarker, error) {
	b, err := os.ReadFile(filepath.Join(dir, cleanName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeCleanMarker(b)
}

// encode returns the marker's bytes.
func (m cleanMarker) encode() []byte {
	b := make([]byte, 0, cleanSize)
	b = append(b, cleanMagic...)
	b = append(b, cleanVersion)
	b = binary.LittleEndian.AppendUint64(b, m.lastBatch)
	b = binary.LittleEndian.AppendUint64(b, m.lastRecord)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.tailSize))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeCleanMarker checks a marker's bytes and returns it, or an
// ErrCorrupt error naming the file.
func decodeCleanMarker(b []byte) (*cleanMarker, error) {
	if len(b) != cleanSize || string(b[:len(cleanMagic)]) != cleanMagic || b[len(cleanMagic)] != cleanVersion ||
		crc32.Checksum(b[:cleanSize-4], castagnoli) != binary.LittleEndian.Uint32(b[cleanSize-4:]) {
		return nil, &CorruptError{File: cleanName, Err: errCleanMarker}
	}
	p := b[len(cleanMagic)+1:]
	return &cleanMarker{
		lastBatch:  binary.LittleEndian.Uint64(p),
		lastRecord: binary.LittleEndian.Uint64(p[8:]),
		tailSize:   int64(binary.LittleEndian.Uint64(p[16:])),
	}, nil
}

// removeCleanMarker removes the marker and syncs the directory, so that a
// crash from now on is not taken for a clean close.
func removeCleanMarker(dir string) error {
	if err := os.Remove(filepath.Join(dir, cleanName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return SyncDir(dir)
}
