//go:build !unix

package client

import "net"

// leanSupported is false here: without the system calls that tell whether
// an idle connection is still open, a request written on one the server
// has closed would fail (roundTrip sends again only a GET or a request it
// could not write), so a Client sends through net/http, which knows.
const leanSupported = false

// peeker stands in for the Unix one, which no Client uses here.
type peeker struct{}

func newPeeker(net.Conn) peeker { return peeker{} }

// open reports false: a connection that cannot be checked is not reused.
func (*peeker) open() bool { return false }
