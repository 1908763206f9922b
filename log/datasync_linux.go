package log

import (
	"os"
	"syscall"
)

// datasync makes f's data durable (fdatasync): unlike fsync, it writes no
// metadata that reading the data does not need, such as the times.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
