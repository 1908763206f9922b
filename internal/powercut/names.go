package powercut

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A change of a directory's entries (a file created, renamed or removed, a
// directory made or removed) is durable once that directory is fsynced after it, and
// not before: fsyncing the file itself does not make its name durable. The
// changes go to the backing directory at once, as the data of a synced
// file does; each is also noted until its directory is synced, and a power
// cut undoes the ones still noted, newest first.
type nameChange struct {
	kind nameKind
	dir  string // the directory whose entries changed, relative to the root
	name string
	// For a rename, where the file went; the rename is durable once newDir
	// is synced (the name the file is found by).
	newDir, newName string
	// stash is a hard link, outside the backing tree, to a file the
	// change took away (removed, or replaced by a rename), "" if none: a
	// cut links it back.
	stash string
}

type nameKind int

const (
	created nameKind = iota
	renamed
	removed
	madeDir
	removedDir
)

// durableIn reports whether c is durable once dir is synced.
func (c nameChange) durableIn(dir string) bool {
	if c.kind == renamed {
		return c.newDir == dir
	}
	return c.dir == dir
}

// undo puts the backing tree back as it was before c.
func (c nameChange) undo(root string) error {
	path := filepath.Join(root, c.dir, c.name)
	switch c.kind {
	case created, madeDir:
		// The name is there: a later change of it was undone before.
		// Missing, the model lost track of it (a directory renamed since,
		// which it does not follow): say so rather than pass.
		if _, err := os.Lstat(path); err != nil {
			return fmt.Errorf("powercut: undo the creation of %s: %w", path, err)
		}
		return os.RemoveAll(path)
	case removedDir:
		return os.Mkdir(path, 0o755)
	case removed:
		return os.Link(c.stash, path)
	case renamed:
		to := filepath.Join(root, c.newDir, c.newName)
		if err := os.Rename(to, path); err != nil {
			return err
		}
		if c.stash != "" {
			return os.Link(c.stash, to)
		}
		return nil
	}
	return fmt.Errorf("powercut: unknown change %d", c.kind)
}

// note records c; f.mu is held.
func (f *FS) note(c nameChange) { f.names = append(f.names, c) }

// synced drops the changes that syncing dir made durable; f.mu is held.
func (f *FS) synced(dir string) {
	f.names = slices.DeleteFunc(f.names, func(c nameChange) bool { return c.durableIn(dir) })
}

// stashFile hard-links the backing file at path outside the tree, so that
// a cut can restore it, and returns the link, or "" if path does not
// exist; f.mu is held.
func (f *FS) stashFile(path string) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && fi.IsDir() {
		return "", nil // nothing to restore, or a directory (not modelled)
	}
	f.stashed++
	link := filepath.Join(f.stash, fmt.Sprint(f.stashed))
	return link, os.Link(path, link)
}

// undoNames undoes every change not yet durable, newest first, and empties
// the stash; f.mu is held.
func (f *FS) undoNames() error {
	var errs []error
	for _, c := range slices.Backward(f.names) {
		errs = append(errs, c.undo(f.root))
	}
	f.names = nil
	return errors.Join(append(errs, os.RemoveAll(f.stash))...)
}

// rel returns n's directory relative to the root.
func (n *node) rel() string { return n.EmbeddedInode().Path(nil) }

func (n *node) backing(name string) string { return filepath.Join(n.fs.root, n.rel(), name) }

// OpendirHandle opens a directory whose fsync makes its changes durable.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{inner: fh, dir: n.rel(), fs: n.fs}, fuseFlags, 0
}

// dirHandle is an open directory: listing goes to the backing directory,
// and fsync marks its changes durable.
type dirHandle struct {
	inner fs.FileHandle
	dir   string
	fs    *FS
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.inner.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.inner.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.inner.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.fs.change(func() syscall.Errno {
		if errno := d.inner.(fs.FileFsyncdirer).Fsyncdir(ctx, flags); errno != 0 {
			return errno
		}
		d.fs.synced(d.dir)
		return 0
	})
}
