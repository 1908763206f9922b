//go:build !linux

package log

import "os"

// datasync makes f's data durable; where fdatasync is not at hand, with
// fsync.
func datasync(f *os.File) error { return f.Sync() }
