package server_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/offsetd/offsetd/partitioner"
	"github.com/offsetd/offsetd/server"
)

func TestConditionalGet(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	r := e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "")
	etag := r.header.Get("ETag")
	if etag == "" || r.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("headers %v", r.header)
	}
	bare, _ := strconv.Unquote(etag)
	for _, inm := range []string{etag, "W/" + etag, `"0", ` + etag, bare, "*"} {
		r := e.must(http.StatusNotModified, "GET", "/v1/groups/g/offsets", "", "If-None-Match", inm)
		if len(r.body) != 0 || r.header.Get("ETag") != etag {
			t.Fatalf("If-None-Match %s: 304 with body %q, ETag %q", inm, r.body, r.header.Get("ETag"))
		}
	}
	e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "", "If-None-Match", `"1234567"`)

	// After a commit the old ETag no longer matches.
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":2}]}`)
	r = e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "", "If-None-Match", etag)
	if r.header.Get("ETag") == etag {
		t.Fatal("ETag unchanged by a commit")
	}

	// Mappings and routes too.
	e.must(http.StatusOK, "POST", "/v1/static-topics", `{"topic":"T","scope":"c1","totalQueues":2,"brokers":["b1"]}`)
	_, metag := e.mapping("T", "c1")
	e.must(http.StatusNotModified, "GET", "/v1/static-topics/T?scope=c1", "", "If-None-Match", metag)
	_, retag := e.route("T", "c1", "consumer")
	e.must(http.StatusNotModified, "GET", "/v1/static-topics/T/route?scope=c1&role=consumer", "", "If-None-Match", retag)
	e.must(http.StatusOK, "POST", "/v1/static-topics/T/remap", `{"scope":"c1","moves":[{"queueId":0,"toBroker":"b2","oldLeaderMaxOffset":0}]}`)
	e.must(http.StatusOK, "GET", "/v1/static-topics/T?scope=c1", "", "If-None-Match", metag)
	e.must(http.StatusOK, "GET", "/v1/static-topics/T/route?scope=c1&role=consumer", "", "If-None-Match", retag)

	// HEAD answers like GET without a body.
	r = e.must(http.StatusOK, "HEAD", "/v1/groups/g/offsets", "")
	if len(r.body) != 0 || r.header.Get("ETag") == "" {
		t.Fatalf("HEAD: body %q, headers %v", r.body, r.header)
	}
}

// pollEnv is an env whose long polls report when they start waiting.
func pollEnv(t *testing.T) (*env, <-chan struct{}) {
	waiting := make(chan struct{}, 16)
	e := newEnv(t, envConfig{hook: func(s *server.Server) {
		s.OnPollWait(func() { waiting <- struct{}{} })
	}})
	return e, waiting
}

// A long poll is held until another client commits to its group, and
// answers with the new offsets at once; commits of another group of its
// partition do not wake it.
func TestLongPollReturnsOnCommit(t *testing.T) {
	e, waiting := pollEnv(t)
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	etag := e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "").header.Get("ETag")

	done := make(chan response, 1)
	go func() {
		done <- e.do("GET", "/v1/groups/g/offsets?wait=1m", "", "If-None-Match", etag)
	}()
	<-waiting // the poll holds the request now
	// Another group in the same partition must neither answer the poll
	// nor wake it (a woken poll would report waiting again).
	part, _ := partitioner.New(e.c.Partitions())
	other := "other"
	for i := 0; part.Group(other) != part.Group("g"); i++ {
		other = "other" + strconv.Itoa(i)
	}
	second := newClientEnv(e)
	for i := range 3 {
		second.must(http.StatusOK, "POST", "/v1/groups/"+other+"/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":`+strconv.Itoa(i)+`}]}`)
	}

	second.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":2}]}`)
	r := <-done
	if r.status != http.StatusOK {
		t.Fatalf("long poll: %d %s", r.status, r.body)
	}
	var g groupOffsets
	r.decode(t, &g)
	if g.Offsets[0].Offset != 2 || r.header.Get("ETag") == etag {
		t.Fatalf("long poll answered %s (ETag %s)", r.body, r.header.Get("ETag"))
	}
	if n := len(waiting); n != 0 {
		t.Fatalf("the poll started waiting %d more times: commits of %s woke it", n, other)
	}
}

// newClientEnv is a second client (its own connections) of e's server.
func newClientEnv(e *env) *env {
	c := *e
	c.http = &http.Client{Transport: &http.Transport{}}
	e.t.Cleanup(c.http.CloseIdleConnections)
	return &c
}

func TestLongPollTimesOut(t *testing.T) {
	e := newEnv(t, envConfig{server: func(o *server.Options) { o.MaxWait = 1 }}) // every wait is capped at 1ns
	etag := e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "").header.Get("ETag")
	r := e.must(http.StatusNotModified, "GET", "/v1/groups/g/offsets?wait=1h", "", "If-None-Match", etag)
	if r.header.Get("ETag") != etag {
		t.Fatalf("304 ETag %q, want %q", r.header.Get("ETag"), etag)
	}
	// Without If-None-Match, wait is moot.
	e.must(http.StatusOK, "GET", "/v1/groups/g/offsets?wait=1h", "")
}

func TestLongPollOfRouteReturnsOnSwitch(t *testing.T) {
	e, waiting := pollEnv(t)
	for _, scope := range []string{"clusterA", "clusterB"} {
		e.must(http.StatusOK, "POST", "/v1/static-topics", `{"topic":"T","scope":"`+scope+`","totalQueues":3,"brokers":["b1"]}`)
	}
	_, etag := e.route("T", "clusterB", "consumer")
	done := make(chan response, 1)
	go func() {
		done <- e.do("GET", "/v1/static-topics/T/route?scope=clusterB&role=consumer&wait=1m", "", "If-None-Match", etag)
	}()
	<-waiting
	newClientEnv(e).must(http.StatusOK, "PUT", "/v1/scopes/clusterA/global-read", `{"enabled":true}`)
	r := <-done
	if r.status != http.StatusOK {
		t.Fatalf("route poll: %d %s", r.status, r.body)
	}
	var rt struct {
		Queues []any `json:"queues"`
	}
	r.decode(t, &rt)
	if len(rt.Queues) != 6 {
		t.Fatalf("route after the switch has %d queues, want 6", len(rt.Queues))
	}
}

func TestLongPollOfMappingReturnsOnRemap(t *testing.T) {
	e, waiting := pollEnv(t)
	e.must(http.StatusOK, "POST", "/v1/static-topics", `{"topic":"T","scope":"c1","totalQueues":1,"brokers":["b1"]}`)
	_, etag := e.mapping("T", "c1")
	done := make(chan response, 1)
	go func() {
		done <- e.do("GET", "/v1/static-topics/T?scope=c1&wait=1m", "", "If-None-Match", etag)
	}()
	<-waiting
	newClientEnv(e).must(http.StatusOK, "POST", "/v1/static-topics/T/remap", `{"scope":"c1","moves":[{"queueId":0,"toBroker":"b2","oldLeaderMaxOffset":10}]}`)
	if r := <-done; r.status != http.StatusOK || r.header.Get("ETag") == etag {
		t.Fatalf("mapping poll: %d %s", r.status, r.body)
	}
}

// EndLongPolls (registered with http.Server.Shutdown) ends waiting polls
// with 304 at once.
func TestCloseEndsLongPolls(t *testing.T) {
	e, waiting := pollEnv(t)
	etag := e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "").header.Get("ETag")
	done := make(chan response, 1)
	go func() {
		done <- e.do("GET", "/v1/groups/g/offsets?wait=1h", "", "If-None-Match", etag)
	}()
	<-waiting
	e.s.EndLongPolls()
	if r := <-done; r.status != http.StatusNotModified {
		t.Fatalf("poll after EndLongPolls: %d %s", r.status, r.body)
	}
}

// A response is encoded once per version; later GETs are served from the
// response cache, byte for byte.
func TestResponseCache(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	first := e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "")
	e.s.WaitResponses()
	second := e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "")
	if string(first.body) != string(second.body) {
		t.Fatalf("cached body %s differs from %s", second.body, first.body)
	}
	hits, misses := cacheCounts(t, e)
	if hits != 1 || misses != 1 {
		t.Fatalf("cache hits %v misses %v, want 1 and 1", hits, misses)
	}
	// The filtered view is another entry; a new version is another too.
	e.must(http.StatusOK, "GET", "/v1/groups/g/offsets?topic=x", "")
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":2}]}`)
	var g groupOffsets
	e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "").decode(t, &g)
	if g.Offsets[0].Offset != 2 {
		t.Fatalf("stale cached offsets %+v", g)
	}
	if hits, misses := cacheCounts(t, e); hits != 1 || misses != 3 {
		t.Fatalf("cache hits %v misses %v, want 1 and 3", hits, misses)
	}
}

func TestResponseCacheOff(t *testing.T) {
	e := newEnv(t, envConfig{server: func(o *server.Options) { o.ResponseCacheBytes = -1 }})
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	a := e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "")
	b := e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "")
	if string(a.body) != string(b.body) {
		t.Fatal("bodies differ")
	}
	if hits, misses := cacheCounts(t, e); hits != 0 || misses != 0 {
		t.Fatalf("cache off counted hits %v misses %v", hits, misses)
	}
}
