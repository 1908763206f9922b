//go:build linux

package log

import (
	"os/signal"
	"syscall"
	"testing"
)

// TestRingRestoreRetried: a write fails while Open restores the ring's
// batches (the file size limit here): Open fails, and leaves the ring as
// it was, so that the next Open restores everything.
func TestRingRestoreRetried(t *testing.T) {
	opts := testOptions(t, 1<<20)
	opts.ringSize = 256 << 10
	st := liveCrash(t, opts, 60, 0)
	st.damageTail(t, st.lapStart, -1) // every page of the lap lost
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 8 << 10, Max: limit.Max}); err != nil {
		t.Fatal(err)
	}
	_, err := Open(st.dir, opts)
	if rerr := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil {
		t.Fatal("Open restored past the file size limit")
	}
	l := mustOpen(t, st.dir, opts)
	checkRecords(t, "Replay after the retried Open", replayAll(t, l, 0), st.want)
	mustClose(t, l)
}
