package server

// OnPollWait makes f be called each time a long poll starts waiting. Call
// it before serving.
func (s *Server) OnPollWait(f func()) { s.pollWaiting = f }

// Classify returns the status and code an error is answered with.
func Classify(err error) (int, string) {
	e := classify(err)
	return e.status, e.code
}
