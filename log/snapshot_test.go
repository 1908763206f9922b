package log

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

func writeSnapshot(t *testing.T, l *Snapshots, index uint64, entries []Entry) {
	t.Helper()
	_, err := l.Write(index, func(w io.Writer) error {
		enc := NewSnapshotEncoder(w)
		for _, e := range entries {
			if err := enc.Add(e.Type, e.Payload); err != nil {
				return err
			}
		}
		return enc.Finish()
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readAll(l *Snapshots, index uint64) ([]Entry, error) {
	var got []Entry
	err := l.Restore(index, func(r io.Reader) error {
		return DecodeSnapshot(r, func(typ byte, payload []byte) error {
			got = append(got, Entry{Type: typ, Payload: slices.Clone(payload)})
			return nil
		})
	})
	return got, err
}

func TestSnapshotRoundTrip(t *testing.T) {
	l, err := OpenSnapshots(t.TempDir(), testPartition)
	if err != nil {
		t.Fatal(err)
	}
	entries := testEntries(0, 500)
	entries = append(entries, Entry{Type: 9, Payload: make([]byte, 70000)}) // a multi-byte length
	writeSnapshot(t, l, 42, entries)
	writeSnapshot(t, l, 7, entries[:3])
	writeSnapshot(t, l, 100, nil) // an empty state is a valid snapshot
	if idx, _ := l.List(); !slices.Equal(idx, []uint64{100, 42, 7}) {
		t.Fatalf("Snapshots = %v, want newest first", idx)
	}
	got, err := readAll(l, 42)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(entries) {
		t.Fatalf("read %d records, wrote %d", len(got), len(entries))
	}
	for i := range got {
		if got[i].Type != entries[i].Type || string(got[i].Payload) != string(entries[i].Payload) {
			t.Fatalf("record %d differs", i)
		}
	}
	if got, err := readAll(l, 100); err != nil || len(got) != 0 {
		t.Fatalf("empty snapshot: %v %v", got, err)
	}
	index, n, err := ReadSnapshotFile(filepath.Join(l.Dir(), snapshotName(42)), nil)
	if err != nil || index != 42 || n != len(entries) {
		t.Fatalf("ReadSnapshotFile = %d %d %v", index, n, err)
	}
	writeSnapshot(t, l, 7, entries[:1])
	writeSnapshot(t, l, 60, entries[:1])
	if err := l.Prune(100, 42); err != nil {
		t.Fatal(err)
	}
	if idx, _ := l.List(); !slices.Equal(idx, []uint64{100, 42}) {
		t.Fatalf("after Prune(100, 42): %v", idx)
	}
	if err := l.Prune(100, 0); err != nil {
		t.Fatal(err)
	}
	if idx, _ := l.List(); !slices.Equal(idx, []uint64{100}) {
		t.Fatalf("after Prune(100, 0): %v", idx)
	}
}

// TestSnapshotDamage cuts a snapshot at many lengths and flips a bit at many
// offsets: every damaged snapshot is rejected with ErrCorrupt naming its file.
func TestSnapshotDamage(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenSnapshots(dir, testPartition)
	if err != nil {
		t.Fatal(err)
	}
	writeSnapshot(t, l, 5, testEntries(0, 40))
	path := filepath.Join(dir, snapshotName(5))
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o640); err != nil {
			t.Fatal(err)
		}
		_, err := readAll(l, 5)
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.File != snapshotName(5) || ce.Partition != testPartition {
			t.Fatalf("%s: err = %v, want a CorruptError naming %s", what, err, snapshotName(5))
		}
	}
	for n := 0; n < len(good); n += 1 + n/8 {
		check("cut", good[:n])
	}
	check("cut before the last byte", good[:len(good)-1])
	check("trailing garbage", append(slices.Clone(good), 1))
	for off := 0; off < len(good); off += 1 + off/16 {
		b := slices.Clone(good)
		b[off] ^= 0x04
		check("bit flip", b)
	}
}

func TestSnapshotAbortAndLeftovers(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenSnapshots(dir, testPartition)
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.Create(3)
	if err != nil {
		t.Fatal(err)
	}
	NewSnapshotEncoder(w).Add(1, []byte("x"))
	w.Abort()
	// A crash mid-snapshot leaves a temporary file: never listed, removed by
	// the next snapshot.
	if err := os.WriteFile(filepath.Join(dir, snapshotName(4)+snapTemp), []byte("half"), 0o640); err != nil {
		t.Fatal(err)
	}
	if idx, _ := l.List(); len(idx) != 0 {
		t.Fatalf("Snapshots = %v, want none", idx)
	}
	writeSnapshot(t, l, 6, nil)
	left, _ := filepath.Glob(filepath.Join(dir, "*"+snapTemp))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	// Snapshot files do not disturb a log in the same directory.
	lg, err := Open(dir, Options{Partition: testPartition})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := lg.Append(testEntries(0, 3)); err != nil {
		t.Fatal(err)
	}
	lg.Close()
	lg, err = Open(dir, Options{Partition: testPartition})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	if lg.LastIndex() != 3 {
		t.Fatalf("LastIndex = %d after reopen beside a snapshot", lg.LastIndex())
	}
	rep, err := Inspect(dir, -1, nil)
	if err != nil || rep.Records != 3 {
		t.Fatalf("Inspect beside a snapshot = %+v %v", rep, err)
	}
}

// Snapshots written side by side, through two handles of one directory
// (a partition's own and one a Raft leader sent), even of one index: the
// second's Create takes none of the first's files for leftovers, and each
// commits whole. A leftover of a crash is still removed.
func TestSnapshotWritersSideBySide(t *testing.T) {
	dir := t.TempDir()
	own, err := OpenSnapshots(dir, testPartition)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := OpenSnapshots(dir+"/.", testPartition) // another path to it
	if err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(dir, snapshotName(2)+snapTemp)
	if err := os.WriteFile(crashed, []byte("half"), 0o640); err != nil {
		t.Fatal(err)
	}
	entries := testEntries(0, 50)
	var ws []*SnapshotWriter
	var encs []*SnapshotEncoder
	for _, c := range []struct {
		l     *Snapshots
		index uint64
	}{{own, 5}, {sent, 9}, {own, 9}} {
		w, err := c.l.Create(c.index)
		if err != nil {
			t.Fatal(err)
		}
		enc := NewSnapshotEncoder(w)
		for _, e := range entries[:25] {
			if err := enc.Add(e.Type, e.Payload); err != nil {
				t.Fatal(err)
			}
		}
		ws, encs = append(ws, w), append(encs, enc)
	}
	if _, err := os.Stat(crashed); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a crash's leftover is still there: %v", err)
	}
	for i, w := range ws {
		for _, e := range entries[25:] {
			if err := encs[i].Add(e.Type, e.Payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := encs[i].Finish(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if idx, _ := own.List(); !slices.Equal(idx, []uint64{9, 5}) {
		t.Fatalf("Snapshots = %v, want [9 5]", idx)
	}
	for _, index := range []uint64{5, 9} {
		got, err := readAll(own, index)
		if err != nil || len(got) != len(entries) {
			t.Fatalf("snapshot %d: %d entries, %v", index, len(got), err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*"+snapTemp)); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestSnapshotHugeLength gives a snapshot record a length far past the end
// of the file (the length is not under the checksum): it must be rejected
// as damage without allocating that much.
func TestSnapshotHugeLength(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenSnapshots(dir, testPartition)
	if err != nil {
		t.Fatal(err)
	}
	writeSnapshot(t, l, 3, testEntries(0, 2))
	path := filepath.Join(dir, snapshotName(3))
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := append(slices.Clone(good[:snapHeader]), binary.AppendUvarint(nil, 1<<30)...)
	bad = append(bad, good[snapHeader+1:]...)
	if err := os.WriteFile(path, bad, 0o640); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = readAll(l, 3)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("reading the damaged snapshot allocated %d bytes", grew)
	}
}

// TestSnapshotOwner: a snapshot names its owner in its header; Read
// refuses one whose header names another partition or data directory
// before it hands over a record, and still reads a header of version 1,
// which names none.
func TestSnapshotOwner(t *testing.T) {
	dir := t.TempDir()
	sdir := filepath.Join(dir, "p3")
	owner := SnapshotOwner{Partition: 3, Partitions: 8, Hash: "fnv1a", Dir: "0123456789abcdef"}
	l, err := NewSnapshots(sdir, owner)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := l.List(); err != nil || len(list) != 0 {
		t.Fatalf("List of a directory not made yet = %v, %v", list, err)
	}
	if _, err := os.Stat(sdir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("NewSnapshots made its directory: %v", err)
	}
	writeSnapshot(t, l, 42, testEntries(0, 3))
	if got, err := readAll(l, 42); err != nil || len(got) != 3 {
		t.Fatalf("read back by its owner: %d records, %v", len(got), err)
	}
	if _, got, n, err := ReadSnapshotFileOwner(SnapshotPath(sdir, 42), nil); err != nil || got == nil || *got != owner || n != 3 {
		t.Fatalf("ReadSnapshotFileOwner = %v, %d, %v; want %v", got, n, err, owner)
	}
	for _, other := range []SnapshotOwner{
		{Partition: 4, Partitions: 8, Hash: "fnv1a", Dir: owner.Dir},
		{Partition: 3, Partitions: 16, Hash: "fnv1a", Dir: owner.Dir},
		{Partition: 3, Partitions: 8, Hash: "other", Dir: owner.Dir},
		{Partition: 3, Partitions: 8, Hash: "fnv1a", Dir: "fedcba9876543210"},
	} {
		o, err := NewSnapshots(sdir, other)
		if err != nil {
			t.Fatal(err)
		}
		called := false
		err = o.Restore(42, func(io.Reader) error { called = true; return nil })
		var ce *CorruptError
		if !errors.Is(err, ErrSnapshotOwner) || !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.File != snapshotName(42) || called {
			t.Fatalf("Read as %v = %v (records seen: %v); want ErrSnapshotOwner naming %s", other, err, called, snapshotName(42))
		}
	}
	v1, err := OpenSnapshots(sdir, 3)
	if err != nil {
		t.Fatal(err)
	}
	writeSnapshot(t, v1, 7, testEntries(0, 2))
	if got, err := readAll(l, 7); err != nil || len(got) != 2 {
		t.Fatalf("a version-1 snapshot read by an owner: %d records, %v", len(got), err)
	}
	if _, got, _, err := ReadSnapshotFileOwner(SnapshotPath(sdir, 7), nil); err != nil || got != nil {
		t.Fatalf("ReadSnapshotFileOwner of version 1 = %v, %v; want no owner", got, err)
	}
	if _, err := NewSnapshots(sdir, SnapshotOwner{Partition: 8, Partitions: 8}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NewSnapshots of partition 8 of 8: %v", err)
	}
}

// FuzzSnapshotHeader feeds arbitrary bytes as a snapshot's header:
// readSnapHeader never panics, and what it accepts is exactly what
// appendSnapHeader writes for its result.
func FuzzSnapshotHeader(f *testing.F) {
	f.Add(appendSnapHeader(nil, 42, nil))
	f.Add(appendSnapHeader(nil, 7, &SnapshotOwner{Partition: 3, Partitions: 8, Hash: "xxhash64", Dir: "0123456789abcdef"}))
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		index, owner, n, err := readSnapHeader(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if re := appendSnapHeader(nil, index, owner); !bytes.Equal(re, b[:n]) {
			t.Fatalf("accepted % x, which re-encodes as % x", b[:n], re)
		}
	})
}

// A snapshot sent by another replica (another data directory, its owner in
// the header) is received whole, its header then naming the receiver; a
// damaged one, one covering another index, or one the check refuses
// leaves no file at all, not even a temporary one.
func TestSnapshotReceive(t *testing.T) {
	sender, err := NewSnapshots(t.TempDir(), SnapshotOwner{Partition: 1, Partitions: 4, Hash: "h", Dir: "leader"})
	if err != nil {
		t.Fatal(err)
	}
	entries := testEntries(0, 40)
	writeSnapshot(t, sender, 7, entries)
	f, size, err := sender.Open(7)
	if err != nil {
		t.Fatal(err)
	}
	sent := make([]byte, size)
	if _, err := io.ReadFull(f, sent); err != nil {
		t.Fatal(err)
	}
	f.Close()

	dir := t.TempDir()
	owner := SnapshotOwner{Partition: 1, Partitions: 4, Hash: "h", Dir: "follower"}
	recv, err := NewSnapshots(dir, owner)
	if err != nil {
		t.Fatal(err)
	}
	if err := recv.Receive(7, bytes.NewReader(sent)); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(recv, 7) // Restore checks the header names the receiver
	if err != nil || len(got) != len(entries) {
		t.Fatalf("received snapshot: %d entries, %v", len(got), err)
	}
	if err := os.Remove(filepath.Join(dir, snapshotName(7))); err != nil {
		t.Fatal(err)
	}

	damaged := slices.Clone(sent)
	damaged[len(damaged)/2] ^= 0x40
	for _, c := range []struct {
		name    string
		index   uint64
		data    []byte
		foreign bool
	}{
		{"damaged", 7, damaged, false},
		{"cut short", 7, sent[:len(sent)-3], false},
		{"another index", 8, sent, false},
		{"another partition", 7, foreign(t, SnapshotOwner{Partition: 2, Partitions: 4, Hash: "h", Dir: "leader"}, entries), true},
		{"another partition count", 7, foreign(t, SnapshotOwner{Partition: 1, Partitions: 8, Hash: "h", Dir: "leader"}, entries), true},
		{"another hash", 7, foreign(t, SnapshotOwner{Partition: 1, Partitions: 4, Hash: "g", Dir: "leader"}, entries), true},
	} {
		err := recv.Receive(c.index, bytes.NewReader(c.data))
		if err == nil {
			t.Fatalf("%s: received", c.name)
		}
		if !errors.Is(err, ErrCorrupt) || c.foreign != errors.Is(err, ErrSnapshotOwner) {
			t.Fatalf("%s: %v", c.name, err)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("%s: files left: %v", c.name, left)
		}
	}
}

// foreign returns the bytes of a snapshot of index 7 holding entries,
// whose header names owner.
func foreign(t *testing.T, owner SnapshotOwner, entries []Entry) []byte {
	t.Helper()
	l, err := NewSnapshots(t.TempDir(), owner)
	if err != nil {
		t.Fatal(err)
	}
	writeSnapshot(t, l, 7, entries)
	b, err := os.ReadFile(SnapshotPath(l.Dir(), 7))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeSnapshot feeds arbitrary bytes as a snapshot's content:
// DecodeSnapshot never panics, every error is ErrCorrupt, and what it
// accepts holds the records SnapshotEncoder writes again, byte for byte
// but for the lengths' varints (a longer form of a length is read too).
func FuzzDecodeSnapshot(f *testing.F) {
	for _, entries := range [][]Entry{nil, testEntries(0, 3), {{Type: 9, Payload: make([]byte, 300)}}} {
		var b bytes.Buffer
		enc := NewSnapshotEncoder(&b)
		for _, e := range entries {
			if err := enc.Add(e.Type, e.Payload); err != nil {
				f.Fatal(err)
			}
		}
		if err := enc.Finish(); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var records, again []Entry
		collect := func(to *[]Entry) func(byte, []byte) error {
			return func(typ byte, payload []byte) error {
				*to = append(*to, Entry{Type: typ, Payload: slices.Clone(payload)})
				return nil
			}
		}
		err := DecodeSnapshot(bytes.NewReader(b), collect(&records))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		var re bytes.Buffer
		enc := NewSnapshotEncoder(&re)
		for _, e := range records {
			if err := enc.Add(e.Type, e.Payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Finish(); err != nil {
			t.Fatal(err)
		}
		if re.Len() > len(b) {
			t.Fatalf("accepted % x, which re-encodes longer, as % x", b, re.Bytes())
		}
		if err := DecodeSnapshot(&re, collect(&again)); err != nil || !slices.EqualFunc(records, again, func(a, b Entry) bool {
			return a.Type == b.Type && bytes.Equal(a.Payload, b.Payload)
		}) {
			t.Fatalf("accepted % x, whose records do not read back: %v", b, err)
		}
	})
}
