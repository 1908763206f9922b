package coordinator

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// legacyLockFile is the file offsetd locked before it locked the directory
// itself. It is never created; where an older offsetd left one, it is
// locked as well, so that an older server and a newer one on the same
// directory still exclude each other.
const legacyLockFile = "LOCK"

// dirLock is a flock on a data directory (and on its legacy lock file, if
// it has one). The kernel drops it when the process dies.
type dirLock []*os.File

// lockDir takes a flock on dir, exclusive so that two coordinators never
// write the same logs, or shared for a tool that only reads. It creates
// nothing: a refused Open leaves no trace. It returns ErrLocked if a
// coordinator (or, for exclusive, any holder) has the lock.
func lockDir(dir string, exclusive bool) (dirLock, error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	var l dirLock
	for _, path := range []string{dir, filepath.Join(dir, legacyLockFile)} {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) && path != dir {
			break
		}
		if err != nil {
			l.Close()
			return nil, err
		}
		l = append(l, f)
		if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
			l.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
			}
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
	}
	return l, nil
}

// Close releases the lock.
func (l dirLock) Close() error {
	var errs []error
	for _, f := range l {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// LockDir takes, on a data directory, the lock an open Coordinator holds:
// for tools that must not act beside a server, exclusive to change the
// directory (Open's own), shared to read it. It returns ErrLocked if a
// coordinator has dir open, and creates nothing. Close releases it.
func LockDir(dir string, exclusive bool) (io.Closer, error) {
	l, err := lockDir(dir, exclusive)
	if err != nil {
		return nil, err
	}
	return l, nil
}
