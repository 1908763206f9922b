package server

import "net"

// OnPollWait makes f be called each time a long poll starts waiting. Call
// it before serving.
func (s *Server) OnPollWait(f func()) { s.pollWaiting = f }

// OnEncode makes f be called each time a response is encoded (a miss of
// the response cache), before it is offered to the cache. Call it before
// serving.
func (s *Server) OnEncode(f func()) { s.encoded = f }

// Classify returns the status and code an error is answered with.
func Classify(err error) (int, string) {
	e := classify(err)
	return e.status, e.code
}

// OpenConnections is how many connections ln, from LimitListener, has open.
func OpenConnections(ln net.Listener) int64 { return ln.(*limitListener).open.Load() }
