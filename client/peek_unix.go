//go:build unix

package client

import (
	"errors"
	"net"
	"syscall"
)

// leanSupported tells whether a Client may send through the lean
// transport: only where a peeker can check an idle connection before it
// is reused.
const leanSupported = true

// peeker tells whether an idle connection is still open: the server
// closes idle connections when it likes, and a request written on one it
// closed is lost without an answer.
type peeker struct {
	rc   syscall.RawConn
	read func(fd uintptr) bool // made once: a check allocates nothing
	n    int
	err  error
	one  [1]byte
}

func newPeeker(nc net.Conn) peeker {
	var p peeker
	if sc, ok := nc.(syscall.Conn); ok {
		p.rc, _ = sc.SyscallConn()
	}
	return p
}

// open reports whether the connection is open and has nothing to read: a
// read that would block. An end of file, an error or bytes nobody asked
// for all mean the connection cannot carry a request.
func (p *peeker) open() bool {
	if p.rc == nil {
		return true
	}
	if p.read == nil {
		p.read = func(fd uintptr) bool {
			p.n, p.err = syscall.Read(int(fd), p.one[:])
			return true // never wait
		}
	}
	if err := p.rc.Read(p.read); err != nil {
		return false
	}
	return p.n < 0 && errors.Is(p.err, syscall.EAGAIN)
}
