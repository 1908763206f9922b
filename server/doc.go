// Package server is offsetd's HTTP/JSON API: consumer clients commit and poll
// their offsets, operators manage static topics, and Prometheus scrapes
// metrics. It holds no state of its own beyond a lossy response cache and its
// metrics: every answer comes from the coordinator.
//
// Polling is cheap by design. Group offsets, mappings and routes carry their
// version as an ETag; a request with If-None-Match naming the current version
// is answered 304 without encoding anything, and with ?wait=30s it is held
// until the version changes (200) or the wait ends (304). The encoded body at
// a version is kept in a bounded ristretto cache keyed by what it was derived
// from and that version, so a miss only costs an encode.
//
// Lifecycle:
//
//	m := server.NewMetrics()
//	opts := coordinator.DefaultOptions()
//	opts.Observer = m            // batch sizes and sync latencies
//	opts.LoadInBackground = true // /healthz answers while partitions load
//	c, err := coordinator.Open(dir, opts)
//	if err != nil { ... }
//	s, err := server.New(c, server.Options{Metrics: m})
//	if err != nil { ... }
//	hs := s.HTTPServer() // Options' timeouts; Shutdown ends long polls at once
//	ln, err := net.Listen("tcp", "127.0.0.1:7070")
//	if err != nil { ... }
//	go hs.Serve(s.LimitListener(ln)) // at most Options.MaxConnections open
//	...
//	hs.Shutdown(ctx) // stop accepting, finish in-flight requests
//	s.Close()        // free the response cache, no request in flight
//	c.Close()        // finish queued commits, close the logs
package server
