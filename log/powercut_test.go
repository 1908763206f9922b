//go:build linux

package log

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/offsetd/offsetd/internal/powercut"
)

// noSyncChildEnv names the directory TestUnsafeNoSyncChild writes its log
// in.
const noSyncChildEnv = "OFFSETD_LOG_NOSYNC_CHILD"

// noSyncSegmentSize keeps segments small, so that the child's appends make
// several.
const noSyncSegmentSize = 4096

// TestSyncKeepsNewSegmentsWithUnsafeNoSync: with UnsafeNoSync, Sync makes
// what Append wrote durable, the names of the segments it made included.
// A child appends over several small segments, syncs and waits; the power
// is cut under it (a cut also undoes a file created since its directory's
// last fsync), the child is killed, and the log reopened from what reached
// the disk holds every record up to the Sync.
func TestSyncKeepsNewSegmentsWithUnsafeNoSync(t *testing.T) {
	if os.Getenv(noSyncChildEnv) != "" {
		t.Skip("this is the child")
	}
	fsys, backing, mnt := mountPowercut(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnsafeNoSyncChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), noSyncChildEnv+"="+filepath.Join(mnt, "journal"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var synced uint64
	for lines := bufio.NewScanner(out); lines.Scan(); {
		if _, err := fmt.Sscanf(lines.Text(), "synced %d", &synced); err == nil {
			break
		}
	}
	cut, cutErr := fsys.CutPower(powercut.DropAll())
	cmd.Process.Kill()
	cmd.Wait()
	if err := fsys.Unmount(); err != nil || cutErr != nil {
		t.Fatal(err, cutErr)
	}
	if synced == 0 {
		t.Fatal("the child never said what it synced")
	}
	l := mustOpen(t, filepath.Join(backing, "journal"), testOptions(t, noSyncSegmentSize))
	defer mustClose(t, l)
	t.Logf("synced %d records over several segments; the cut undid %d changes of names; %d records on disk", synced, cut.Names, l.LastIndex())
	if l.LastIndex() < synced {
		t.Fatalf("the log holds records up to %d after the power cut, but %d were synced", l.LastIndex(), synced)
	}
}

// TestUnsafeNoSyncChild appends with UnsafeNoSync until the log has made
// a few segments, syncs, says so, and waits to be killed.
func TestUnsafeNoSyncChild(t *testing.T) {
	dir := os.Getenv(noSyncChildEnv)
	if dir == "" {
		t.Skip("run by TestSyncKeepsNewSegmentsWithUnsafeNoSync")
	}
	opts := testOptions(t, noSyncSegmentSize)
	opts.UnsafeNoSync = true
	l := mustOpen(t, dir, opts)
	payload := []byte(strings.Repeat("x", 100))
	for range 5 * noSyncSegmentSize / len(payload) {
		if _, _, err := l.Append([]Entry{{Type: 1, Payload: payload}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("synced %d\n", l.LastIndex())
	select {}
}

// TestCloseAfterFailedSyncClosesFiles: when the device fails every write
// and sync (here, the power is off), an Append that fails and the Close
// after it, or a Close alone, report it and still close every file of the
// log, so that nothing holds the directory: the filesystem then unmounts.
// (wal's Close leaves its file open when its fsync fails; a store that
// retries a dead disk would run out of descriptors.)
func TestCloseAfterFailedSyncClosesFiles(t *testing.T) {
	fsys, _, mnt := mountPowercut(t)
	closing := mustOpen(t, filepath.Join(mnt, "closing"), testOptions(t, 4096))
	failing := mustOpen(t, filepath.Join(mnt, "failing"), testOptions(t, 4096))
	for _, l := range []*Log{closing, failing} {
		mustAppend(t, l, []Entry{{Type: 1, Payload: []byte("acknowledged")}})
	}
	if _, err := fsys.CutPower(powercut.DropAll()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := failing.Append([]Entry{{Type: 1, Payload: []byte("never")}}); err == nil || !failing.Poisoned() {
		t.Fatalf("Append with the power off: %v, poisoned %v", err, failing.Poisoned())
	}
	failing.Close() // the handle was closed when the append failed
	if err := closing.Close(); err == nil {
		t.Fatal("Close succeeded with the power off")
	}
	if open := openFilesUnder(t, mnt); len(open) > 0 {
		t.Errorf("after a failed Close the process still holds %v", open)
		// Close them under the log, or the mount would hold the process
		// at its exit: the test has failed, the log's state no longer
		// matters.
		for fd := range open {
			syscall.Close(fd)
		}
	}
	if err := fsys.Unmount(); err != nil {
		t.Fatal(err)
	}
}

// openFilesUnder returns the files under dir that the process holds open,
// by descriptor.
func openFilesUnder(t *testing.T, dir string) map[int]string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	open := make(map[int]string)
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			open[fd] = target
		}
	}
	return open
}

// mountPowercut mounts the power-cut filesystem over a new backing
// directory, or skips the test where FUSE is missing.
func mountPowercut(t *testing.T) (fsys *powercut.FS, backing, mnt string) {
	t.Helper()
	if err := powercut.Available(); err != nil {
		t.Skipf("needs FUSE: %v", err)
	}
	backing, mnt = t.TempDir(), t.TempDir()
	fsys, err := powercut.Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Unmount() }) // after a failure; a no-op after Unmount
	return fsys, backing, mnt
}
