package coordinator

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Open locks the directory itself and creates no lock file; a refused
// second Open changes nothing; tools' locks see an open coordinator.
func TestLockCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	if _, err := os.Stat(filepath.Join(dir, legacyLockFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open made %s: %v", legacyLockFile, err)
	}
	before := hashTree(t, dir)
	if _, err := Open(dir, testOptions()); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if after := hashTree(t, dir); after != before {
		t.Fatalf("the refused Open changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for _, exclusive := range []bool{false, true} {
		if _, err := LockDir(dir, exclusive); !errors.Is(err, ErrLocked) {
			t.Fatalf("LockDir(exclusive=%v) of an open directory = %v, want ErrLocked", exclusive, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := LockDir(dir, false)
	if err != nil {
		t.Fatalf("LockDir of a closed directory: %v", err)
	}
	if _, err := Open(dir, testOptions()); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open under a shared lock = %v, want ErrLocked", err)
	}
	l.Close()
}

// flockLegacy locks dir's LOCK file as offsetd did before it locked the
// directory itself.
func flockLegacy(t *testing.T, dir string) (*os.File, error) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, legacyLockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// A LOCK file an older offsetd left is locked too, so that an older
// server and a newer one on that directory exclude each other.
func TestLegacyLockFile(t *testing.T) {
	dir := t.TempDir()
	old, err := flockLegacy(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	before := hashTree(t, dir)
	if _, err := Open(dir, testOptions()); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open beside an older server = %v, want ErrLocked", err)
	}
	if _, err := LockDir(dir, false); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockDir beside an older server = %v, want ErrLocked", err)
	}
	if after := hashTree(t, dir); after != before {
		t.Fatalf("the refused Open changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	old.Close()

	c := mustOpen(t, dir, testOptions())
	defer c.Close()
	if _, err := flockLegacy(t, dir); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("an older server's lock beside Open = %v, want EWOULDBLOCK", err)
	}
}
