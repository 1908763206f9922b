package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTornMultiPageBatch: power fails while a batch of several pages is
// written; the disk kept some of its pages and not others. Whatever
// survived, Open cuts the whole batch (it was never acknowledged) and
// keeps every batch before it; it never refuses to open. A batch damaged
// the same way but followed by a whole later batch is corruption.
func TestTornMultiPageBatch(t *testing.T) {
	const page = 4096
	base := t.TempDir()
	l := mustOpen(t, base, testOptions(t, 1<<20))
	want := mustAppend(t, l, testEntries(0, 5))
	start := l.tailSize
	var big []Entry
	for i := range 6 { // six records of 2 KiB: about three pages
		big = append(big, Entry{Partition: i, Type: 9, Payload: bytes.Repeat([]byte{byte('a' + i)}, 2048)})
	}
	mustAppendBatch(t, l, big)
	end := l.tailSize
	mustClose(t, l)
	crash(t, base)
	if end-start < 3*page {
		t.Fatalf("the big batch is %d bytes, want three pages or more", end-start)
	}
	seg := filepath.Join(base, segmentName(1))
	whole, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// zeroPage zeroes the file's page p: the page never reached the disk,
	// while the file's size (and a later page) did.
	zeroPage := func(b []byte, p int64) []byte {
		clear(b[p*page : min((p+1)*page, int64(len(b)))])
		return b
	}
	firstPage := start / page
	for _, tc := range []struct {
		name  string
		spoil func([]byte) []byte
	}{
		{"first page of the batch lost, later pages kept", func(b []byte) []byte { return zeroPage(b, firstPage+1) }},
		{"middle page lost", func(b []byte) []byte { return zeroPage(b, firstPage+2) }},
		{"last page lost", func(b []byte) []byte { return zeroPage(b, end/page) }},
		{"only the first page written", func(b []byte) []byte { return b[:(firstPage+1)*page] }},
		{"every page but the last lost", func(b []byte) []byte {
			for p := firstPage + 1; p < end/page; p++ {
				zeroPage(b, p)
			}
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, base, dir)
			spoiled := tc.spoil(bytes.Clone(whole))
			if bytes.Equal(spoiled, whole) {
				t.Fatal("the damage changed nothing")
			}
			if err := os.WriteFile(filepath.Join(dir, segmentName(1)), spoiled, 0o640); err != nil {
				t.Fatal(err)
			}
			l := mustOpen(t, dir, testOptions(t, 1<<20))
			if l.LastIndex() != 5 {
				t.Fatalf("LastIndex = %d after cutting the torn batch, want 5", l.LastIndex())
			}
			checkRecords(t, "Replay", replayAll(t, l, 0), want)
			more := mustAppend(t, l, testEntries(100, 2))
			mustClose(t, l)
			l = mustOpen(t, dir, testOptions(t, 1<<20))
			checkRecords(t, "Replay after reopen", replayAll(t, l, 0), append(want[:5:5], more...))
			mustClose(t, l)
		})
	}

	// The same damage with a whole batch after it: acknowledged data was
	// lost, and Open refuses, naming where.
	t.Run("damage followed by a whole batch", func(t *testing.T) {
		dir := t.TempDir()
		copyDir(t, base, dir)
		l := mustOpen(t, dir, testOptions(t, 1<<20))
		mustAppend(t, l, testEntries(200, 1))
		mustClose(t, l)
		crash(t, dir)
		path := filepath.Join(dir, segmentName(1))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, zeroPage(b, firstPage+1), 0o640); err != nil {
			t.Fatal(err)
		}
		_, err = Open(dir, testOptions(t, 1<<20))
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.File != segmentName(1) || ce.Batch != 6 {
			t.Fatalf("Open = %v, want a CorruptError at entry 6 of segment 1", err)
		}
	})
}

// TestDamageAfterCleanClose: after a clean close nothing can be torn, so
// any damage at the end (a cut, zeros, a flipped bit in the last batch,
// bytes past the end) is corruption, and Open refuses, naming where; and
// a journal that ends elsewhere than the marker says is refused too.
func TestDamageAfterCleanClose(t *testing.T) {
	base := t.TempDir()
	l := mustOpen(t, base, testOptions(t, 1<<20))
	mustAppend(t, l, testEntries(0, 8))
	mustClose(t, l)
	seg := segmentName(1)
	whole := mustReadFile(t, filepath.Join(base, seg))
	for _, tc := range []struct {
		name   string
		spoil  func([]byte) []byte
		reason error
	}{
		{"last batch cut", func(b []byte) []byte { return b[:len(b)-3] }, errAfterClean},
		{"bit flip in the last batch", func(b []byte) []byte { b[len(b)-6] ^= 1; return b }, errAfterClean},
		{"zeros past the end", func(b []byte) []byte { return append(b, make([]byte, 100)...) }, errAfterClean},
		{"last batch removed whole", func(b []byte) []byte {
			res, _ := scanEntries(b, 1, 0, 0, 0, 0, 7, nil)
			return b[:res.end]
		}, errCleanDiffers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, base, dir)
			if err := os.WriteFile(filepath.Join(dir, seg), tc.spoil(bytes.Clone(whole)), 0o640); err != nil {
				t.Fatal(err)
			}
			_, err := Open(dir, testOptions(t, 1<<20))
			if !errors.Is(err, ErrCorrupt) || !errors.Is(err, tc.reason) {
				t.Fatalf("Open = %v, want ErrCorrupt for %q", err, tc.reason)
			}
			if _, err := Inspect(dir, -1, nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Inspect = %v, want ErrCorrupt", err)
			}
			// Without the marker (a crash) the same bytes are a torn tail
			// or a lost batch, and open.
			crash(t, dir)
			l := mustOpen(t, dir, testOptions(t, 1<<20))
			mustClose(t, l)
		})
	}
	t.Run("damaged marker", func(t *testing.T) {
		dir := t.TempDir()
		copyDir(t, base, dir)
		path := filepath.Join(dir, cleanName)
		b := mustReadFile(t, path)
		b[10] ^= 1
		if err := os.WriteFile(path, b, 0o640); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, testOptions(t, 1<<20)); !errors.Is(err, errCleanMarker) {
			t.Fatalf("Open with a damaged marker = %v", err)
		}
	})
	t.Run("marker of an earlier close", func(t *testing.T) {
		// The sync ring holds batches past the marker's end: the refusal
		// names both files it judged.
		dir := t.TempDir()
		copyDir(t, base, dir)
		earlier := mustReadFile(t, filepath.Join(dir, cleanName))
		l := mustOpen(t, dir, testOptions(t, 1<<20))
		mustAppend(t, l, testEntries(8, 4))
		mustClose(t, l)
		if err := os.WriteFile(filepath.Join(dir, cleanName), earlier, 0o640); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, testOptions(t, 1<<20))
		if !errors.Is(err, errCleanDiffers) || !strings.Contains(err.Error(), cleanName) || !strings.Contains(err.Error(), ringName) {
			t.Fatalf("Open with the marker of an earlier close = %v, want errCleanDiffers naming %s and %s", err, cleanName, ringName)
		}
	})
	t.Run("marker removed by Open", func(t *testing.T) {
		dir := t.TempDir()
		copyDir(t, base, dir)
		l := mustOpen(t, dir, testOptions(t, 1<<20))
		defer l.Close()
		if _, err := os.Stat(filepath.Join(dir, cleanName)); !os.IsNotExist(err) {
			t.Fatalf("the marker is still there while the log is open: %v", err)
		}
	})
}
