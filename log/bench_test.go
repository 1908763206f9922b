package log

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
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
	fn := func(index uint64, e Entry) error {
		sum += len(e.Payload)
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
	frame := appendFrame(nil, frameRecord, 1, bytes.Repeat([]byte{'x'}, benchPayloadSize))
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, err := decodeFrame(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTruncateFront measures TruncateFront as the partition's writer
// meets it after a snapshot: segments (of the default size) behind an open log, written
// and synced as wal leaves them, and the last index, in the middle of the last
// segment. Each op appends until that many segments sit behind a half-full
// last one, then truncates them away. Writing them takes far longer than
// removing them, so the loop's own timing would measure appends and,
// were the timer stopped around them, would run thousands of 40 MiB
// setups; instead the loop is timed whole, which keeps the run short, and
// ns/op, B/op and allocs/op are overridden with those of the TruncateFront
// calls alone.
func BenchmarkTruncateFront(b *testing.B) {
	for _, segments := range []int{1, 4, 10} {
		b.Run(fmt.Sprintf("segments=%d", segments), func(b *testing.B) {
			dir := b.TempDir()
			l, err := Open(dir, Options{UnsafeNoSync: true, Logger: discardLogger}) // wal syncs each segment it closes
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batch := make([]Entry, 64)
			for i := range batch {
				batch[i] = Entry{Type: 1, Payload: bytes.Repeat([]byte{byte(i)}, 1000)}
			}
			half := int64(l.opts.SegmentSize / 2)
			var took time.Duration
			var allocs, alloced uint64
			var before, after runtime.MemStats
			b.ReportAllocs()
			ops := 0
			for b.Loop() {
				for created := 0; created < segments || l.tailSize < half; {
					start := l.tailStart.Load()
					if _, _, err := l.Append(batch); err != nil {
						b.Fatal(err)
					}
					if l.tailStart.Load() != start {
						created++
					}
				}
				index := l.LastIndex() // in the last segment, which is half full
				runtime.ReadMemStats(&before)
				start := time.Now()
				err := l.TruncateFront(index)
				took += time.Since(start)
				runtime.ReadMemStats(&after)
				if err != nil {
					b.Fatal(err)
				}
				allocs += after.Mallocs - before.Mallocs
				alloced += after.TotalAlloc - before.TotalAlloc
				segs := segmentFiles(b, dir)
				if first, err := segmentFirstIndex(segs[len(segs)-1]); err != nil || len(segs) != 1 || l.FirstIndex() != first {
					b.Fatalf("%d segments left, FirstIndex %d; want only the last one, %d (%v)", len(segs), l.FirstIndex(), first, err)
				}
				ops++
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(ops), "ns/op")
			b.ReportMetric(float64(alloced)/float64(ops), "B/op")
			b.ReportMetric(float64(allocs)/float64(ops), "allocs/op")
		})
	}
}
