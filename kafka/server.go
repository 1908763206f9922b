package kafka

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Server serves the Kafka protocol on a listener as a one-broker cluster
// whose only business is group coordination: ApiVersions, Metadata (any
// topic exists, with no partitions and a stable ID derived from its name),
// SASL/PLAIN, and everything Handler answers. A malformed, truncated or
// oversized frame, or an unknown API key or version, closes that
// connection and nothing else.
type Server struct {
	h    *Handler
	opts ServerOptions
	log  *slog.Logger
	want []byte // SHA-256 of the token; nil when auth is off
	// budget is the memory of the large frames being read or answered,
	// shared by every connection.
	budget *budget

	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners map[net.Listener]bool // guarded by mu
	conns     map[net.Conn]bool     // guarded by mu
	closed    bool                  // guarded by mu
	// refused counts the connections closed at MaxConnections since
	// refusedLogged, when the last of them was logged: one line a
	// refusalLogEvery however many come.
	refused       int       // guarded by mu
	refusedLogged time.Time // guarded by mu
	wg            sync.WaitGroup
}

// NewServer returns a Server answering with h. opts is copied; bad values
// are reported by name.
func NewServer(h *Handler, opts ServerOptions) (*Server, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Server{h: h, opts: opts, log: opts.Logger, budget: newBudget(opts.MaxQueuedBytes), listeners: map[net.Listener]bool{}, conns: map[net.Conn]bool{}}
	if opts.AuthToken != "" {
		sum := sha256.Sum256([]byte(opts.AuthToken))
		s.want = sum[:]
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Serve accepts connections on ln until Close; it returns nil after
// Close, or the error that stopped accepting. Wrap ln with tls.NewListener
// to serve TLS.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = true
	s.mu.Unlock()
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			if closed {
				delete(s.listeners, ln)
			}
			s.mu.Unlock()
			if closed {
				return nil
			}
			if isTimeout(err) {
				continue
			}
			if outOfFiles(err) {
				// Out of file descriptors: wait for connections to
				// close instead of giving up serving, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("kafka: accepting a connection", "err", err, "retry in", backoff)
				select {
				case <-time.After(backoff):
				case <-s.ctx.Done():
				}
				continue
			}
			s.mu.Lock()
			delete(s.listeners, ln)
			s.mu.Unlock()
			return err
		}
		backoff = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			continue
		}
		if len(s.conns) >= s.opts.MaxConnections {
			report := s.countRefusal()
			s.mu.Unlock()
			conn.Close()
			if report > 0 {
				s.log.Warn("kafka: closing new connections: MaxConnections are open", "max", s.opts.MaxConnections, "closed", report, "remote", conn.RemoteAddr().String())
			}
			continue
		}
		s.conns[conn] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(conn)
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
		}()
	}
}

// refusalLogEvery spaces the log lines of connections refused at
// MaxConnections.
const refusalLogEvery = 10 * time.Second

// countRefusal counts a connection closed at MaxConnections, and returns
// how many to log: those since the last line, once a refusalLogEvery, else
// 0. s.mu is held.
func (s *Server) countRefusal() int {
	s.refused++
	now := time.Now()
	if now.Sub(s.refusedLogged) < refusalLogEvery {
		return 0
	}
	n := s.refused
	s.refused, s.refusedLogged = 0, now
	return n
}

// outOfFiles reports an accept that failed for want of file descriptors or
// buffers: it passes as connections close.
func outOfFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// Close stops accepting, closes every connection and waits for their
// goroutines. Requests waiting in a group end with the Handler's Close.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// connState is what a connection has negotiated.
type connState struct {
	handshaken bool // SaslHandshake chose PLAIN
	authed     bool
}

// serveConn answers one connection's requests, one at a time as Kafka
// does, until it closes, fails or breaks a bound of ServerOptions.
func (s *Server) serveConn(conn net.Conn) {
	defer conn.Close()
	frames := frameReader{
		r:        bufio.NewReader(conn),
		conn:     conn,
		maxBytes: s.opts.MaxFrameBytes,
		idle:     s.opts.IdleTimeout,
		rest:     s.opts.FrameTimeout,
		budget:   s.budget,
		done:     s.ctx.Done(),
	}
	defer frames.release()
	st := connState{authed: s.want == nil}
	local, _ := conn.LocalAddr().(*net.TCPAddr)
	from := Client{Host: conn.RemoteAddr().String()}
	var out []byte
	for {
		frame, err := frames.next()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
			case errors.Is(err, errIdle):
				s.log.Debug("kafka: closing idle connection", "remote", from.Host, "client", from.ID, "err", err)
			default:
				s.log.Warn("kafka: closing connection", "remote", from.Host, "client", from.ID, "err", err)
			}
			return
		}
		rq, err := parseRequest(frame)
		if err != nil {
			s.log.Warn("kafka: closing connection", "remote", from.Host, "err", err)
			return
		}
		from.ID = rq.clientID
		resp, err := s.answer(rq, &st, from, local)
		if err != nil {
			s.log.Warn("kafka: closing connection", "remote", from.Host, "api", kmsg.NameForKey(rq.key), "version", rq.version, "err", err)
			return
		}
		out = appendResponse(out[:0], rq.correlationID, resp)
		conn.SetWriteDeadline(time.Now().Add(s.opts.FrameTimeout))
		if _, err := conn.Write(out); err != nil {
			if isTimeout(err) {
				s.log.Warn("kafka: closing connection", "remote", from.Host, "client", from.ID,
					"err", fmt.Errorf("%w: the client took no response of %d bytes in %s", errFrameTimeout, len(out), s.opts.FrameTimeout))
			}
			return
		}
		if a, ok := resp.(*kmsg.SASLAuthenticateResponse); ok && a.ErrorCode != 0 {
			s.log.Warn("kafka: authentication failed", "remote", from.Host)
			return // Kafka closes the connection after a failed authentication
		}
	}
}

// answer returns the response to one request, or an error that closes the
// connection.
func (s *Server) answer(rq request, st *connState, from Client, local *net.TCPAddr) (kmsg.Response, error) {
	start := time.Now()
	observe := func(resp kmsg.Response) (kmsg.Response, error) {
		observe(s.opts.Observer, rq.key, resp, time.Since(start))
		return resp, nil
	}
	if rq.req == nil || (rq.key == int16(kmsg.ApiVersions) && !supports(serverVersions, rq.req)) {
		// A newer ApiVersions than offsetd knows: answer v0 with the
		// versions it serves, so the client can pick one. This is how
		// every client newer than offsetd starts (franz-go asks v5 and
		// takes the versions from this answer), not an error: it is
		// logged at debug and counted as answered without one.
		resp := apiVersions(0, s.h.served())
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		s.log.Debug("kafka: ApiVersions newer than served, answered with the versions served", "remote", from.Host, "client", from.ID, "version", rq.version)
		if s.opts.Observer != nil {
			s.opts.Observer.ObserveKafkaRequest(kmsg.NameForKey(rq.key), "NONE", time.Since(start))
		}
		return resp, nil
	}
	switch req := rq.req.(type) {
	case *kmsg.ApiVersionsRequest:
		return observe(apiVersions(req.Version, s.h.served()))
	case *kmsg.SASLHandshakeRequest:
		if !supports(serverVersions, req) {
			break
		}
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		switch {
		case s.want == nil || req.Mechanism != "PLAIN":
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			if s.want != nil {
				resp.SupportedMechanisms = []string{"PLAIN"}
			}
		case st.authed || st.handshaken:
			resp.ErrorCode = kerr.IllegalSaslState.Code
		default:
			st.handshaken = true
		}
		return observe(resp)
	case *kmsg.SASLAuthenticateRequest:
		if !supports(serverVersions, req) {
			break
		}
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if !st.handshaken || st.authed {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return observe(resp)
		}
		if !s.plainAllowed(req.SASLAuthBytes) {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			resp.ErrorMessage = kmsg.StringPtr("wrong user name or password")
			return observe(resp)
		}
		st.authed = true
		return observe(resp)
	}
	if !st.authed {
		return nil, fmt.Errorf("%s before authenticating", kmsg.NameForKey(rq.key))
	}
	if req, ok := rq.req.(*kmsg.MetadataRequest); ok && supports(serverVersions, req) {
		return observe(s.metadata(req, local))
	}
	if !supports(s.h.served(), rq.req) {
		return nil, fmt.Errorf("%w: %s v%d", ErrUnsupported, kmsg.NameForKey(rq.key), rq.version)
	}
	resp, err := s.h.Handle(s.ctx, rq.req, from)
	if err != nil {
		return nil, err
	}
	if fc, ok := resp.(*kmsg.FindCoordinatorResponse); ok && s.h.opts.Broker.Host == "" {
		host, port := advertised(local)
		if fc.ErrorCode == 0 && fc.Version < 4 {
			fc.Host, fc.Port = host, port
		}
		for i := range fc.Coordinators {
			if fc.Coordinators[i].ErrorCode == 0 {
				fc.Coordinators[i].Host, fc.Coordinators[i].Port = host, port
			}
		}
	}
	return resp, nil
}

// plainAllowed checks a SASL/PLAIN message: authzid NUL user NUL password.
func (s *Server) plainAllowed(msg []byte) bool {
	parts := splitNUL(msg)
	if len(parts) != 3 || len(parts[1]) == 0 {
		return false
	}
	got := sha256.Sum256(parts[2])
	return subtle.ConstantTimeCompare(got[:], s.want) == 1
}

func splitNUL(b []byte) [][]byte {
	var out [][]byte
	for {
		i := slices.Index(b, 0)
		if i < 0 {
			return append(out, b)
		}
		out = append(out, b[:i])
		b = b[i+1:]
	}
}

// apiVersions lists exactly the APIs and versions offsetd serves.
func apiVersions(version int16, handler map[int16]versionRange) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	for _, vs := range []map[int16]versionRange{serverVersions, handler} {
		for key, v := range vs {
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MinVersion, k.MaxVersion = key, v.min, v.max
			resp.ApiKeys = append(resp.ApiKeys, k)
		}
	}
	slices.SortFunc(resp.ApiKeys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return resp
}

// advertised is the address a connection reached the server at.
func advertised(local *net.TCPAddr) (string, int32) {
	if local == nil {
		return "", -1
	}
	return local.IP.String(), int32(local.Port)
}

// metadata answers as a one-broker cluster, or lists the nodes of a
// cluster. Every topic asked for by name
// exists, so that admin clients resolve the topics they commit offsets
// for; it has no partitions, since offsetd stores no messages. A topic
// asked for by ID is found only among Options.Topics (librdkafka resolves
// the topics of its consumer-protocol assignment, which names them by ID,
// this way); any other ID is UNKNOWN_TOPIC_ID.
func (s *Server) metadata(req *kmsg.MetadataRequest, local *net.TCPAddr) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	b := s.h.opts.Broker
	if b.Host == "" {
		b.Host, b.Port = advertised(local)
	}
	brokers := s.h.opts.Brokers
	if brokers == nil {
		brokers = []Broker{b}
	}
	for _, nb := range brokers {
		broker := kmsg.NewMetadataResponseBroker()
		broker.NodeID, broker.Host, broker.Port = nb.NodeID, nb.Host, nb.Port
		resp.Brokers = append(resp.Brokers, broker)
	}
	resp.ClusterID = kmsg.StringPtr("offsetd")
	resp.ControllerID = b.NodeID
	for _, t := range req.Topics {
		rt := kmsg.NewMetadataResponseTopic()
		if t.Topic == nil || *t.Topic == "" {
			rt.TopicID = t.TopicID
			if name, ok := s.h.topicByID(t.TopicID); ok {
				rt.Topic = kmsg.StringPtr(name)
				s.h.describeTopic(&rt, name, b.NodeID)
			} else {
				rt.ErrorCode = kerr.UnknownTopicID.Code
			}
		} else {
			rt.Topic = kmsg.StringPtr(*t.Topic)
			if !s.h.describeTopic(&rt, *t.Topic, b.NodeID) {
				rt.TopicID = TopicID(*t.Topic)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// TopicID is the stable ID offsetd gives a topic in Metadata: the first 16
// bytes of the SHA-256 of its name.
func TopicID(topic string) [16]byte {
	sum := sha256.Sum256([]byte("offsetd topic\x00" + topic))
	return [16]byte(sum[:16])
}
