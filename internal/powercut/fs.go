package powercut

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted powercut filesystem.
type FS struct {
	server *fuse.Server

	root  string // the backing directory
	stash string // where files that changes took away are kept until a cut

	mu      sync.Mutex
	files   map[uint64]*dirtyFile // by backing inode number; guarded by mu
	names   []nameChange          // changes of entries not yet durable, oldest first; guarded by mu
	stashed int                   // files stashed so far; guarded by mu
	cut     bool                  // the power is off; guarded by mu

	syncDelay atomic.Int64 // nanoseconds each fsync takes beside its work; see SetSyncDelay
}

// Mount mounts a powercut view of the directory backing on mountpoint.
// Both must exist. Call Unmount when done.
func Mount(backing, mountpoint string) (*FS, error) {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("powercut: %w", err)
	}
	stash, err := os.MkdirTemp(filepath.Dir(backing), "powercut-stash-")
	if err != nil {
		return nil, fmt.Errorf("powercut: %w", err)
	}
	f := &FS{root: backing, stash: stash, files: make(map[uint64]*dirtyFile)}
	// Nothing is cached in the kernel beyond one call: sizes of files with
	// unsynced pages come from here, not from the backing file.
	var zero time.Duration
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // no fusermount: mount(2) or a clear error
			FsName:            backing,
			Name:              "powercut",
		},
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
	}
	f.server, err = fs.Mount(mountpoint, &node{LoopbackNode: root.(*fs.LoopbackNode), fs: f}, opts)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("powercut: mount %s: %w", mountpoint, err), os.RemoveAll(stash))
	}
	return f, nil
}

// Unmount unmounts the filesystem. If the power was not cut it is a clean
// shutdown: every unsynced page is then written to the backing files and
// synced, and every change of names stays. Unmounting again does nothing.
func (f *FS) Unmount() error {
	if err := f.server.Unmount(); err != nil {
		return fmt.Errorf("powercut: unmount: %w", err)
	}
	f.server.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for ino, d := range f.files {
		errs = append(errs, d.sync(), d.close())
		delete(f.files, ino)
	}
	f.names = nil
	f.cut = true
	return errors.Join(append(errs, os.RemoveAll(f.stash))...)
}

// Mode says what a power cut does to the pages written since their file's
// last fsync.
type Mode struct {
	rng *rand.Rand // nil: every page is lost
}

// DropAll loses every unsynced page: each backing file keeps exactly its
// synced content and size.
func DropAll() Mode { return Mode{} }

// TornPages writes a random half (drawn from rng, page by page) of each
// file's unsynced pages to the backing file and loses the others, as a disk
// that had written some pages of a multi-page write when the power failed.
func TornPages(rng *rand.Rand) Mode { return Mode{rng: rng} }

// String names the mode.
func (m Mode) String() string {
	if m.rng == nil {
		return "drop-all"
	}
	return "torn-pages"
}

// Cut counts what a power cut met.
type Cut struct {
	Files   int // files with unsynced pages
	Pages   int // unsynced pages
	Written int // of them, pages that reached the backing files
	Names   int // changes of names undone (their directory was not synced)
}

// CutPower simulates a power failure: the unsynced pages are lost, or in
// part written, as m says, and every change of names (create, rename,
// unlink, mkdir, rmdir) whose directory was not fsynced after it is undone. From
// then on the filesystem refuses every change with EIO; reads still work.
// It fails if the power was already cut.
func (f *FS) CutPower(m Mode) (Cut, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return Cut{}, errors.New("powercut: the power is already off")
	}
	f.cut = true
	var c Cut
	var errs []error
	// In inode order, so that a seeded rng tears the same pages every run.
	for _, ino := range slices.Sorted(maps.Keys(f.files)) {
		d := f.files[ino]
		c.Files++
		c.Pages += len(d.pages)
		var survive []int64
		for _, p := range d.pageIndexes() {
			if m.rng != nil && m.rng.IntN(2) == 0 {
				survive = append(survive, p)
			}
		}
		c.Written += len(survive)
		errs = append(errs, d.writePages(survive), d.close())
		delete(f.files, ino)
	}
	c.Names = len(f.names)
	errs = append(errs, f.undoNames())
	return c, errors.Join(errs...)
}

// change runs op, a change to the backing directory, unless the power is off.
func (f *FS) change(op func() syscall.Errno) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return syscall.EIO
	}
	return op()
}

var probe struct {
	once sync.Once
	err  error
}

// SetSyncDelay makes every later fsync and fdatasync of a file take d
// longer, as on a slow device, so that tests see what waits for syncs.
// Syncs run side by side, as a device with a queue takes them; other
// operations are not slowed. Zero turns it off.
func (f *FS) SetSyncDelay(d time.Duration) { f.syncDelay.Store(int64(d)) }

// Available reports why powercut cannot mount on this machine (no
// /dev/fuse, no right to mount), or nil if it can. It tries a mount once
// per process.
func Available() error {
	probe.once.Do(func() { probe.err = tryMount() })
	return probe.err
}

func tryMount() error {
	dev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("powercut: FUSE is not available: %w", err)
	}
	dev.Close()
	dir, err := os.MkdirTemp("", "powercut-probe")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	if err := errors.Join(os.Mkdir(backing, 0o755), os.Mkdir(mnt, 0o755)); err != nil {
		return err
	}
	f, err := Mount(backing, mnt)
	if err != nil {
		return fmt.Errorf("powercut: cannot mount FUSE here: %w", err)
	}
	return f.Unmount()
}
