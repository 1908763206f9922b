package log

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(t, 150))
	want := mustAppend(t, l, testEntries(0, 40))
	front := segmentHolding(segmentFiles(t, dir), 9)
	if front == 1 {
		t.Fatal("index 9 is in the first segment; the test wants TruncateFront to remove one")
	}
	if err := l.TruncateFront(9); err != nil {
		t.Fatal(err)
	}
	want = want[front-1:]
	mustClose(t, l)

	var got []record
	rep, err := Inspect(dir, -1, collect(&got))
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	checkRecords(t, "Inspect", got, want)
	segs := segmentFiles(t, dir)
	var size int64
	for _, s := range segs {
		fi, err := os.Stat(s.path)
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	if rep.Segments != len(segs) || rep.Records != len(want) || rep.Bytes != size ||
		rep.FirstIndex != front || rep.LastIndex != 40 || rep.TornTailBytes != 0 || len(rep.Leftovers) != 0 {
		t.Fatalf("Inspect = %+v; want %d segments, %d entries, %d bytes, indexes %d-40", rep, len(segs), len(want), size, front)
	}

	stop := errors.New("stop")
	if _, err := Inspect(dir, -1, func(uint64, Entry) error { return stop }); err != stop {
		t.Fatalf("Inspect with a failing callback: err = %v, want it as is", err)
	}
	if rep, err := Inspect(t.TempDir(), testPartition, nil); err != nil || rep.Segments != 0 || rep.FirstIndex != 1 || rep.LastIndex != 0 {
		t.Fatalf("Inspect of an empty directory = %+v, %v", rep, err)
	}
	if _, err := Inspect(filepath.Join(dir, "missing"), testPartition, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Inspect of a missing directory: err = %v", err)
	}
}
