//go:build linux

package log

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	if err := powercut.Available(); err != nil {
		t.Skipf("needs FUSE: %v", err)
	}
	backing, mnt := t.TempDir(), t.TempDir()
	fsys, err := powercut.Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Unmount() }) // after a failure; a no-op after Unmount
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
