package coordinator

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/offsetd/offsetd/internal/powercut"
)

var powerLossCycles = flag.Int("powerloss.cycles", 8, "power cuts of TestPowerLoss (its long form: 100 or more)")

// TestPowerLoss is TestCrash on a disk that loses power: the child runs on
// a powercut mount, the power is cut under it, losing every page written
// since its file's last fsync (DropAll) or a random part of them (TornPages:
// torn multi-page batches), and the child is SIGKILLed. The store reopened from what reached
// the disk must hold every acknowledged operation, and no phantom.
// SIGKILL alone keeps the page cache, so only this test sees a missing fsync.
func TestPowerLoss(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("child")
	}
	if err := powerLoss(t, *powerLossCycles, false); err != nil {
		t.Fatal(err)
	}
}

// TestPowerLossCatchesNoSync shows that TestPowerLoss can fail: with
// UnsafeNoSync acknowledged commits are lost at a power cut, and the check
// must say so.
func TestPowerLossCatchesNoSync(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("child")
	}
	err := powerLoss(t, 6, true)
	if !errors.Is(err, errAckedLost) {
		t.Fatalf("with UnsafeNoSync the power cuts lost nothing acknowledged (%v)", err)
	}
	t.Logf("found, as it must: %v", err)
}

// powerLoss runs cycles of: mount, TestCrashChild on the mount, power cut,
// SIGKILL, unmount, reopen from the backing directory, check. It returns the
// first failed check. With noSync the child commits with UnsafeNoSync and
// every cut drops all unsynced pages (torn pages there could also make a
// journal that is damaged before its tail, which Open rightly refuses).
func powerLoss(t *testing.T, cycles int, noSync bool) error {
	if err := powercut.Available(); err != nil {
		t.Skipf("power-loss test needs FUSE: %v", err)
	}
	backing, mnt := t.TempDir(), t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 9))
	var run crashRun
	var env []string
	if noSync {
		env = append(env, crashNoSyncEnv+"=1")
	}
	var met, pages, written int // cuts that met unsynced pages, the pages, those written
	var names int               // changes of names the cuts undid (their directory not synced)
	start := time.Now()
	for cycle := range cycles {
		fsys, err := powercut.Mount(backing, mnt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fsys.Unmount() }) // after a failure; a no-op after Unmount
		mode := powercut.DropAll()
		if cycle%2 == 1 && !noSync {
			mode = powercut.TornPages(rng)
		}
		// The power fails while the child runs, then the child dies: what it
		// was writing or syncing meanwhile fails, or was on disk before.
		var cut powercut.Cut
		var cutErr error
		run.runChild(t, filepath.Join(mnt, "data"), cycle, 1+rng.IntN(600), func() { cut, cutErr = fsys.CutPower(mode) }, env...)
		if err := errors.Join(cutErr, fsys.Unmount()); err != nil {
			t.Fatal(err)
		}
		if cut.Pages > 0 {
			met++
		}
		pages, written, names = pages+cut.Pages, written+cut.Written, names+cut.Names
		c, err := Open(filepath.Join(backing, "data"), crashOptions())
		if err != nil {
			return fmt.Errorf("cycle %d: open after a power cut (%v, %d of %d unsynced pages written): %w", cycle, mode, cut.Written, cut.Pages, err)
		}
		err = run.check(c, cycle)
		c.Close()
		if err != nil {
			return fmt.Errorf("after a power cut (%v, %d of %d unsynced pages written): %w", mode, cut.Written, cut.Pages, err)
		}
	}
	t.Logf("%d power cuts in %v; %d met unsynced pages: %d pages, %d of them written; %d changes of names undone", cycles, time.Since(start).Round(time.Millisecond), met, pages, written, names)
	return nil
}
