package log

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzCleanMarker feeds arbitrary bytes as a clean-close marker:
// decodeCleanMarker never panics, refuses with ErrCorrupt naming the
// file, and what it accepts is exactly what encode writes for its result.
func FuzzCleanMarker(f *testing.F) {
	f.Add(cleanMarker{lastBatch: 7, lastRecord: 40, tailSize: 512}.encode())
	f.Add(cleanMarker{}.encode())
	f.Add([]byte(cleanMagic))
	f.Add(make([]byte, cleanSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeCleanMarker(b)
		if err != nil {
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.File != cleanName {
				t.Fatalf("error %v is not a CorruptError naming %s", err, cleanName)
			}
			return
		}
		if re := m.encode(); !bytes.Equal(re, b) {
			t.Fatalf("accepted % x, which re-encodes as % x", b, re)
		}
	})
}
