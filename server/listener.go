package server

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// defaultMaxConnections is DefaultOptions' MaxConnections, as many as the
// Kafka listener's default. An HTTP client keeps one or two connections
// (Go's keeps two idle per host), and an idle one costs the server a
// goroutine and its read and write buffers, about 18 KiB of heap and stack
// (BenchmarkIdleHTTPConnection), so the cap holds them near 180 MiB, well
// inside the open-file limit (Go raises the soft limit to the hard one,
// commonly 65,536 or more), where accepting would fail.
const defaultMaxConnections = 10000

// HTTPServer returns an http.Server serving s with the Options' timeouts
// and header bound, whose Shutdown ends long polls at once. Serve it on
// LimitListener to cap the connections.
func (s *Server) HTTPServer() *http.Server {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	hs.RegisterOnShutdown(s.EndLongPolls)
	return hs
}

// LimitListener returns ln closing each connection it accepts while
// Options.MaxConnections are open, as a Kafka broker's max.connections
// bounds its listener. A refused client sees its connection closed before
// any answer.
func (s *Server) LimitListener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, max: int64(s.opts.MaxConnections), log: s.log}
}

// refusalLogEvery spaces the log lines of connections refused at
// MaxConnections.
const refusalLogEvery = 10 * time.Second

// limitListener counts the connections it accepted that are still open.
type limitListener struct {
	net.Listener
	max  int64
	log  *slog.Logger
	open atomic.Int64

	mu            sync.Mutex
	refused       int       // guarded by mu: since refusedLogged
	refusedLogged time.Time // guarded by mu
}

// Accept returns the next connection within the cap.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: conn, l: l}, nil
		}
		l.open.Add(-1)
		conn.Close()
		l.mu.Lock()
		l.refused++
		if now := time.Now(); now.Sub(l.refusedLogged) >= refusalLogEvery {
			l.log.Warn("closing new HTTP connections: MaxConnections are open", "max", l.max, "closed", l.refused, "remote", conn.RemoteAddr().String())
			l.refused, l.refusedLogged = 0, now
		}
		l.mu.Unlock()
	}
}

// limitedConn gives its place back when closed, once.
type limitedConn struct {
	net.Conn
	l      *limitListener
	closed atomic.Bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	if !c.closed.Swap(true) {
		c.l.open.Add(-1)
	}
	return err
}

// CloseWrite lets net/http end its side of a TCP connection before
// closing it, as it does on the connection itself.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
