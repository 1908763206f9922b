package powercut

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// handle is an open file: reads, writes and fsyncs go through the file's
// dirty pages.
type handle struct {
	lf  *fs.LoopbackFile // the backing file, opened read-write
	fd  int              // lf's descriptor
	ino uint64           // the backing inode: the key of the dirty pages
	fs  *FS
}

func (f *FS) newHandle(fh fs.FileHandle) (*handle, syscall.Errno) {
	lf := fh.(*fs.LoopbackFile)
	fd, _ := lf.PassthroughFd()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		lf.Release(context.Background())
		return nil, fs.ToErrno(err)
	}
	return &handle{lf: lf, fd: fd, ino: st.Ino, fs: f}, 0
}

// unwrap gives go-fuse's loopback the backing file under a handle.
func unwrap(fh fs.FileHandle) fs.FileHandle {
	if h, ok := fh.(*handle); ok {
		return h.lf
	}
	return fh
}

func (h *handle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	var n int
	var err error
	if d := h.fs.files[h.ino]; d != nil {
		n, err = d.read(buf, off)
	} else {
		n, err = unix.Pread(h.fd, buf, off)
	}
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(buf[:n]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	errno := h.fs.change(func() syscall.Errno {
		d, err := h.dirty()
		if err == nil {
			err = d.write(data, off)
		}
		return fs.ToErrno(err)
	})
	if errno != 0 {
		return 0, errno
	}
	return uint32(len(data)), 0
}

// dirty returns the file's dirty pages, new ones if it has none. Call it
// with fs.mu held.
func (h *handle) dirty() (*dirtyFile, error) {
	if d := h.fs.files[h.ino]; d != nil {
		return d, nil
	}
	// A descriptor of its own, valid after the writer has closed its.
	fd, err := unix.FcntlInt(uintptr(h.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d, err := newDirtyFile(os.NewFile(uintptr(fd), ""))
	if err != nil {
		return nil, err
	}
	h.fs.files[h.ino] = d
	return d, nil
}

// Fsync writes the file's dirty pages (from whichever handle they came) and
// fsyncs it; fdatasync does the same. It takes SetSyncDelay's delay first.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if d := time.Duration(h.fs.syncDelay.Load()); d > 0 {
		time.Sleep(d) // the device's own time: nothing here waits for anything
	}
	return h.fs.change(func() syscall.Errno {
		d := h.fs.files[h.ino]
		if d == nil {
			return fs.ToErrno(unix.Fsync(h.fd))
		}
		if err := d.sync(); err != nil {
			return fs.ToErrno(err)
		}
		delete(h.fs.files, h.ino)
		return fs.ToErrno(d.close())
	})
}

func (h *handle) Flush(ctx context.Context) syscall.Errno   { return h.lf.Flush(ctx) }
func (h *handle) Release(ctx context.Context) syscall.Errno { return h.lf.Release(ctx) }
