package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
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

// clockTicks is the unit of the CPU times in /proc/PID/stat: USER_HZ,
// 100 on every architecture Linux exports to user space.
const clockTicks = 100

// childCPU returns the CPU time process pid has used so far, user and
// system, every thread's, as /proc/PID/stat counts it (in clock ticks:
// 10 ms steps). It reads a running child that cannot be asked itself, as
// a server process of the benchmark's is (serverChild.stats).
func childCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// childAttributes are the attributes a server process of the benchmark
// starts with: it is killed when the benchmark's process dies, so that a
// benchmark that panics or times out leaves no server running.
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
