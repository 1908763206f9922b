package server

// WaitResponses waits until every response offered to the cache has been
// kept or dropped, so that a test's next GET is a deterministic hit.
func (s *Server) WaitResponses() { s.responses.Wait() }

// OnPollWait makes f be called each time a long poll starts waiting. Call
// it before serving.
func (s *Server) OnPollWait(f func()) { s.pollWaiting = f }

// Classify returns the status and code an error is answered with.
func Classify(err error) (int, string) {
	e := classify(err)
	return e.status, e.code
}
