package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/offsetd/offsetd/internal/dirhash"
)

const testPartition = 7

// record is an entry as Replay or Inspect delivered it, copied.
type record struct {
	Index     uint64
	Partition int
	Type      byte
	Payload   string
}

// testEntry is entry i of a deterministic sequence, of varied sizes.
func testEntry(i int) Entry {
	p := fmt.Appendf(nil, "entry %d ", i)
	p = append(p, bytes.Repeat([]byte{byte('a' + i%26)}, i*7%40)...)
	return Entry{Partition: i % 7, Type: byte(i%250 + 1), Payload: p}
}

func testEntries(from, n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i] = testEntry(from + i)
	}
	return es
}

// records are the records entries become when appended from index first.
func records(first uint64, entries []Entry) []record {
	rs := make([]record, len(entries))
	for i, e := range entries {
		rs[i] = record{first + uint64(i), e.Partition, e.Type, string(e.Payload)}
	}
	return rs
}

// testLogger writes to the test's output and remembers every record,
// with the attributes of the logger it was logged through.
type testLogger struct {
	mu      sync.Mutex
	records []slog.Record
}

func newTestLogger(t testing.TB) (*slog.Logger, *testLogger) {
	rec := &testLogger{}
	h := slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(&recordingHandler{rec: rec, Handler: h}), rec
}

type recordingHandler struct {
	rec   *testLogger
	attrs []slog.Attr
	slog.Handler
}

func (h *recordingHandler) Handle(ctx context.Context, r slog.Record) error {
	c := r.Clone()
	c.AddAttrs(h.attrs...)
	h.rec.mu.Lock()
	h.rec.records = append(h.rec.records, c)
	h.rec.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordingHandler{h.rec, append(slices.Clip(h.attrs), as...), h.Handler.WithAttrs(as)}
}

// find returns the attributes of the first record with msg, or nil.
func (h *testLogger) find(msg string) map[string]slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if r.Message == msg {
			m := map[string]slog.Value{}
			r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
			return m
		}
	}
	return nil
}

func testOptions(t testing.TB, segmentSize int) Options {
	logger, _ := newTestLogger(t)
	return Options{SegmentSize: segmentSize, Partition: testPartition, Logger: logger}
}

func mustOpen(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// crash removes the clean-close marker of a closed log in dir: what a crash
// leaves instead of a Close, once the syncs are done.
// crash makes dir, a log closed cleanly, look like one a crash left with
// everything synced: no clean-close marker, and a sync ring with no lap
// (Close synced what the ring held). Tests of the ring's own lap leave it.
func crash(t interface{ Fatal(...any) }, dir string) {
	if err := os.Remove(filepath.Join(dir, cleanName)); err != nil {
		t.Fatal(err)
	}
	clearRing(t, dir)
}

// clearRing overwrites the sync ring's first record, so that it holds no lap.
func clearRing(t interface{ Fatal(...any) }, dir string) {
	f, err := os.OpenFile(filepath.Join(dir, ringName), os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return // an UnsafeNoSync log has none
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, ringHeader), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustClose(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// mustAppend appends entries, each as a batch of its own (so that, in a
// log that starts empty, a record's index is its batch's wal index, which
// names segment files), and checks they got the next indexes.
func mustAppend(t testing.TB, l *Log, entries []Entry) []record {
	t.Helper()
	var rs []record
	for _, e := range entries {
		rs = append(rs, mustAppendBatch(t, l, []Entry{e})...)
	}
	return rs
}

// mustAppendBatch appends entries as one batch and checks they got the
// next indexes.
func mustAppendBatch(t testing.TB, l *Log, entries []Entry) []record {
	t.Helper()
	want := l.LastIndex() + 1
	first, last, err := l.Append(entries)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if first != want || last != want+uint64(len(entries))-1 {
		t.Fatalf("Append gave %d-%d, want %d-%d", first, last, want, want+uint64(len(entries))-1)
	}
	if l.LastIndex() != last {
		t.Fatalf("LastIndex = %d after Append gave %d", l.LastIndex(), last)
	}
	return records(first, entries)
}

func collect(rs *[]record) func(uint64, Entry) error {
	return func(index uint64, e Entry) error {
		*rs = append(*rs, record{index, e.Partition, e.Type, string(e.Payload)})
		return nil
	}
}

func replayAll(t testing.TB, l *Log, from uint64) []record {
	t.Helper()
	var rs []record
	if err := l.Replay(from, collect(&rs)); err != nil {
		t.Fatalf("Replay(%d): %v", from, err)
	}
	return rs
}

func checkRecords(t testing.TB, what string, got, want []record) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %d records, want %d\ngot  %v\nwant %v", what, len(got), len(want), clip(got), clip(want))
	}
}

func clip(rs []record) []record {
	if len(rs) > 6 {
		return append(slices.Clone(rs[:3]), rs[len(rs)-3:]...)
	}
	return rs
}

// segmentFiles lists the plain segment files of dir.
func segmentFiles(t testing.TB, dir string) []segmentFile {
	t.Helper()
	st, err := readDirState(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st.segments
}

// segmentHolding returns the first index of the segment that holds index,
// the last one starting at or before it: where TruncateFront(index) moves
// the front.
func segmentHolding(segs []segmentFile, index uint64) uint64 {
	front := segs[0].index
	for _, s := range segs {
		if s.index <= index {
			front = s.index
		}
	}
	return front
}

func segmentStarts(segs []segmentFile) []uint64 {
	starts := make([]uint64, len(segs))
	for i, s := range segs {
		starts[i] = s.index
	}
	return starts
}

func mustReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	des, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(from, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, de.Name()), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// hashDir describes every file and directory under dir (dirhash.Tree).
func hashDir(t testing.TB, dir string) string {
	t.Helper()
	h, err := dirhash.Tree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
