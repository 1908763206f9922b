package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/server"
)

// TestShutdownWithRequestsInFlight shuts the server down the documented
// way (EndLongPolls on shutdown, Close after Shutdown) while a GET is
// between encoding its response and offering it to the response cache: the
// request gets its whole answer, and the cache it fills is still open (a
// cache closed under it panicked in Set, which dropped the connection).
func TestShutdownWithRequestsInFlight(t *testing.T) {
	var armed atomic.Bool
	var encodes atomic.Int32
	encoding, release := make(chan struct{}), make(chan struct{})
	waiting := make(chan struct{}, 1)
	e := newEnv(t, envConfig{hook: func(s *server.Server) {
		s.OnEncode(func() {
			encodes.Add(1)
			if armed.CompareAndSwap(true, false) {
				close(encoding)
				<-release
			}
		})
		s.OnPollWait(func() { waiting <- struct{}{} })
	}})
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	e.must(http.StatusOK, "POST", "/v1/groups/h/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	etag := e.must(http.StatusOK, "GET", "/v1/groups/h/offsets", "").header.Get("ETag")

	type answer struct {
		status int
		body   []byte
		err    error
	}
	get := func(path string, hdr ...string) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := e.http.Do(req)
			if err != nil {
				out <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			out <- answer{resp.StatusCode, b, err}
		}()
		return out
	}

	armed.Store(true)
	inFlight := get("/v1/groups/g/offsets")
	<-encoding
	poll := get("/v1/groups/h/offsets?wait=1h", "If-None-Match", etag)
	<-waiting
	shutdown := make(chan error, 1)
	go func() { shutdown <- e.ts.Config.Shutdown(context.Background()) }()
	// The poll ends once the shutdown hooks have run.
	if a := <-poll; a.err != nil || a.status != http.StatusNotModified {
		t.Fatalf("long poll during shutdown: %d %v", a.status, a.err)
	}
	close(release)
	if a := <-inFlight; a.err != nil || a.status != http.StatusOK || len(a.body) == 0 {
		t.Fatalf("request in flight during shutdown: %d %q %v", a.status, a.body, a.err)
	}
	if err := <-shutdown; err != nil {
		t.Fatal(err)
	}
	// The in-flight response went into a cache that was still open.
	waited := make(chan struct{})
	go func() {
		e.s.WaitResponses()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(time.Minute): // a guard against a hang, not a wait
		t.Fatal("WaitResponses hangs: the cache was closed under it")
	}
	before := encodes.Load()
	rec := httptest.NewRecorder()
	e.s.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/groups/g/offsets", nil))
	if rec.Code != http.StatusOK || encodes.Load() != before {
		t.Fatalf("after shutdown: status %d, encoded again: %v (the cache was closed under the request)", rec.Code, encodes.Load() != before)
	}
	e.s.Close()
}
