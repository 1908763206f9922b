package client_test

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/server"
	"github.com/offsetd/offsetd/statictopic"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newServer runs a real coordinator and server on loopback; wrap, if not
// nil, stands in front of the server.
func newServer(t *testing.T, sopts server.Options, tls bool, wrap func(http.Handler) http.Handler) (*httptest.Server, *coordinator.Coordinator) {
	t.Helper()
	opts := coordinator.DefaultOptions()
	opts.Partitions = 2
	opts.Logger = quiet
	c, err := coordinator.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	sopts.Logger = quiet
	s, err := server.New(c, sopts)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = s
	if wrap != nil {
		h = wrap(s)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.Config.RegisterOnShutdown(s.Close)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshakes the tests fail on purpose
	if tls {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(func() {
		ts.Close()
		s.Close()
		c.Close()
	})
	return ts, c
}

func newClient(t *testing.T, ts *httptest.Server, opts client.Options) *client.Client {
	t.Helper()
	if opts.HTTPClient == nil {
		opts.HTTPClient = ts.Client()
	}
	c, err := client.New(ts.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOffsets(t *testing.T) {
	ts, _ := newServer(t, server.Options{}, false, nil)
	c := newClient(t, ts, client.Options{})
	ctx := t.Context()
	group, topic := "team/a b?%", "orders/eu"
	v, err := c.Commit(ctx, group, 3, []client.OffsetCommit{
		{Topic: topic, Partition: 0, Offset: 42, LeaderEpoch: 1, Metadata: "m"},
		{Topic: topic, Partition: 1, Offset: 7, LeaderEpoch: -1},
		{Topic: "other", Partition: 0, Offset: 1, LeaderEpoch: -1},
	})
	if err != nil || v == 0 {
		t.Fatalf("Commit: %d, %v", v, err)
	}
	g, err := c.GroupOffsets(ctx, group, "")
	if err != nil {
		t.Fatal(err)
	}
	if g.Group != group || g.Version != v || g.Generation != 3 || len(g.Offsets) != 3 {
		t.Fatalf("GroupOffsets %+v", g)
	}
	if o := g.Offsets[0]; o.Topic != topic || o.Offset != 42 || o.LeaderEpoch != 1 || o.Metadata != "m" || time.Since(o.CommitTime) > time.Minute {
		t.Fatalf("offset %+v", o)
	}
	if g, err := c.GroupOffsets(ctx, group, "other"); err != nil || len(g.Offsets) != 1 {
		t.Fatalf("filtered: %+v, %v", g, err)
	}
	o, err := c.Offset(ctx, group, topic, 1)
	if err != nil || o.Offset != 7 {
		t.Fatalf("Offset: %+v, %v", o, err)
	}
	if groups, err := c.Groups(ctx); err != nil || !slices.Equal(groups, []string{group}) {
		t.Fatalf("Groups: %q, %v", groups, err)
	}
	if err := c.DeleteOffsets(ctx, group, topic, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Offset(ctx, group, topic, 1); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("deleted offset: %v", err)
	}
	if err := c.DeleteOffsets(ctx, group, topic); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteGroup(ctx, group); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteGroup(ctx, group); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("second DeleteGroup: %v", err)
	}
	if g, err := c.GroupOffsets(ctx, group, ""); err != nil || g.Version != 0 || len(g.Offsets) != 0 {
		t.Fatalf("deleted group: %+v, %v", g, err)
	}
	if err := c.Healthy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	ts, _ := newServer(t, server.Options{}, false, nil)
	c := newClient(t, ts, client.Options{})
	ctx := t.Context()
	if _, err := c.Commit(ctx, "g", 5, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Commit(ctx, "g", 4, []client.OffsetCommit{{Topic: "t", Offset: 2, LeaderEpoch: -1}})
	if !errors.Is(err, client.ErrStaleGeneration) || !errors.Is(err, client.ErrConflict) || errors.Is(err, client.ErrNotFound) {
		t.Fatalf("stale generation: %v", err)
	}
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Code != "stale_generation" || apiErr.Message == "" {
		t.Fatalf("as *Error: %#v", apiErr)
	}
	if _, err := c.Commit(ctx, "g", -1, nil); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("empty commit: %v", err)
	}
	if _, err := c.Commit(ctx, "", -1, []client.OffsetCommit{{Topic: "t"}}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("empty group: %v", err)
	}
	// A string that is not UTF-8 (here a lone surrogate in WTF-8) would
	// be sent as U+FFFD: refused before sending, as the server refuses
	// its JSON escape.
	lone := "t\xed\xa0\x80"
	if _, err := c.Commit(ctx, "g", -1, []client.OffsetCommit{{Topic: lone}}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("topic %q: %v", lone, err)
	}
	if _, err := c.Commit(ctx, "g", -1, []client.OffsetCommit{{Topic: "t", Metadata: lone}}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("metadata %q: %v", lone, err)
	}
	if _, err := c.CreateStaticTopic(ctx, "L", "c1", 1, []string{lone}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("broker %q: %v", lone, err)
	}
	if o, _ := c.GroupOffsets(ctx, "g", ""); len(o.Offsets) != 1 {
		t.Fatalf("group g after refused commits: %+v", o)
	}
	if _, err := c.StaticTopic(ctx, "nope", "c1"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("missing static topic: %v", err)
	}
	if _, err := c.CreateStaticTopic(ctx, "T", "c1", 1, []string{"b1"}); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = c.Translate(ctx, "T", "c1", 0, -5)
	if !errors.Is(err, client.ErrOutOfRange) || !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("out of range: %v", err)
	}
	if _, err := c.CreateStaticTopic(ctx, "T", "global", 1, []string{"b1"}); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("scope conflict: %v", err)
	}
}

func TestStaticTopics(t *testing.T) {
	ts, _ := newServer(t, server.Options{}, false, nil)
	c := newClient(t, ts, client.Options{})
	ctx := t.Context()
	for _, scope := range []string{"clusterA", "clusterB"} {
		if _, err := c.CreateStaticTopic(ctx, "TopicTest", scope, 4, []string{"b1", "b2"}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := c.RemapStaticTopic(ctx, "TopicTest", "clusterA", []statictopic.QueueMove{{QueueID: 0, ToBroker: "b3", OldLeaderMaxOffset: 12345}})
	if err != nil || m.Queues[0][1].LogicOffset != 20000 {
		t.Fatalf("remap: %+v, %v", m.Queues[0], err)
	}
	got, err := c.StaticTopic(ctx, "TopicTest", "clusterA")
	if err != nil || !got.Equal(m) {
		t.Fatalf("StaticTopic: %+v, %v", got, err)
	}
	all, err := c.StaticTopics(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("StaticTopics: %d, %v", len(all), err)
	}
	if inA, err := c.StaticTopics(ctx, "clusterA"); err != nil || len(inA) != 1 {
		t.Fatalf("StaticTopics(clusterA): %d, %v", len(inA), err)
	}
	broker, pq, po, err := c.Translate(ctx, "TopicTest", "clusterA", 0, 20005)
	if err != nil || broker != "b3" || po != 5 {
		t.Fatalf("Translate: %s %d %d %v", broker, pq, po, err)
	}
	if q, lo, err := c.TranslateToLogic(ctx, "TopicTest", "clusterA", "b3", pq, 5); err != nil || q != 0 || lo != 20005 {
		t.Fatalf("TranslateToLogic: %d %d %v", q, lo, err)
	}

	rt, err := c.Route(ctx, "TopicTest", "clusterB", statictopic.Consumer)
	if err != nil || len(rt.Queues) != 4 || rt.ETag == "" {
		t.Fatalf("Route: %+v, %v", rt, err)
	}
	if err := c.SetGlobalRead(ctx, "clusterA", true); err != nil {
		t.Fatal(err)
	}
	rt2, changed, err := c.PollRoute(ctx, "TopicTest", "clusterB", statictopic.Consumer, rt.ETag, time.Minute)
	if err != nil || !changed || len(rt2.Queues) != 8 {
		t.Fatalf("PollRoute after the switch: %d queues, %v, %v", len(rt2.Queues), changed, err)
	}
	if _, changed, err := c.PollRoute(ctx, "TopicTest", "clusterB", statictopic.Consumer, rt2.ETag, 0); err != nil || changed {
		t.Fatalf("PollRoute unchanged: %v, %v", changed, err)
	}
	scopes, err := c.Scopes(ctx)
	if err != nil || len(scopes) != 2 || !scopes[0].GlobalRead || scopes[0].BrokerName != "__logic__clusterA" {
		t.Fatalf("Scopes: %+v, %v", scopes, err)
	}

	// Put back a mapping with a higher epoch; a lower one conflicts.
	up := m.Clone()
	up.Epoch++
	if err := c.PutStaticTopic(ctx, up); err != nil {
		t.Fatal(err)
	}
	if err := c.PutStaticTopic(ctx, m); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("stale put: %v", err)
	}
	if _, changed, err := c.PollStaticTopic(ctx, "TopicTest", "clusterA", up.Epoch, 0); err != nil || changed {
		t.Fatalf("PollStaticTopic at the current epoch: %v %v", changed, err)
	}
	if got, changed, err := c.PollStaticTopic(ctx, "TopicTest", "clusterA", m.Epoch, time.Minute); err != nil || !changed || got.Epoch != up.Epoch {
		t.Fatalf("PollStaticTopic at an old epoch: %v %v", changed, err)
	}
}

// A poll returns once another client commits (or at once, if that commit
// landed before the poll looked): either way with the new version.
func TestPollGroupOffsets(t *testing.T) {
	ts, _ := newServer(t, server.Options{}, false, nil)
	a := newClient(t, ts, client.Options{})
	b := newClient(t, ts, client.Options{HTTPClient: &http.Client{}})
	ctx := t.Context()
	v, err := a.Commit(ctx, "g", -1, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, changed, err := a.PollGroupOffsets(ctx, "g", "", v, 0); err != nil || changed {
		t.Fatalf("poll at the current version: %v, %v", changed, err)
	}
	type result struct {
		g       client.GroupOffsets
		changed bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		g, changed, err := a.PollGroupOffsets(ctx, "g", "", v, time.Minute)
		done <- result{g, changed, err}
	}()
	v2, err := b.Commit(ctx, "g", -1, []client.OffsetCommit{{Topic: "t", Offset: 2, LeaderEpoch: -1}})
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.changed || r.g.Version != v2 || r.g.Offsets[0].Offset != 2 {
		t.Fatalf("poll: %+v", r)
	}
}

// A 503 is retried after its Retry-After; a commit refused with 503 wrote
// nothing, so the retry is safe.
func TestRetries(t *testing.T) {
	var refuse, seen atomic.Int32
	ts, coord := newServer(t, server.Options{}, false, refusing(&refuse, &seen))
	ctx := t.Context()

	refuse.Store(2)
	c := newClient(t, ts, client.Options{Retries: 2})
	if _, err := c.Commit(ctx, "g", -1, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatalf("commit after two 503s: %v", err)
	}
	if seen.Load() != 3 {
		t.Fatalf("%d requests, want 3", seen.Load())
	}
	if o, ok, _ := coord.Fetch("g", "t", 0); !ok || o.Offset != 1 {
		t.Fatal("the retried commit is not there")
	}

	refuse.Store(10)
	seen.Store(0)
	_, err := c.Groups(ctx)
	var apiErr *client.Error
	if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &apiErr) || apiErr.Code != "loading" {
		t.Fatalf("after the retries: %v", err)
	}
	if seen.Load() != 3 {
		t.Fatalf("%d requests, want 3", seen.Load())
	}

	seen.Store(0)
	never := newClient(t, ts, client.Options{Retries: -1})
	if err := never.Healthy(ctx); !errors.Is(err, client.ErrUnavailable) || seen.Load() != 1 {
		t.Fatalf("Retries -1: %v after %d requests", err, seen.Load())
	}

	// Every retry waits, however many there are: the doubling wait does
	// not overflow to none after some 40 attempts.
	refuse.Store(1000)
	seen.Store(0)
	many := newClient(t, ts, client.Options{Retries: 300, MaxRetryWait: time.Millisecond})
	start := time.Now()
	if err := many.Healthy(ctx); !errors.Is(err, client.ErrUnavailable) || seen.Load() != 301 {
		t.Fatalf("Retries 300: %v after %d requests", err, seen.Load())
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("300 retries with waits of 1ms took %v", took)
	}

	// A cancelled context ends the wait between retries.
	refuse.Store(10)
	patient := newClient(t, ts, client.Options{Retries: 5, MaxRetryWait: time.Hour})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := patient.Healthy(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestAuthAndTLS(t *testing.T) {
	ts, _ := newServer(t, server.Options{AuthToken: "s3cret"}, true, nil)
	ctx := t.Context()
	anon := newClient(t, ts, client.Options{})
	if _, err := anon.Groups(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("without token: %v", err)
	}
	if err := anon.Healthy(ctx); err != nil {
		t.Fatalf("healthz needs no token: %v", err)
	}
	c := newClient(t, ts, client.Options{Token: "s3cret"})
	if _, err := c.Commit(ctx, "g", -1, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	untrusting, err := client.New(ts.URL, client.Options{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusting.Groups(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client that does not trust the certificate: %v", err)
	}
}

func TestNew(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:7070", "http://127.0.0.1:7070", "https://example.com/offsetd/", "localhost:1"} {
		if _, err := client.New(ok, client.Options{}); err != nil {
			t.Errorf("New(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"ftp://x", "http://", "http://h:1/?q=1", "://"} {
		if _, err := client.New(bad, client.Options{}); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
}

// A base URL with a path prefixes every route, for servers behind a proxy.
func TestPathPrefix(t *testing.T) {
	ts, _ := newServer(t, server.Options{}, false, func(next http.Handler) http.Handler {
		return http.StripPrefix("/offsetd", next)
	})
	c, err := client.New(ts.URL+"/offsetd/", client.Options{HTTPClient: ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commit(t.Context(), "a/b", -1, []client.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	if g, err := c.Groups(t.Context()); err != nil || !slices.Equal(g, []string{"a/b"}) {
		t.Fatalf("Groups: %v, %v", g, err)
	}
}

// TestIdleConnections: a Client of its own transport keeps a connection per
// caller between calls, so 64 goroutines calling at once dial once each,
// not on every call (Go's default transport keeps 2 idle per host: the
// second round would dial 62 more).
func TestIdleConnections(t *testing.T) {
	const callers = 64
	var dials atomic.Int64
	// Every caller of a round holds its connection until all have one:
	// the round needs callers connections at once.
	var mu sync.Mutex
	arrived, gate := 0, make(chan struct{})
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		g := gate
		if arrived++; arrived == callers {
			arrived = 0
			close(gate)
			gate = make(chan struct{})
		}
		mu.Unlock()
		<-g
		w.WriteHeader(http.StatusNoContent)
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	c, err := client.New(ts.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	round := func() {
		t.Helper()
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				if err := c.Healthy(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	round()
	if n := dials.Load(); n != callers {
		t.Fatalf("the first round dialed %d connections, want %d", n, callers)
	}
	round()
	// A connection goes back to the pool just after its caller has read
	// the answer, so a caller of the next round can now and then miss it
	// and dial: allow some, never the 62 or more of a pool of 2.
	if n := dials.Load() - callers; n > callers/2 {
		t.Fatalf("the second round dialed %d new connections, want at most %d", n, callers/2)
	}
}

// refusing wraps a server's handler: it counts every request in seen and
// answers 503 (Retry-After 0, the server's "loading" error) while refuse,
// taken down by one per request, stays at zero or above.
func refusing(refuse, seen *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Add(1)
			if refuse.Add(-1) >= 0 {
				w.Header().Set("Retry-After", "0")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `{"error":"partition 0 loading","code":"loading"}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
