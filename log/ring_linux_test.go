//go:build linux

package log

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRingRestoreRetried: a write fails while Open restores the ring's
// batches (the file size limit here): Open fails, and leaves the ring as
// it was, so that the next Open restores everything.
func TestRingRestoreRetried(t *testing.T) {
	if !inChild(t) {
		return
	}
	opts := testOptions(t, 1<<20)
	opts.ringSize = 256 << 10
	st := liveCrash(t, opts, 60, 0)
	st.damageTail(t, st.lapStart, -1) // every page of the lap lost
	var err error
	underFileLimit(t, 8<<10, func() { _, err = Open(st.dir, opts) })
	if err == nil {
		t.Fatal("Open restored past the file size limit")
	}
	l := mustOpen(t, st.dir, opts)
	checkRecords(t, "Replay after the retried Open", replayAll(t, l, 0), st.want)
	mustClose(t, l)
}

// TestRingDamagedRecordThenPowerCut: one acknowledged record in the
// middle of the ring's lap is damaged (bit rot, not a crash), and a power
// cut then loses the last segment's unsynced pages from that batch on.
// The lap read ends at the damaged record, but later records of the lap
// follow it: Open and Inspect refuse, naming RING, instead of dropping
// every acknowledged batch from there on.
func TestRingDamagedRecordThenPowerCut(t *testing.T) {
	opts := testOptions(t, 1<<20)
	st := liveCrash(t, opts, 60, 0)
	// Flip one byte inside the frame of the lap's 31st record.
	frame := st.lap.frames[30]
	off := strings.Index(string(st.ring), string(frame))
	if off < 0 {
		t.Fatal("frame not found in the ring")
	}
	st.ring[off+len(frame)/2] ^= 0x40
	if err := os.WriteFile(filepath.Join(st.dir, ringName), st.ring, 0o640); err != nil {
		t.Fatal(err)
	}
	// The power cut: the segment's size was never synced, its data from
	// the 31st batch of the lap on never reached the disk.
	st.damageTail(t, st.starts[st.lap.first-st.tail.index+30], -1)

	rep, ierr := Inspect(st.dir, -1, nil)
	l, oerr := Open(st.dir, opts)
	if oerr == nil {
		got := replayAll(t, l, 0)
		l.Close()
		t.Errorf("Open accepted it: %d of %d acknowledged records (last index %d, want %d); Inspect: %+v, %v",
			len(got), len(st.want), l.LastIndex(), st.want[len(st.want)-1].Index, rep, ierr)
		return
	}
	var ce *CorruptError
	if !errors.As(oerr, &ce) || ce.File != ringName {
		t.Fatalf("Open: %v, want a CorruptError naming RING", oerr)
	}
}

// TestInspectChecksCleanTailSize: after a clean close, an empty
// segment file appears after the last one (or an empty last segment is
// removed). Open and Inspect (offsetd verify) both compare the last
// segment's size with the marker, and refuse.
func TestInspectChecksCleanTailSize(t *testing.T) {
	for _, tt := range []string{"empty segment added", "empty last segment removed"} {
		t.Run(tt, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(t, 4096)
			l := mustOpen(t, dir, opts)
			for i := 0; ; i++ {
				mustAppendBatch(t, l, testEntries(i*5, 5))
				if tt == "empty segment added" || l.tailSize == 0 && l.tailStart.Load() > 1 {
					if i > 20 {
						break
					}
				}
			}
			next := l.lastBatch.Load() + 1
			mustClose(t, l)
			segs := segmentFiles(t, dir)
			last := segs[len(segs)-1]
			if tt == "empty segment added" {
				if err := os.WriteFile(filepath.Join(dir, segmentName(next)), nil, 0o640); err != nil {
					t.Fatal(err)
				}
			} else {
				if fi, err := os.Stat(last.path); err != nil || fi.Size() != 0 {
					t.Fatalf("last segment %s: %v %v, want empty", last.name(), fi, err)
				}
				if err := os.Remove(last.path); err != nil {
					t.Fatal(err)
				}
			}
			_, ierr := Inspect(dir, -1, nil)
			_, oerr := Open(dir, opts)
			if ierr == nil || oerr == nil {
				t.Errorf("Inspect (offsetd verify): %v\nOpen: %v", ierr, oerr)
			}
		})
	}
}

// TestRingFailedBatchCutWhenForgetFails: the ring write of a batch
// fails (here EFBIG: the file size limit falls inside the ring record,
// less than a record header past its start), after the batch reached the
// segment whole, and wal.Close has fsynced the segment with it. forget's
// overwrite at the same place fails the same way; poison, and Close of
// the poisoned log, cut the segment back all the same, so the next Open
// does not have the failed batch.
func TestRingFailedBatchCutWhenForgetFails(t *testing.T) {
	if !inChild(t) {
		return
	}
	for _, how := range []string{"kill", "close"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(t, 1<<20)
			opts.ringSize = 1 << 20
			l := mustOpen(t, dir, opts)
			var want []record
			// Small batches: the ring (24-byte header per record) runs
			// ahead of the segment.
			for i := range 200 {
				want = append(want, mustAppendBatch(t, l, []Entry{{Type: 1, Payload: []byte{byte(i)}}})...)
			}
			if l.ring.pos < 2*l.tailSize {
				t.Fatalf("ring at %d, segment %d bytes", l.ring.pos, l.tailSize)
			}
			failed := []Entry{{Type: 1, Payload: []byte("FAILED BATCH")}}
			var err, closeErr error
			underFileLimit(t, uint64(l.ring.pos+8), func() {
				_, _, err = l.Append(failed)
				if how == "close" {
					closeErr = l.Close()
				}
			})
			if !errors.Is(err, syscall.EFBIG) {
				t.Fatalf("Append: %v, want EFBIG", err)
			}
			t.Logf("Append: %v; Close: %v", err, closeErr)
			// "kill": the process dies now; its page cache (and wal.Close's
			// fsync) kept the segment as it is.
			crashed := t.TempDir()
			copyDir(t, dir, crashed)
			if how == "kill" {
				l.Close()
			}
			rep, ierr := Inspect(crashed, -1, nil)
			c := mustOpen(t, crashed, opts)
			got := replayAll(t, c, 0)
			mustClose(t, c)
			for _, r := range got {
				if r.Payload == "FAILED BATCH" {
					t.Fatalf("the failed batch is back at index %d after a restart (Inspect: %+v, %v)", r.Index, rep, ierr)
				}
			}
			checkRecords(t, "Replay", got, want)
		})
	}
}

// ringChildEnv names the test a child process runs (inChild).
const ringChildEnv = "OFFSETD_LOG_RING_CHILD"

// inChild runs test t again in a child process and reports false, or
// reports true in that child: a file size limit (RLIMIT_FSIZE) set by the
// test then reaches no file of the parent's, such as go test's own.
func inChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(ringChildEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), ringChildEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child ran no test:\n%s", out)
	}
	return false
}

// underFileLimit runs fn with the process's file size limit
// (RLIMIT_FSIZE) at limit bytes, so that a write past it fails with EFBIG;
// only in a child process (inChild).
func underFileLimit(t *testing.T, limit uint64, fn func()) {
	t.Helper()
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails instead of killing the process
	defer signal.Reset(syscall.SIGXFSZ)
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &orig); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: orig.Max}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &orig); err != nil {
			t.Fatal(err)
		}
	}()
	fn()
}
