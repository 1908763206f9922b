package powercut

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node whose files hold their writes until fsync, and
// whose changes stop when the power is cut.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

// WrapChild makes every node of the tree a powercut node.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

// Lookup, Getattr and Setattr report the size readers see, which may be
// beyond the backing file's.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno == 0 {
		n.fs.patchSize(&out.Attr)
	}
	return ch, errno
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	errno := n.LoopbackNode.Getattr(ctx, unwrap(fh), out)
	if errno == 0 {
		n.fs.patchSize(&out.Attr)
	}
	return errno
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return n.fs.change(func() syscall.Errno {
		if errno := n.LoopbackNode.Setattr(ctx, unwrap(fh), in, out); errno != 0 {
			return errno
		}
		if d := n.fs.files[out.Ino]; d != nil {
			if size, ok := in.GetSize(); ok {
				d.truncate(int64(size))
			}
			out.Size = uint64(d.size)
		}
		return 0
	})
}

func (f *FS) patchSize(a *fuse.Attr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.files[a.Ino]; d != nil {
		a.Size = uint64(d.size)
	}
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, readable(flags))
	if errno != 0 {
		return nil, 0, errno
	}
	h, errno := n.fs.newHandle(fh)
	return h, fuseFlags, errno
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (ch *fs.Inode, h fs.FileHandle, fuseFlags uint32, errno syscall.Errno) {
	var fh fs.FileHandle
	errno = n.fs.change(func() syscall.Errno {
		_, err := os.Lstat(n.backing(name))
		isNew := errors.Is(err, os.ErrNotExist)
		if ch, fh, fuseFlags, errno = n.LoopbackNode.Create(ctx, name, readable(flags), mode, out); errno != 0 {
			return errno
		}
		if isNew {
			n.fs.note(nameChange{kind: created, dir: n.rel(), name: name})
		}
		if d := n.fs.files[out.Ino]; d != nil { // an existing file
			if flags&syscall.O_TRUNC != 0 {
				d.truncate(0)
			}
			out.Size = uint64(d.size)
		}
		return 0
	})
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno = n.fs.newHandle(fh)
	return ch, h, fuseFlags, errno
}

// readable opens write-only files read-write: a partly written page must
// be read from the backing file first.
func readable(flags uint32) uint32 {
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags
}

// The remaining changes go straight to the backing directory, while the
// power is on; those a cut undoes unless their directory was synced are
// noted (see nameChange).

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.fs.change(func() syscall.Errno {
		if ch, errno = n.LoopbackNode.Mkdir(ctx, name, mode, out); errno == 0 {
			n.fs.note(nameChange{kind: madeDir, dir: n.rel(), name: name})
		}
		return errno
	})
	return ch, errno
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.fs.change(func() syscall.Errno { ch, errno = n.LoopbackNode.Mknod(ctx, name, mode, rdev, out); return errno })
	return ch, errno
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.fs.change(func() syscall.Errno { ch, errno = n.LoopbackNode.Symlink(ctx, target, name, out); return errno })
	return ch, errno
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.fs.change(func() syscall.Errno { ch, errno = n.LoopbackNode.Link(ctx, target, name, out); return errno })
	return ch, errno
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.fs.change(func() syscall.Errno {
		if errno := n.LoopbackNode.Rmdir(ctx, name); errno != 0 {
			return errno
		}
		n.fs.note(nameChange{kind: removedDir, dir: n.rel(), name: name})
		return 0
	})
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.fs.change(func() syscall.Errno {
		stash, err := n.fs.stashFile(n.backing(name))
		if err != nil {
			return fs.ToErrno(err)
		}
		if errno := n.LoopbackNode.Unlink(ctx, name); errno != 0 {
			return errno
		}
		if stash != "" {
			n.fs.note(nameChange{kind: removed, dir: n.rel(), name: name, stash: stash})
		}
		return 0
	})
}

// Rename keeps a file's unsynced pages with it: they are kept by the
// backing file's inode, not by its name. A plain rename (no flags) is
// undone by a cut unless the new name's directory was synced after it,
// and a file it replaced comes back.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return n.fs.change(func() syscall.Errno {
		to, ok := newParent.(*node)
		if flags != 0 || !ok {
			return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
		}
		stash, err := n.fs.stashFile(to.backing(newName))
		if err != nil {
			return fs.ToErrno(err)
		}
		if errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags); errno != 0 {
			return errno
		}
		n.fs.note(nameChange{kind: renamed, dir: n.rel(), name: name, newDir: to.rel(), newName: newName, stash: stash})
		return 0
	})
}
