package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/coordinator"
)

// Options configures a Server. Zero fields take the values of
// DefaultOptions.
type Options struct {
	// MaxBodyBytes bounds a request body; a larger one is answered 413.
	MaxBodyBytes int64
	// MaxWait caps the ?wait= of a long poll.
	MaxWait time.Duration
	// ResponseCacheBytes is the budget of the cache of encoded responses;
	// a negative value turns the cache off.
	ResponseCacheBytes int64
	// AuthToken, when not empty, is the bearer token every /v1 request must
	// carry (Authorization: Bearer <token>). /healthz, /readyz and /metrics
	// stay open.
	AuthToken string
	// Logger receives request errors and server events. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Metrics records the server's measurements; pass the same value as the
	// coordinator's Options.Observer to also record the write path. Nil
	// means a fresh Metrics (without write-path measurements). One Metrics
	// serves one Server.
	Metrics *Metrics
	// Membership, if set, answers GET /v1/groups/{group}/members with the
	// group's live members (offsetd's Kafka listener holds them).
	Membership Membership
	// Registry is where the metrics are registered and what /metrics
	// serves. Nil means a registry of the Server's own, which also holds
	// the Go runtime and process collectors.
	Registry *prometheus.Registry
	// Cluster, set on a node of a cluster, tells where the other nodes
	// serve clients: requests for a partition this node does not lead are
	// answered 421 with the leader's address, and reads of groups are
	// linearizable. Nil serves a single node.
	Cluster Cluster
	// Replicas, set on a node of a cluster, serves
	// /v1/cluster/partitions: the partitions' replicas, and changes of
	// them. Nil answers those routes 404.
	Replicas ReplicaAdmin

	// What a client can hold of the listener, in the http.Server from
	// HTTPServer and the listener from LimitListener.

	// ReadHeaderTimeout bounds the reading of a request's header.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of a whole request, header and
	// body; what follows (a long poll's wait) is not counted in it.
	ReadTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that has not begun a
	// request for this long since its last response.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header; a larger one is answered
	// 431.
	MaxHeaderBytes int
	// MaxConnections caps the connections open on LimitListener; one more
	// is closed as soon as it is accepted, and the next is accepted once
	// one has closed.
	MaxConnections int
}

// DefaultOptions returns the options a Server runs with unless told
// otherwise.
func DefaultOptions() Options {
	return Options{
		MaxBodyBytes:       1 << 20,
		MaxWait:            30 * time.Second,
		ResponseCacheBytes: 64 << 20,
		ReadHeaderTimeout:  10 * time.Second,
		ReadTimeout:        time.Minute,
		IdleTimeout:        2 * time.Minute,
		MaxHeaderBytes:     64 << 10,
		MaxConnections:     defaultMaxConnections,
	}
}

func (o *Options) ensureDefaults() {
	d := DefaultOptions()
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = d.MaxBodyBytes
	}
	if o.MaxWait == 0 {
		o.MaxWait = d.MaxWait
	}
	if o.ResponseCacheBytes == 0 {
		o.ResponseCacheBytes = d.ResponseCacheBytes
	}
	if o.ReadHeaderTimeout == 0 {
		o.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = d.ReadTimeout
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = d.IdleTimeout
	}
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = d.MaxConnections
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o Options) validate() error {
	if o.MaxBodyBytes < 0 {
		return fmt.Errorf("server: Options.MaxBodyBytes is %d, want > 0", o.MaxBodyBytes)
	}
	if o.MaxWait < 0 {
		return fmt.Errorf("server: Options.MaxWait is %s, want > 0", o.MaxWait)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"ReadHeaderTimeout", o.ReadHeaderTimeout}, {"ReadTimeout", o.ReadTimeout}, {"IdleTimeout", o.IdleTimeout}} {
		if d.d < 0 {
			return fmt.Errorf("server: Options.%s is %s, want > 0", d.name, d.d)
		}
	}
	if o.MaxHeaderBytes < 0 {
		return fmt.Errorf("server: Options.MaxHeaderBytes is %d, want > 0", o.MaxHeaderBytes)
	}
	if o.MaxConnections < 0 {
		return fmt.Errorf("server: Options.MaxConnections is %d, want > 0", o.MaxConnections)
	}
	return nil
}

// Server serves offsetd's HTTP API for one coordinator. It is an
// http.Handler, safe for concurrent use.
type Server struct {
	c         *coordinator.Coordinator
	opts      Options
	log       *slog.Logger
	mux       *http.ServeMux
	responses *cache.Responses // nil when the cache is off
	metrics   *Metrics
	auth      authenticator
	handler   http.Handler

	closeOnce sync.Once
	closing   chan struct{} // closed by Close: long polls answer at once

	// pollWaiting, if set (by tests, before serving), is called each time
	// a long poll starts waiting for a change.
	pollWaiting func()
	// encoded, if set (by tests, before serving), is called each time a
	// response was encoded because the cache did not hold it, before it
	// is offered to the cache.
	encoded func()
}

// New returns a Server for c. opts is copied; bad values are reported by
// name.
func New(c *coordinator.Coordinator, opts Options) (*Server, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		c:       c,
		opts:    opts,
		log:     opts.Logger,
		mux:     http.NewServeMux(),
		metrics: opts.Metrics,
		auth:    newAuthenticator(opts.AuthToken),
		closing: make(chan struct{}),
	}
	if opts.ResponseCacheBytes > 0 {
		r, err := cache.NewResponses(opts.ResponseCacheBytes)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.responses = r
	}
	if s.metrics == nil {
		s.metrics = NewMetrics()
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if err := s.metrics.register(reg, c); err != nil {
		s.responses.Close()
		return nil, fmt.Errorf("server: registering metrics: %w", err)
	}
	if cs, ok := opts.Cluster.(ClusterStats); ok {
		if err := reg.Register(raftCollector{cs}); err != nil {
			s.responses.Close()
			return nil, fmt.Errorf("server: registering Raft metrics: %w", err)
		}
	}
	s.routes(reg)
	s.handler = s.observe(http.HandlerFunc(s.serve))
	return s, nil
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// EndLongPolls ends every long poll at once (each answers 304), and every
// later one as soon as it starts waiting. Register it with
// http.Server.RegisterOnShutdown, so that Shutdown does not wait for polls
// to time out.
func (s *Server) EndLongPolls() {
	s.closeOnce.Do(func() { close(s.closing) })
}

// Close ends every long poll and frees the response cache. Call it after
// http.Server.Shutdown has returned, when no request is in flight; a
// request served after Close is still answered, without the cache.
func (s *Server) Close() {
	s.EndLongPolls()
	s.responses.Close()
}

// observe counts, times and (at debug level) logs every request, by the
// mux pattern that served it ("unrouted" for requests refused before
// routing).
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := recorders.Get().(*statusRecorder)
		*rec = statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		took := time.Since(start)
		status := rec.status
		*rec = statusRecorder{} // no reference to w outlives the request
		recorders.Put(rec)
		route := r.Pattern
		if route == "" {
			route = "unrouted"
		}
		s.metrics.requestDone(route, status, took)
		if s.log.Enabled(r.Context(), slog.LevelDebug) {
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "route", route, "status", status, "took", took, "remote", r.RemoteAddr)
		}
	})
}

// recorders holds the statusRecorders of finished requests: a handler
// never keeps its ResponseWriter after it returns, so each is reused.
var recorders = sync.Pool{New: func() any { return new(statusRecorder) }}

// serve rejects paths the mux would redirect, then dispatches.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		if !s.auth.allowed(r) {
			s.auth.deny(w)
			return
		}
		// The mux answers a path with an empty or dot segment with a
		// redirect; an empty group or topic is bad input here.
		p := r.URL.EscapedPath()
		if path.Clean(p) != p {
			writeError(w, errorf(http.StatusBadRequest, codeInvalidArgument, "path %q has an empty or dot segment", p))
			return
		}
		if !strings.HasPrefix(p, "/v1/cluster/") {
			if e := s.clusterReady(); e != nil && e.code == codeNodeRemoved {
				writeError(w, e)
				return
			}
		}
		// The hot reads are routed here; on a cluster node they go
		// through the mux, to their read barrier.
		if r.Method == http.MethodGet && s.opts.Cluster == nil {
			switch pattern, group, topic, partition := hotRead(p); pattern {
			case pointFetchPattern:
				r.Pattern = pattern
				s.getOffsetOf(w, r, group, topic, partition)
				return
			case groupOffsetsPattern:
				r.Pattern = pattern
				s.getGroupOffsetsOf(w, r, group)
				return
			}
		}
	}
	s.mux.ServeHTTP(w, r)
}

// route is one path of the API with its handler per method.
type route struct {
	path    string
	methods map[string]http.HandlerFunc
}

// routes registers every path. Each path also gets a method-less pattern
// that answers 405 in JSON with an Allow header, and "/" answers 404 in
// JSON; the mux's own plain-text answers never show.
func (s *Server) routes(reg *prometheus.Registry) {
	table := []route{
		{path: "/v1/groups", methods: map[string]http.HandlerFunc{
			"GET": s.listGroups,
		}},
		{path: "/v1/commits", methods: map[string]http.HandlerFunc{
			"POST": s.commitMany,
		}},
		{path: "/v1/groups/{group}", methods: map[string]http.HandlerFunc{
			"DELETE": s.deleteGroup,
		}},
		{path: "/v1/groups/{group}/offsets", methods: map[string]http.HandlerFunc{ // groupOffsetsPattern
			"GET":  s.linearizable(s.getGroupOffsets),
			"POST": s.commitOffsets,
		}},
		{path: "/v1/groups/{group}/members", methods: map[string]http.HandlerFunc{
			"GET": s.getGroupMembers,
		}},
		{path: "/v1/groups/{group}/offsets/{topic}", methods: map[string]http.HandlerFunc{
			"DELETE": s.deleteOffsets,
		}},
		{path: "/v1/groups/{group}/offsets/{topic}/{partition}", methods: map[string]http.HandlerFunc{ // pointFetchPattern
			"GET": s.linearizable(s.getOffset),
		}},
		{path: "/v1/static-topics", methods: map[string]http.HandlerFunc{
			"GET":  s.listStaticTopics,
			"POST": s.createStaticTopic,
		}},
		{path: "/v1/static-topics/{topic}", methods: map[string]http.HandlerFunc{
			"GET": s.linearizableTopic(s.getStaticTopic),
			"PUT": s.putStaticTopic,
		}},
		{path: "/v1/static-topics/{topic}/remap", methods: map[string]http.HandlerFunc{
			"POST": s.remapStaticTopic,
		}},
		{path: "/v1/static-topics/{topic}/import", methods: map[string]http.HandlerFunc{
			"POST": s.importStaticTopic,
		}},
		{path: "/v1/static-topics/{topic}/export", methods: map[string]http.HandlerFunc{
			"GET": s.linearizableTopic(s.exportStaticTopic),
		}},
		{path: "/v1/static-topics/{topic}/trim", methods: map[string]http.HandlerFunc{
			"POST": s.trimStaticTopic,
		}},
		{path: "/v1/static-topics/{topic}/readers", methods: map[string]http.HandlerFunc{
			"GET": s.staticTopicReaders,
		}},
		{path: "/v1/static-topics/{topic}/route", methods: map[string]http.HandlerFunc{
			"GET": s.getRoute,
		}},
		{path: "/v1/static-topics/{topic}/translate", methods: map[string]http.HandlerFunc{
			"GET": s.linearizableTopic(s.translate),
		}},
		{path: "/v1/scopes", methods: map[string]http.HandlerFunc{
			"GET": s.listScopes,
		}},
		{path: "/v1/scopes/{scope}/global-read", methods: map[string]http.HandlerFunc{
			"PUT": s.setGlobalRead,
		}},
		{path: "/v1/coordinator", methods: map[string]http.HandlerFunc{
			"GET": s.getCoordinator,
		}},
		{path: "/v1/cluster/partitions", methods: map[string]http.HandlerFunc{
			"GET": s.listReplicas,
		}},
		{path: "/v1/cluster/status", methods: map[string]http.HandlerFunc{
			"GET": s.clusterStatus,
		}},
		{path: "/v1/cluster/partitions/{partition}/replicas", methods: map[string]http.HandlerFunc{
			"POST": s.changeReplicas,
		}},
		{path: "/healthz", methods: map[string]http.HandlerFunc{
			"GET": s.healthz,
		}},
		{path: "/readyz", methods: map[string]http.HandlerFunc{
			"GET": s.readyz,
		}},
		{path: "/metrics", methods: map[string]http.HandlerFunc{
			"GET": metricsHandler(reg),
		}},
	}
	for _, rt := range table {
		var allow []string
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE"} {
			if h, ok := rt.methods[m]; ok {
				s.mux.Handle(m+" "+rt.path, h)
				s.metrics.routeServed(m + " " + rt.path)
				allow = append(allow, m)
			} else if m == "HEAD" && rt.methods["GET"] != nil {
				allow = append(allow, m) // GET patterns serve HEAD
			}
		}
		allowed := strings.Join(allow, ", ")
		s.mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allowed)
			writeError(w, errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed, "method %s not allowed on %s (allowed: %s)", r.Method, rt.path, allowed))
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, codeNotFound, "no such route: %s", r.URL.Path))
	})
}

// writeJSON answers with status and v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, errorf(http.StatusInternalServerError, codeInternal, "encoding the response: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// marshal encodes a response body, newline-terminated like every other.
func marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(b, '\n'), err
}

// WaitResponses waits until every response offered to the response cache
// has been kept or dropped (the cache keeps bodies asynchronously), so that
// a benchmark's or test's next identical GET is a deterministic hit.
func (s *Server) WaitResponses() { s.responses.Wait() }
