package bench

import (
	"os"
	"strings"
	"syscall"
	"time"
)

// fdatasync flushes f's data, and the metadata needed to read it back, to
// stable storage: the cheapest durable sync Linux offers.
func fdatasync(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) { serr = syscall.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

// allocatedBytes returns the disk space fi takes: its allocated blocks,
// which for a preallocated or sparse file differ from its size.
func allocatedBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// filesystemNames maps statfs magic numbers to names (linux/magic.h).
var filesystemNames = map[int64]string{
	0xEF53:     "ext4", // also ext2 and ext3
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x2FC12FC1: "zfs",
	0x01021994: "tmpfs",
	0x858458f6: "ramfs",
	0x794c7630: "overlayfs",
	0xF2F52010: "f2fs",
	0x6969:     "nfs",
}

// filesystem names the filesystem that holds dir.
func filesystem(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	if name, ok := filesystemNames[int64(st.Type)]; ok {
		return name
	}
	return "unknown"
}

// kernelRelease returns the running kernel's release, as uname -r prints it.
func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return "linux " + strings.TrimSpace(string(b))
}

// processCPU returns the CPU time the process has used so far, user and
// system, or 0 where it cannot tell.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
