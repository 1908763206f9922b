package log

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestOpenOptions(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		field string // named in the error; "" means valid
	}{
		{"zero", Options{}, ""},
		{"defaults", DefaultOptions(), ""},
		{"tiny segments", Options{SegmentSize: 1}, ""},
		{"negative segment size", Options{SegmentSize: -1}, "SegmentSize"},
		{"huge segment size", Options{SegmentSize: 2 << 30}, "SegmentSize"},
		{"negative partition", Options{Partition: -2}, "Partition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			l, err := Open(t.TempDir(), opts)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				mustClose(t, l)
				if opts != tt.opts {
					t.Fatalf("Open changed the caller's options: %+v", opts)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Open: err = %v, want ErrInvalid naming %s", err, tt.field)
			}
		})
	}
	if _, err := Open("", Options{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf(`Open(""): err = %v, want ErrInvalid`, err)
	}
	if got := DefaultOptions().SegmentSize; got != 4<<20 {
		t.Fatalf("default SegmentSize = %d", got)
	}
}

func TestOpenCreatesNestedDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "partition-7")
	l := mustOpen(t, dir, testOptions(t, 0))
	if l.Dir() != dir {
		t.Fatalf("Dir = %q, want %q", l.Dir(), dir)
	}
	if l.FirstIndex() != 1 || l.LastIndex() != 0 {
		t.Fatalf("new log: FirstIndex %d LastIndex %d, want 1 and 0", l.FirstIndex(), l.LastIndex())
	}
	if rs := replayAll(t, l, 0); len(rs) != 0 {
		t.Fatalf("new log replayed %v", rs)
	}
	mustClose(t, l)
}

// TestMakeDirSyncsEveryNewEntry: MakeDir syncs the parent of every
// directory it creates, not only the last one's: a snapshots directory
// made with its partition's directory inside must be durable in the data
// directory too. (The power-loss test's filesystem undoes a directory made
// without a sync of its parent, but loses nothing while the journal still
// holds what the snapshots do: only this test fails without it.)
func TestMakeDirSyncsEveryNewEntry(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data", "snapshots", "p0003")
	var synced []string
	record := func(d string) error {
		synced = append(synced, d)
		return SyncDir(d)
	}
	if err := MakeDir(dir, record); err != nil {
		t.Fatal(err)
	}
	// root exists: its parent is synced, in case its own mkdir was not.
	want := []string{filepath.Dir(root), root, filepath.Join(root, "data"), filepath.Join(root, "data", "snapshots")}
	if !slices.Equal(synced, want) {
		t.Fatalf("synced %v, want each new directory's parent, outermost first: %v", synced, want)
	}
	synced = nil
	if err := MakeDir(dir, record); err != nil || !slices.Equal(synced, want[3:]) {
		t.Fatalf("MakeDir of an existing directory: %v, synced %v, want its parent %v", err, synced, want[3:])
	}
}

// TestAppendReplay writes batches of every size over many small segments,
// replays from every index, reopens, and goes on appending.
func TestAppendReplay(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(t, 256)
	l := mustOpen(t, dir, opts)
	var want []record
	for i, size := 0, 1; i < 400; i, size = i+size, size%9+1 {
		want = append(want, mustAppend(t, l, testEntries(i, size))...)
	}
	if n := len(segmentFiles(t, dir)); n < 20 {
		t.Fatalf("only %d segments; the test wants many", n)
	}
	check := func(l *Log) {
		t.Helper()
		if l.FirstIndex() != 1 || l.LastIndex() != uint64(len(want)) {
			t.Fatalf("FirstIndex %d LastIndex %d, want 1 and %d", l.FirstIndex(), l.LastIndex(), len(want))
		}
		checkRecords(t, "Replay(0)", replayAll(t, l, 0), want)
		// From around every segment boundary, and past the end.
		froms := []uint64{uint64(len(want)), uint64(len(want)) + 1, uint64(len(want)) + 2}
		for _, s := range segmentFiles(t, dir) {
			froms = append(froms, s.index-1, s.index, s.index+1)
		}
		for _, from := range froms {
			got := replayAll(t, l, from)
			checkRecords(t, "Replay from the middle", got, want[min(max(from, 1)-1, uint64(len(want))):])
		}
	}
	check(l)
	mustClose(t, l)

	l = mustOpen(t, dir, opts)
	check(l)
	want = append(want, mustAppend(t, l, testEntries(1000, 5))...)
	check(l)
	mustClose(t, l)
	l = mustOpen(t, dir, opts)
	check(l)
	mustClose(t, l)
}

func TestAppendInvalid(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(t, 0))
	want := mustAppend(t, l, testEntries(0, 3))
	for name, batch := range map[string][]Entry{
		"nil":             nil,
		"empty":           {},
		"type 0":          {{Type: 0, Payload: []byte("x")}},
		"type 0 in batch": {testEntry(1), {Type: 0}, testEntry(2)},
	} {
		if _, _, err := l.Append(batch); !errors.Is(err, ErrInvalid) {
			t.Errorf("Append(%s): err = %v, want ErrInvalid", name, err)
		}
	}
	if l.LastIndex() != 3 || l.Poisoned() {
		t.Fatalf("after invalid appends: LastIndex %d, Poisoned %v", l.LastIndex(), l.Poisoned())
	}
	checkRecords(t, "Replay", replayAll(t, l, 1), want)
	if err := l.Replay(1, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Replay(nil): err = %v", err)
	}
	mustClose(t, l)
}

func TestClosed(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(t, 0))
	mustAppend(t, l, testEntries(0, 2))
	mustClose(t, l)
	_, _, err := l.Append(testEntries(0, 1))
	for name, err := range map[string]error{
		"Append":        err,
		"Replay":        l.Replay(1, collect(new([]record))),
		"TruncateFront": l.TruncateFront(2),
		"Recover":       l.Recover(),
		"Close":         l.Close(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
	if l.FirstIndex() != 1 || l.LastIndex() != 2 {
		t.Fatalf("after Close: FirstIndex %d LastIndex %d", l.FirstIndex(), l.LastIndex())
	}
}

func TestReplayStopsOnError(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(t, 100))
	mustAppend(t, l, testEntries(0, 20))
	stop := errors.New("stop")
	var seen []uint64
	err := l.Replay(3, func(index uint64, _ Entry) error {
		seen = append(seen, index)
		if index == 9 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("Replay: err = %v, want the callback's error as is", err)
	}
	if len(seen) != 7 || seen[0] != 3 || seen[6] != 9 {
		t.Fatalf("Replay called back %v, want 3..9", seen)
	}
	mustClose(t, l)
}

// TestTailPrediction checks that Append's mirror of wal's segment cycling
// (which decides the directory fsync) matches the files, over batches of
// every size, large entries, truncations and reopens.
func TestTailPrediction(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(t, 300)
	opts.UnsafeNoSync = true
	l := mustOpen(t, dir, opts)
	check := func(when string) {
		t.Helper()
		segs := segmentFiles(t, dir)
		tail := segs[len(segs)-1]
		fi, err := os.Stat(tail.path)
		if err != nil {
			t.Fatal(err)
		}
		if tail.index != l.tailStart.Load() || fi.Size() != l.tailSize {
			t.Fatalf("%s: tail is %s with %d bytes, Log thinks %s with %d", when, tail.name(), fi.Size(), segmentName(l.tailStart.Load()), l.tailSize)
		}
	}
	check("new")
	for i := range 120 {
		batch := testEntries(i, i%7+1)
		if i%11 == 0 {
			batch[0].Payload = make([]byte, 350+i) // bigger than a segment
		}
		mustAppend(t, l, batch)
		check("append")
		switch i % 40 {
		case 13:
			if err := l.TruncateFront(l.LastIndex() - 3); err != nil { // inside the tail
				t.Fatal(err)
			}
			check("truncate in tail")
		case 26:
			if err := l.TruncateFront(l.LastIndex() + 1); err != nil { // everything
				t.Fatal(err)
			}
			check("truncate all")
		case 39:
			mustClose(t, l)
			l = mustOpen(t, dir, opts)
			check("reopen")
		}
	}
	mustClose(t, l)
}

// TestTruncateFront checks that TruncateFront removes exactly the segment
// files before the one holding its index, leaves the others byte for byte
// and moves FirstIndex to the oldest one left, before and after a reopen.
func TestTruncateFront(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(t, 200)
	l := mustOpen(t, dir, opts)
	all := mustAppend(t, l, testEntries(0, 60))
	segs := segmentFiles(t, dir)
	tail := segs[len(segs)-1]
	if len(segs) < 6 || tail.index+1 > 60 {
		t.Fatalf("segments start at %v; the test wants 6 or more, the last holding 2 or more entries", segmentStarts(segs))
	}

	for _, index := range []uint64{0, 61 + 1} {
		if err := l.TruncateFront(index); !errors.Is(err, ErrInvalid) {
			t.Fatalf("TruncateFront(%d): err = %v, want ErrInvalid", index, err)
		}
	}
	if err := l.TruncateFront(1); err != nil { // already first
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir); len(got) != len(segs) {
		t.Fatalf("TruncateFront(FirstIndex) removed segments: %v left", segmentStarts(got))
	}
	// Inside an older segment, at the start of one, inside the last one,
	// past the last entry.
	for _, index := range []uint64{segs[1].index + 1, segs[3].index, tail.index + 1, 61} {
		before := segmentFiles(t, dir)
		front := segmentHolding(before, index)
		kept := map[string][]byte{}
		for _, s := range before {
			if s.index >= front {
				kept[s.name()] = mustReadFile(t, s.path)
			}
		}
		if err := l.TruncateFront(index); err != nil {
			t.Fatalf("TruncateFront(%d): %v", index, err)
		}
		after := segmentFiles(t, dir)
		if len(after) != len(kept) || after[0].index != front {
			t.Fatalf("TruncateFront(%d) left segments %v, want those from %d of %v", index, segmentStarts(after), front, segmentStarts(before))
		}
		for _, s := range after {
			if !bytes.Equal(mustReadFile(t, s.path), kept[s.name()]) {
				t.Fatalf("TruncateFront(%d) changed segment %s", index, s.name())
			}
		}
		for _, reopen := range []bool{false, true} {
			if reopen {
				mustClose(t, l)
				l = mustOpen(t, dir, opts)
			}
			if l.FirstIndex() != front || l.LastIndex() != 60 {
				t.Fatalf("after TruncateFront(%d), reopen %v: FirstIndex %d LastIndex %d, want %d and 60", index, reopen, l.FirstIndex(), l.LastIndex(), front)
			}
			checkRecords(t, "Replay(0)", replayAll(t, l, 0), all[front-1:])
			checkRecords(t, "Replay(index)", replayAll(t, l, index), all[min(index, 61)-1:])
		}
		if err := l.TruncateFront(front - 1); err != nil || l.FirstIndex() != front {
			t.Fatalf("TruncateFront(%d) below first: err = %v, FirstIndex %d; want a no-op", front-1, err, l.FirstIndex())
		}
		if err := l.TruncateFront(index); err != nil || l.FirstIndex() != front || len(segmentFiles(t, dir)) != len(after) {
			t.Fatalf("TruncateFront(%d) again: err = %v, FirstIndex %d, %d segments; want a no-op", index, err, l.FirstIndex(), len(segmentFiles(t, dir)))
		}
	}
	// The last segment stays, with its entries, even past the last entry.
	if got := segmentFiles(t, dir); len(got) != 1 || got[0].index != tail.index || l.FirstIndex() != tail.index {
		t.Fatalf("after TruncateFront(61): segments %v, FirstIndex %d; want only the last, %d", segmentStarts(got), l.FirstIndex(), tail.index)
	}
	want := all[tail.index-1:]
	more := mustAppend(t, l, testEntries(100, 4))
	if more[0].Index != 61 {
		t.Fatalf("first index after truncating = %d, want 61", more[0].Index)
	}
	want = append(want, more...)
	mustClose(t, l)
	l = mustOpen(t, dir, opts)
	checkRecords(t, "Replay after reopen", replayAll(t, l, 0), want)

	// When the last segment is empty, truncating past the last entry
	// keeps the segment before it: it holds the last index, which a crash
	// and a reopen must not lose (indexes are never given twice).
	for l.tailSize != 0 {
		mustAppend(t, l, testEntries(200, 1))
	}
	last := l.LastIndex()
	segs = segmentFiles(t, dir)
	keep := segs[len(segs)-2]
	if err := l.TruncateFront(last + 1); err != nil {
		t.Fatal(err)
	}
	for _, reopen := range []bool{false, true} {
		if reopen {
			mustClose(t, l)
			crash(t, dir)
			l = mustOpen(t, dir, opts)
		}
		if l.FirstIndex() != keep.index || l.LastIndex() != last {
			t.Fatalf("truncated to the end, reopen %v: FirstIndex %d LastIndex %d, want %d and %d", reopen, l.FirstIndex(), l.LastIndex(), keep.index, last)
		}
		if got := segmentStarts(segmentFiles(t, dir)); !slices.Equal(got, []uint64{keep.index, last + 1}) {
			t.Fatalf("truncated to the end, reopen %v: segments %v", reopen, got)
		}
	}
	want = append(replayAll(t, l, 0), mustAppend(t, l, testEntries(300, 2))...)
	mustClose(t, l)
	l = mustOpen(t, dir, opts)
	checkRecords(t, "Replay after truncating to the end", replayAll(t, l, 0), want)
	mustClose(t, l)
}

// TestWALUse holds the invariant TruncateFront relies on (see Log): the
// package never calls wal's reads or truncations, which would open the
// segment files it removes behind wal's back. No file of the package calls
// a method of these names on anything, so none calls them on wal.
func TestWALUse(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	banned := map[string]bool{"Read": true, "TruncateFront": true, "TruncateBack": true}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && banned[sel.Sel.Name] {
					t.Errorf("%s: call to %s: Log's TruncateFront removes segment files behind wal, which holds only while nothing reads or truncates through it", fset.Position(call.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d files of the package, want them all", checked)
	}
}

// TestInterruptedTruncateFront removes the oldest segment files by hand, as
// a crash part way through TruncateFront can leave them (it removes them
// oldest first): Open takes the oldest file left as the front.
func TestInterruptedTruncateFront(t *testing.T) {
	base := t.TempDir()
	opts := testOptions(t, 150)
	l := mustOpen(t, base, opts)
	all := mustAppend(t, l, testEntries(0, 40))
	mustClose(t, l)
	crash(t, base) // the removals below are a crash's, not a clean close's
	segs := segmentFiles(t, base)
	if len(segs) < 4 {
		t.Fatalf("want 4 or more segments, have %d", len(segs))
	}
	// TruncateFront never removes the last segment that holds a batch.
	lastFull := len(segs) - 1
	if segs[lastFull].index == 41 {
		lastFull--
	}
	for _, removed := range []int{1, 2, lastFull} {
		t.Run(fmt.Sprintf("%d of %d removed", removed, len(segs)), func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, base, dir)
			for _, s := range segs[:removed] {
				if err := os.Remove(filepath.Join(dir, s.name())); err != nil {
					t.Fatal(err)
				}
			}
			front := segs[removed].index
			if rep, err := Inspect(dir, -1, nil); err != nil || rep.FirstIndex != front || rep.LastIndex != 40 {
				t.Fatalf("Inspect = %+v, %v; want indexes %d-40", rep, err, front)
			}
			l := mustOpen(t, dir, opts)
			if l.FirstIndex() != front || l.LastIndex() != 40 {
				t.Fatalf("FirstIndex %d LastIndex %d, want %d and 40", l.FirstIndex(), l.LastIndex(), front)
			}
			want := all[front-1:]
			checkRecords(t, "Replay(FirstIndex)", replayAll(t, l, l.FirstIndex()), want)
			want = append(want, mustAppend(t, l, testEntries(40, 3))...)
			if err := l.TruncateFront(front); err != nil {
				t.Fatal(err)
			}
			mustClose(t, l)
			l = mustOpen(t, dir, opts)
			checkRecords(t, "Replay after append and reopen", replayAll(t, l, 0), want)
			mustClose(t, l)
		})
	}
}

func TestRecoverHealthy(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(t, 100))
	want := mustAppend(t, l, testEntries(0, 10))
	if err := l.Recover(); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if l.Poisoned() {
		t.Fatal("poisoned after Recover")
	}
	want = append(want, mustAppend(t, l, testEntries(10, 10))...)
	checkRecords(t, "Replay", replayAll(t, l, 1), want)
	mustClose(t, l)
}

// TestCutBack builds what a failed batch can leave on disk (entries past
// the last acknowledged one, in the same segment and in a segment file
// the batch created) and checks that cutBack removes exactly that.
func TestCutBack(t *testing.T) {
	for _, last := range []uint64{0, 1, 5, 8, 9, 13, 20} {
		dir := t.TempDir()
		opts := testOptions(t, 130) // ~4 entries a segment
		l := mustOpen(t, dir, opts)
		all := mustAppend(t, l, testEntries(0, 20))
		mustClose(t, l)
		crash(t, dir)
		if err := cutBack(dir, last, testPartition); err != nil {
			t.Fatalf("cutBack(%d): %v", last, err)
		}
		for _, s := range segmentFiles(t, dir) {
			if s.index > last+1 {
				t.Fatalf("cutBack(%d) left %s", last, s.name())
			}
		}
		var got []record
		rep, err := Inspect(dir, -1, collect(&got))
		if err != nil || rep.TornTailBytes != 0 || rep.LastIndex != last {
			t.Fatalf("cutBack(%d): Inspect = %+v, %v", last, rep, err)
		}
		checkRecords(t, "after cutBack", got, all[:last])
		l = mustOpen(t, dir, opts)
		if l.LastIndex() != last {
			t.Fatalf("cutBack(%d): reopened with LastIndex %d", last, l.LastIndex())
		}
		mustAppend(t, l, testEntries(50, 2))
		mustClose(t, l)
	}
}

// TestTruncateFrontBesideAppend runs TruncateFront on another goroutine
// while the owner appends across segment boundaries (under -race).
func TestTruncateFrontBesideAppend(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Partition: testPartition, SegmentSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error)
	go func() {
		for i := 0; i < 200; i++ {
			if _, _, err := l.Append(testEntries(i*3, 3)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	truncated := 0
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
			if last := l.LastIndex(); last > 10 {
				if err := l.TruncateFront(last - 5); err != nil {
					t.Fatal(err)
				}
				truncated++
			}
		}
	}
	if truncated == 0 || l.FirstIndex() == 1 {
		t.Fatalf("nothing truncated (%d calls, FirstIndex %d)", truncated, l.FirstIndex())
	}
	var got []record
	if err := l.Replay(l.FirstIndex(), collect(&got)); err != nil {
		t.Fatal(err)
	}
	if got[len(got)-1].Index != 600 || got[0].Index != l.FirstIndex() {
		t.Fatalf("replay from %d gave %d..%d", l.FirstIndex(), got[0].Index, got[len(got)-1].Index)
	}
}

// TestReopenForgetsSegments: wal remembers every segment it created; the
// Log reopens it every reopenAfterSegments segments, which must lose
// nothing and keep appending.
func TestReopenForgetsSegments(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(t, 64))
	var want []record
	for range reopenAfterSegments + 50 {
		want = append(want, mustAppend(t, l, testEntries(len(want), 1))...)
		if len(want)%300 == 0 {
			if err := l.TruncateFront(l.LastIndex() - 10); err != nil {
				t.Fatal(err)
			}
			want = want[len(want)-len(replayAll(t, l, 0)):]
		}
	}
	if l.cycled >= reopenAfterSegments || l.Poisoned() {
		t.Fatalf("after %d segments: %d since the last reopen, poisoned %v", reopenAfterSegments+50, l.cycled, l.Poisoned())
	}
	checkRecords(t, "Replay", replayAll(t, l, 0), want)
	mustClose(t, l)
	l = mustOpen(t, dir, testOptions(t, 64))
	checkRecords(t, "Replay after reopen", replayAll(t, l, 0), want)
	mustClose(t, l)
}
