package server_test

import (
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/server"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a real coordinator in a temporary directory behind a real
// listener on loopback.
type env struct {
	t    testing.TB
	dir  string
	c    *coordinator.Coordinator
	s    *server.Server
	ts   *httptest.Server
	http *http.Client
	hdr  http.Header // sent with every request
}

type envConfig struct {
	coord  func(*coordinator.Options)
	server func(*server.Options)
	tls    bool
	// hook runs between creating the Server and serving it.
	hook func(*server.Server)
	// limits serves with the Server's own http.Server (its timeouts) on
	// its LimitListener, as offsetd serve does.
	limits bool
}

func newEnv(t testing.TB, cfg envConfig) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), hdr: http.Header{}}
	copts := coordinator.DefaultOptions()
	copts.Partitions = 4
	copts.Logger = quiet
	if cfg.coord != nil {
		cfg.coord(&copts)
	}
	e.c = e.open(copts)
	sopts := server.Options{Logger: quiet}
	if cfg.server != nil {
		cfg.server(&sopts)
	}
	s, err := server.New(e.c, sopts)
	if err != nil {
		t.Fatal(err)
	}
	e.s = s
	if cfg.hook != nil {
		cfg.hook(s)
	}
	e.ts = httptest.NewUnstartedServer(s)
	e.ts.Config.RegisterOnShutdown(s.EndLongPolls)
	if cfg.limits {
		e.ts.Config = s.HTTPServer()
		e.ts.Listener = s.LimitListener(e.ts.Listener)
	}
	e.ts.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshakes the tests fail on purpose
	if cfg.tls {
		e.ts.StartTLS()
	} else {
		e.ts.Start()
	}
	e.http = e.ts.Client()
	t.Cleanup(func() {
		e.ts.Close()
		s.Close()
		e.c.Close()
	})
	return e
}

func (e *env) open(opts coordinator.Options) *coordinator.Coordinator {
	e.t.Helper()
	c, err := coordinator.Open(e.dir, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return string(r.body) }

// decode unmarshals the body into v, failing the test if it does not fit.
func (r response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
}

// errorCode returns the code of an error body, failing the test if the body
// is not the error JSON.
func (r response) errorCode(t testing.TB) string {
	t.Helper()
	var body struct {
		Error           string `json:"error"`
		Code            string `json:"code"`
		NextLogicOffset *int64 `json:"nextLogicOffset"`
	}
	dec := json.NewDecoder(strings.NewReader(string(r.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Error == "" || body.Code == "" {
		t.Fatalf("status %d: body %q is not {\"error\",\"code\"[,\"nextLogicOffset\"]} (%v)", r.status, r.body, err)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type %q", ct)
	}
	return body.Code
}

// do sends one request; hdr holds alternating header names and values.
func (e *env) do(method, path, body string, hdr ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range e.hdr {
		req.Header[k] = v
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.http.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// must sends a request and fails the test unless it gets status.
func (e *env) must(status int, method, path, body string, hdr ...string) response {
	e.t.Helper()
	r := e.do(method, path, body, hdr...)
	if r.status != status {
		e.t.Fatalf("%s %s %s: status %d, want %d; body %s", method, path, body, r.status, status, r.body)
	}
	return r
}

// fail sends a request that must fail with status and code.
func (e *env) fail(status int, code, method, path, body string, hdr ...string) response {
	e.t.Helper()
	r := e.must(status, method, path, body, hdr...)
	if got := r.errorCode(e.t); got != code {
		e.t.Fatalf("%s %s %s: code %q, want %q; body %s", method, path, body, got, code, r.body)
	}
	return r
}

// groupOffsets is the JSON of GET /v1/groups/{group}/offsets.
type groupOffsets struct {
	Group      string   `json:"group"`
	Version    uint64   `json:"version"`
	Generation int32    `json:"generation"`
	Offsets    []offset `json:"offsets"`
}

type offset struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	Metadata    string `json:"metadata"`
	CommitTime  int64  `json:"commitTime"`
}

func (e *env) groupOffsets(group string) groupOffsets {
	e.t.Helper()
	var g groupOffsets
	e.must(http.StatusOK, "GET", "/v1/groups/"+group+"/offsets", "").decode(e.t, &g)
	return g
}

// assertEmpty checks that the coordinator holds nothing at all.
func (e *env) assertEmpty() {
	e.t.Helper()
	if g := e.c.Groups(); len(g) != 0 {
		e.t.Fatalf("groups %v were written", g)
	}
	if m := e.c.StaticTopics(); len(m) != 0 {
		e.t.Fatalf("static topics %v were written", m)
	}
	if s := e.c.Scopes(); len(s) != 0 {
		e.t.Fatalf("scopes %v were written", s)
	}
}
