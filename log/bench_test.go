package log

import (
	"bytes"
	"fmt"
	"testing"
)

const benchPayloadSize = 60 // about one offset commit record

func benchEntries(n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{Type: 1, Payload: bytes.Repeat([]byte{byte(i)}, benchPayloadSize)}
	}
	return es
}

// BenchmarkAppend measures one batch per op: with fsync it is one fsync
// per batch, the cost group commit amortises.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, size := range []int{1, 32} {
			b.Run(fmt.Sprintf("sync=%v/batch=%d", sync, size), func(b *testing.B) {
				l, err := Open(b.TempDir(), Options{UnsafeNoSync: !sync, Logger: discardLogger})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				batch := benchEntries(size)
				b.ReportAllocs()
				b.SetBytes(int64(size * benchPayloadSize))
				for b.Loop() {
					if _, _, err := l.Append(batch); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}

// BenchmarkReplay replays a million 60-byte entries (about 67 MB in 16
// segments of 4 MiB) per op.
func BenchmarkReplay(b *testing.B) {
	const n = 1 << 20
	l, err := Open(b.TempDir(), Options{UnsafeNoSync: true, Logger: discardLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := benchEntries(1024)
	for range n / len(batch) {
		if _, _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	var sum int
	fn := func(index uint64, typ byte, payload []byte) error {
		sum += len(payload)
		return nil
	}
	b.ReportAllocs()
	b.SetBytes(n * benchPayloadSize)
	for b.Loop() {
		sum = 0
		if err := l.Replay(1, fn); err != nil {
			b.Fatal(err)
		}
		if sum != n*benchPayloadSize {
			b.Fatalf("replayed %d payload bytes, want %d", sum, n*benchPayloadSize)
		}
	}
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkDecodeFrame(b *testing.B) {
	frame := appendFrame(nil, 1, bytes.Repeat([]byte{'x'}, benchPayloadSize))
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, _, err := decodeFrame(frame); err != nil {
			b.Fatal(err)
		}
	}
}
