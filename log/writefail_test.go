//go:build linux

package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"testing"
)

// writeFailureEnv selects the scenario TestWriteFailureChild runs.
const writeFailureEnv = "OFFSETD_LOG_WRITE_FAILURE"

// TestWriteFailure makes writes fail for real: each scenario runs in a
// child process (this test binary again) that lowers its own file size
// limit (RLIMIT_FSIZE), so that a write past it fails with EFBIG, part of
// the batch having reached the file. The child checks that the batch
// fails, the handle is poisoned, nothing of the failed batch ever shows
// up, and that appends work again once the limit is raised.
func TestWriteFailure(t *testing.T) {
	if os.Getenv(writeFailureEnv) != "" {
		t.Skip("this is the child")
	}
	for _, scenario := range []string{"within segment", "before cycle", "after cycle", "close while poisoned", "truncate front while poisoned"} {
		t.Run(scenario, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestWriteFailureChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), writeFailureEnv+"="+scenario)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child failed: %v\n%s", err, out)
			}
			if !bytes.Contains(out, []byte("write failure scenario passed: "+scenario)) {
				t.Fatalf("child did not run the scenario:\n%s", out)
			}
		})
	}
}

func TestWriteFailureChild(t *testing.T) {
	scenario := os.Getenv(writeFailureEnv)
	if scenario == "" {
		t.Skip("run by TestWriteFailure")
	}
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead of killing us
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &orig); err != nil {
		t.Fatal(err)
	}
	setLimit := func(cur uint64) {
		t.Helper()
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: cur, Max: orig.Max}); err != nil {
			t.Fatalf("setrlimit: %v", err)
		}
	}
	defer setLimit(orig.Cur)

	const payloadSize = 50
	// A batch of one entry of payloadSize, while indexes are below 128:
	// uvarint length, frame header, first index, count, partition, type,
	// payload length, payload, checksum.
	entrySize := 1 + len(appendBatchFrame(nil, 0, 1, []Entry{{Payload: make([]byte, payloadSize)}}))
	batchID := 0
	payload := func(size int) []byte {
		p := bytes.Repeat([]byte{'.'}, size)
		copy(p, fmt.Sprintf("batch %d", batchID))
		return p
	}
	batchOf := func(sizes ...int) []Entry {
		batchID++
		es := make([]Entry, len(sizes))
		for i, size := range sizes {
			es[i] = Entry{Type: byte(batchID%200 + 1), Payload: payload(size)}
		}
		return es
	}

	dir := t.TempDir()
	opts := testOptions(t, 0)
	// The limit is on the offset a write reaches, in any file: a sync
	// ring smaller than the limit leaves the failures to the segments.
	opts.ringSize = 256
	var want []record  // every acknowledged entry
	var failed []Entry // entries of the batches that failed
	sawFailure := false
	appendOK := func(l *Log, batch []Entry) {
		t.Helper()
		want = append(want, mustAppendBatch(t, l, batch)...)
	}
	appendFails := func(l *Log, batch []Entry) {
		t.Helper()
		before := l.LastIndex()
		_, _, err := l.Append(batch)
		if !errors.Is(err, syscall.EFBIG) {
			t.Fatalf("Append past the file size limit: err = %v, want EFBIG", err)
		}
		if !l.Poisoned() || l.LastIndex() != before {
			t.Fatalf("after a failed Append: Poisoned %v, LastIndex %d (was %d)", l.Poisoned(), l.LastIndex(), before)
		}
		failed = append(failed, batch...)
		sawFailure = true
	}
	checkLog := func(l *Log, when string) {
		t.Helper()
		got := replayAll(t, l, 0)
		checkRecords(t, when, got, want)
		for _, r := range got {
			for _, f := range failed {
				if r.Payload == string(f.Payload) {
					t.Fatalf("%s: entry %d is from a failed batch: %q", when, r.Index, r.Payload)
				}
			}
		}
	}
	checkFiles := func(when string) {
		t.Helper()
		rep, err := Inspect(dir, -1, nil)
		if err != nil || rep.TornTailBytes != 0 || rep.Records != len(want) || rep.LastIndex != want[len(want)-1].Index {
			t.Fatalf("%s: Inspect = %+v, %v; want %d whole entries and nothing else", when, rep, err, len(want))
		}
	}

	var l *Log
	switch scenario {
	case "within segment":
		// The limit cuts a batch in the middle of a big segment.
		opts.SegmentSize = 1 << 20
		l = mustOpen(t, dir, opts)
		setLimit(64 << 10)
		for {
			batch := batchOf(100, 100, 100, 100, 100, 100, 100, 100)
			if _, _, err := l.Append(batch); err != nil {
				if !errors.Is(err, syscall.EFBIG) || !l.Poisoned() {
					t.Fatalf("Append: err = %v, Poisoned %v", err, l.Poisoned())
				}
				failed = append(failed, batch...)
				sawFailure = true
				break
			}
			want = append(want, records(uint64(len(want)+1), batch)...)
		}
		checkLog(l, "Replay while poisoned")
		checkFiles("files right after the failure")
		// Recovery alone works under the limit (it only shrinks files)...
		if err := l.Recover(); err != nil || l.Poisoned() {
			t.Fatalf("Recover: %v, Poisoned %v", err, l.Poisoned())
		}
		// ...but the next batch fails again, as does the one after.
		appendFails(l, batchOf(100, 100, 100, 100, 100, 100, 100, 100))
		appendFails(l, batchOf(100, 100, 100, 100, 100, 100, 100, 100))

	case "before cycle":
		// Eleven entries fill a segment; the limit fails the write of the
		// eleventh, before wal closes the segment.
		opts.SegmentSize = 10*entrySize + 1
		l = mustOpen(t, dir, opts)
		setLimit(uint64(10*entrySize + entrySize/2))
		for range 10 {
			appendOK(l, batchOf(payloadSize))
		}
		appendFails(l, batchOf(payloadSize))
		checkFiles("files right after the failure")

	case "after cycle", "close while poisoned":
		// The sixth batch completes a segment, which wal syncs and closes,
		// opening the next; the seventh, too big for the limit, fails in
		// the new segment file, which stays, empty.
		opts.SegmentSize = 6 * entrySize
		l = mustOpen(t, dir, opts)
		setLimit(uint64(20 * entrySize))
		for range 6 {
			appendOK(l, batchOf(payloadSize))
		}
		appendFails(l, batchOf(payloadSize, 30*entrySize))
		checkFiles("files right after the failure")
		if got := segmentStarts(segmentFiles(t, dir)); !slices.Equal(got, []uint64{1, 7}) {
			t.Fatalf("segments start at %v after the failure, want 1 and the empty 7", got)
		}
		if scenario == "close while poisoned" {
			mustClose(t, l)
			setLimit(orig.Max)
			l = mustOpen(t, dir, opts)
			checkLog(l, "Replay after reopening a log closed while poisoned")
		}

	case "truncate front while poisoned":
		// TruncateFront refuses a poisoned log (recovery is the owner's);
		// after Recover it only unlinks files: it needs no file size
		// budget, so it works with the limit at 0, where every write fails.
		opts.SegmentSize = 6 * entrySize
		l = mustOpen(t, dir, opts)
		for range 20 {
			appendOK(l, batchOf(payloadSize))
		}
		if got := segmentStarts(segmentFiles(t, dir)); !slices.Equal(got, []uint64{1, 7, 13, 19}) {
			t.Fatalf("segments start at %v, want 1, 7, 13, 19", got)
		}
		setLimit(uint64(20 * entrySize))
		appendFails(l, batchOf(payloadSize, 30*entrySize))
		if err := l.TruncateFront(16); err == nil || !l.Poisoned() || l.FirstIndex() != 1 {
			t.Fatalf("TruncateFront(16) on a poisoned log: err = %v, Poisoned %v, FirstIndex %d; want a refusal", err, l.Poisoned(), l.FirstIndex())
		}
		if err := l.Recover(); err != nil {
			t.Fatal(err)
		}
		setLimit(0)
		if err := l.TruncateFront(16); err != nil || l.Poisoned() || l.FirstIndex() != 13 {
			t.Fatalf("TruncateFront(16) after Recover: err = %v, Poisoned %v, FirstIndex %d; want 13", err, l.Poisoned(), l.FirstIndex())
		}
		want = want[12:]
		if got := segmentStarts(segmentFiles(t, dir)); !slices.Equal(got, []uint64{13, 19}) {
			t.Fatalf("segments start at %v after TruncateFront(16), want 13, 19", got)
		}
		checkLog(l, "Replay after TruncateFront")
		checkFiles("files after TruncateFront")
		// The limit was in force all along.
		appendFails(l, batchOf(payloadSize))

	default:
		t.Fatalf("unknown scenario %q", scenario)
	}

	checkLog(l, "Replay while poisoned")
	setLimit(orig.Max) // the soft limit back up to the hard one
	// The first Append after the failure recovers, then writes.
	appendOK(l, batchOf(payloadSize, 30*entrySize))
	if l.Poisoned() {
		t.Fatal("still poisoned after a successful Append")
	}
	for range 20 {
		appendOK(l, batchOf(payloadSize, payloadSize, 3))
	}
	checkLog(l, "Replay after recovery")
	mustClose(t, l)
	checkFiles("files after Close")
	l = mustOpen(t, dir, opts)
	checkLog(l, "Replay after reopen")
	appendOK(l, batchOf(1))
	checkLog(l, "Replay after reopen and append")
	mustClose(t, l)
	if !sawFailure {
		t.Fatal("the scenario failed no write")
	}
	fmt.Println("write failure scenario passed:", scenario)
}
