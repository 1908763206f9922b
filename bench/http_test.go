package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/server"
)

// offsetdHTTPSystem is offsetd as its clients see it: the coordinator with
// its default options (every commit fsynced before it is acknowledged)
// behind server.New with its default options (response cache on), served by
// an http.Server on a loopback listener, and driven through client/ over
// keep-alive connections. It runs in the benchmark's process, so allocs/op
// counts the client's allocations and the server's together.
//
// Beside offsetd's column, its figures are what the HTTP path costs: JSON
// both ways, a loopback round trip, routing, metrics and the response cache.
var offsetdHTTPSystem = system{
	name:    "offsetd-http",
	durable: true,
	reads:   true,
	// Its restart is offsetd's (the same coordinator replaying the same
	// files) plus a listener: BenchmarkRestart leaves it out.
	skipRestart: true,
	open: func(dir string, callers int) (committer, error) {
		return startHTTP(dir, callers, 0)
	},
	// The server opens the files the coordinator writes: the warm stores
	// are loaded the way offsetd's are, without going through HTTP.
	load: loadOffsetd,
}

// httpConns is how many idle keep-alive connections a client keeps: more
// than any benchmark's concurrent callers, so that once warm no request
// opens a connection.
const httpConns = 512

// httpStore is an offsetd server on a loopback listener, over a coordinator
// in its own directory, and a client of it.
type httpStore struct {
	coord  *coordinator.Coordinator
	srv    *server.Server
	hs     *http.Server
	served chan error
	base   string // http://127.0.0.1:PORT
	hc     *http.Client
	client *client.Client
}

// startHTTP opens a coordinator in dir with offsetd's options, wired as
// cmd/offsetd wires it (the server's metrics observe the write path), and
// serves it on 127.0.0.1 with the server's default options but for the
// response cache's budget (0 the default, negative off). callers is how many
// goroutines will call at once.
func startHTTP(dir string, callers int, cacheBytes int64) (*httpStore, error) {
	metrics := server.NewMetrics()
	copts := offsetdOptions()
	copts.Observer = metrics
	c, err := coordinator.Open(dir, copts)
	if err != nil {
		return nil, err
	}
	if err := c.WaitReady(context.Background()); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	srv, err := server.New(c, server.Options{ResponseCacheBytes: cacheBytes, Logger: copts.Logger, Metrics: metrics})
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, errors.Join(err, c.Close())
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	hs.RegisterOnShutdown(srv.EndLongPolls)
	h := &httpStore{coord: c, srv: srv, hs: hs, served: make(chan error, 1), base: "http://" + ln.Addr().String()}
	go func() { h.served <- hs.Serve(ln) }()

	conns := max(httpConns, callers)
	h.hc = &http.Client{Transport: &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
	}}
	// The client's own transport, as a user gets it. No retries: a 503
	// here is a failure to report, not to wait out.
	h.client, err = client.New(h.base, client.Options{MaxIdleConns: conns, Retries: -1})
	if err != nil {
		return nil, errors.Join(err, h.Close())
	}
	return h, nil
}

func (h *httpStore) Commit(ctx context.Context, group string, offsets []coordinator.OffsetCommit) error {
	_, err := h.client.Commit(ctx, group, -1, clientCommits(offsets))
	return err
}

// clientCommits returns offsets as client/ takes them.
func clientCommits(offsets []coordinator.OffsetCommit) []client.OffsetCommit {
	out := make([]client.OffsetCommit, len(offsets))
	for i, o := range offsets {
		out[i] = client.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	return out
}

func (h *httpStore) Fetch(group, topic string, partition int32) (coordinator.Offset, bool, error) {
	o, err := h.client.Offset(context.Background(), group, topic, partition)
	if errors.Is(err, client.ErrNotFound) {
		return coordinator.Offset{}, false, nil
	}
	if err != nil {
		return coordinator.Offset{}, false, err
	}
	return coordinator.Offset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTime: o.CommitTime}, true, nil
}

// FetchGroup is GET /v1/groups/{group}/offsets: the server sends the
// group's offsets sorted, as the coordinator keeps them.
func (h *httpStore) FetchGroup(group string) ([]coordinator.PartitionOffset, error) {
	g, err := h.client.GroupOffsets(context.Background(), group, "")
	if err != nil {
		return nil, err
	}
	out := make([]coordinator.PartitionOffset, len(g.Offsets))
	for i, o := range g.Offsets {
		out[i] = coordinator.PartitionOffset{Topic: o.Topic, Partition: o.Partition, Offset: coordinator.Offset{
			Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTime: o.CommitTime,
		}}
	}
	return out, nil
}

// Close stops serving (long polls answer, in-flight requests finish), then
// closes the coordinator.
func (h *httpStore) Close() error {
	if h.client != nil {
		h.client.CloseIdleConnections()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := h.hs.Shutdown(ctx)
	if serr := <-h.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	h.srv.Close()
	return errors.Join(err, h.coord.Close())
}

// get sends GET url, with If-None-Match: inm unless it is empty, and reads
// the whole body into buf. It returns the status and the ETag.
func (h *httpStore) get(url, inm string, buf *bytes.Buffer) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if inm != "" {
		req.Header.Set("If-None-Match", inm)
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("ETag"), err
}

// cacheLookups returns the response cache's hits and misses so far, from
// the server's /metrics.
func (h *httpStore) cacheLookups() (hits, misses float64, err error) {
	m, err := scrapeMetrics(h.hc, h.base+"/metrics")
	if err != nil {
		return 0, 0, err
	}
	return m["offsetd_response_cache_hits_total"], m["offsetd_response_cache_misses_total"], nil
}

// pollAnswers are the ways the server answers a poller re-reading a group
// that has not changed.
var pollAnswers = []struct {
	name string
	// cacheBytes is server.Options.ResponseCacheBytes: 0 the default
	// budget, negative the cache off.
	cacheBytes int64
	// conditional sends If-None-Match with the group's current ETag.
	conditional bool
}{
	{"cached", 0, false},      // the body from the response cache
	{"encoded", -1, false},    // the body encoded afresh (cache off)
	{"not-modified", 0, true}, // 304, no body
}

// BenchmarkPolledFetch measures one poller re-reading a group of the
// workload (8 topics × 16 partitions = 128 offsets) that has not changed,
// through the Go client over a keep-alive connection on loopback, as a
// consumer polls: GroupOffsets answered 200 from the response cache, 200
// encoded afresh (the cache off), or PollGroupOffsets naming the current
// version without a wait, answered 304 without a body. Every answer is
// checked (status, and the version and offsets of the first), and the
// server's cache counters must show that the answers came from where the
// case says. The client and its decoding of the 128 offsets are the same
// in the two 200 cases, so their differences are the server's.
//
// ns/op is the time per request; req/s says the same as a rate.
func BenchmarkPolledFetch(b *testing.B) {
	for _, a := range pollAnswers {
		b.Run(fmt.Sprintf("sys=%s/answer=%s", offsetdHTTPSystem.name, a.name), func(b *testing.B) {
			h, err := startHTTP(b.TempDir(), 1, a.cacheBytes)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := h.Close(); err != nil {
					b.Error(err)
				}
			}()
			dst := make([]coordinator.OffsetCommit, partitionsPerTopic)
			for t := range topicsPerGroup {
				if err := h.Commit(b.Context(), workload.fill(dst, 0, t, 0), dst); err != nil {
					b.Fatal(err)
				}
			}
			group := workload.groups[0]
			url := h.base + "/v1/groups/" + group + "/offsets"
			var first, buf bytes.Buffer
			status, etag, err := h.get(url, "", &first)
			if err != nil || status != http.StatusOK || etag == "" {
				b.Fatalf("first GET: status %d, ETag %q, err %v", status, etag, err)
			}
			want, err := h.client.GroupOffsets(b.Context(), group, "")
			if err != nil || len(want.Offsets) != topicsPerGroup*partitionsPerTopic {
				b.Fatalf("first GroupOffsets: %d offsets, %v", len(want.Offsets), err)
			}
			if a.cacheBytes >= 0 {
				if err := waitCached(h, url, &buf); err != nil {
					b.Fatal(err)
				}
			}
			hits, misses, err := h.cacheLookups()
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()

			b.ReportAllocs()
			b.ResetTimer()
			for n := range b.N {
				if a.conditional {
					if _, changed, err := h.client.PollGroupOffsets(ctx, group, "", want.Version, 0); err != nil || changed {
						b.Fatalf("poll %d: changed %v, %v (want 304)", n, changed, err)
					}
					continue
				}
				g, err := h.client.GroupOffsets(ctx, group, "")
				if err != nil {
					b.Fatalf("GET %d: %v", n, err)
				}
				if g.Version != want.Version || len(g.Offsets) != len(want.Offsets) || g.Offsets[len(g.Offsets)-1] != want.Offsets[len(want.Offsets)-1] {
					b.Fatalf("GET %d: version %d with %d offsets, want the first answer's %d with %d", n, g.Version, len(g.Offsets), want.Version, len(want.Offsets))
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")

			hits2, misses2, err := h.cacheLookups()
			if err != nil {
				b.Fatal(err)
			}
			wantHits := 0.0
			if a.cacheBytes >= 0 && !a.conditional {
				wantHits = float64(b.N)
			}
			if hits2-hits != wantHits || misses2 != misses {
				b.Fatalf("%d requests made %.0f cache hits and %.0f misses, want %.0f and 0", b.N, hits2-hits, misses2-misses, wantHits)
			}
		})
	}
}

// waitCached GETs url, waits for the response cache to keep the body (it
// does so asynchronously), and checks that the next GET is answered from it.
func waitCached(h *httpStore, url string, buf *bytes.Buffer) error {
	if _, _, err := h.get(url, "", buf); err != nil {
		return err
	}
	h.srv.WaitResponses()
	before, _, err := h.cacheLookups()
	if err != nil {
		return err
	}
	if _, _, err := h.get(url, "", buf); err != nil {
		return err
	}
	after, _, err := h.cacheLookups()
	if err != nil {
		return err
	}
	if after <= before {
		return errors.New("the response cache did not answer the poll")
	}
	return nil
}

// BenchmarkHTTPFloor is the floor under offsetd-http's point fetch
// (BenchmarkFetch's sys=offsetd-http): a bare net/http handler that answers
// every GET with the bytes offsetd answers a point fetch of the workload
// with (taken from a real server, Content-Type included), on a loopback
// listener, read whole by a plain net/http client over keep-alive
// connections, with as many readers as BenchmarkFetch. What offsetd-http
// costs above it is routing, metrics, the lookup, and JSON on both sides.
//
// ns/op is wall time per request; fetches/s says the same as a rate, in
// BenchmarkFetch's unit.
func BenchmarkHTTPFloor(b *testing.B) {
	body, err := pointFetchBody(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	group, topic, partition := workload.key(0)
	path := fmt.Sprintf("/v1/groups/%s/offsets/%s/%d", group, topic, partition)
	for _, readers := range fetchReaders {
		b.Run(fmt.Sprintf("sys=net-http/readers=%d", readers), func(b *testing.B) {
			f, err := startFloor(body, readers)
			if err != nil {
				b.Fatal(err)
			}
			defer f.close()
			url := f.base + path
			bufs := make(chan *bytes.Buffer, readers)
			for range readers {
				bufs <- new(bytes.Buffer)
			}
			benchRead(b, readers, 1, func(int) error {
				buf := <-bufs
				defer func() { bufs <- buf }()
				resp, err := f.hc.Get(url)
				if err != nil {
					return err
				}
				buf.Reset()
				_, err = buf.ReadFrom(resp.Body)
				resp.Body.Close()
				if err == nil && (resp.StatusCode != http.StatusOK || !bytes.Equal(buf.Bytes(), body)) {
					err = fmt.Errorf("floor answered %d with %q", resp.StatusCode, buf.Bytes())
				}
				return err
			})
		})
	}
}

// pointFetchBody returns offsetd's answer to a point fetch of key 0 of the
// workload: a real server in dir, one commit of the key, one GET.
func pointFetchBody(dir string) ([]byte, error) {
	h, err := startHTTP(dir, 1, 0)
	if err != nil {
		return nil, err
	}
	dst := make([]coordinator.OffsetCommit, partitionsPerTopic)
	var buf bytes.Buffer
	status := 0
	err = h.Commit(context.Background(), workload.fill(dst, 0, 0, 0), dst)
	if err == nil {
		group, topic, partition := workload.key(0)
		status, _, err = h.get(fmt.Sprintf("%s/v1/groups/%s/offsets/%s/%d", h.base, group, topic, partition), "", &buf)
	}
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("point fetch: status %d: %s", status, buf.Bytes())
	}
	return buf.Bytes(), errors.Join(err, h.Close())
}

// floorServer is a bare net/http server on loopback that answers every
// request with one body, and a client of it.
type floorServer struct {
	hs     *http.Server
	served chan error
	base   string
	hc     *http.Client
}

func startFloor(body []byte, callers int) (*floorServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	contentType := []string{"application/json"}
	f := &floorServer{
		hs: &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header()["Content-Type"] = contentType
				w.Write(body)
			}),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
		},
		served: make(chan error, 1),
		base:   "http://" + ln.Addr().String(),
	}
	go func() { f.served <- f.hs.Serve(ln) }()
	conns := max(httpConns, callers)
	f.hc = &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}}
	return f, nil
}

func (f *floorServer) close() {
	f.hc.CloseIdleConnections()
	f.hs.Close()
	<-f.served
}
