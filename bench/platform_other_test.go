//go:build !linux

package bench

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// fdatasync falls back to fsync where fdatasync does not exist.
func fdatasync(f *os.File) error { return f.Sync() }

// allocatedBytes returns fi's size: block counts are not portable.
func allocatedBytes(fi os.FileInfo) int64 { return fi.Size() }

// filesystem is unknown outside Linux.
func filesystem(string) string { return "unknown" }

// kernelRelease names the operating system only.
func kernelRelease() string { return runtime.GOOS }

// processCPU returns 0: the process's CPU time is read on Linux only.
func processCPU() time.Duration { return 0 }

// childCPU returns 0: a child's CPU time is read on Linux only.
func childCPU(int) (time.Duration, error) { return 0, nil }

// childAttributes are the default ones: a server process outlives a
// benchmark process that dies without closing it.
func childAttributes() *syscall.SysProcAttr { return nil }
