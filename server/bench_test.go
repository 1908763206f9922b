package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/server"
)

// The HTTP path end to end over loopback: a real coordinator (fsync on) in
// b.TempDir(), a real listener, clients with their own keep-alive
// connections.
//
//	go test -run '^$' -bench HTTP -benchtime 2s ./server/

func benchEnv(b *testing.B, partitions int, cacheBytes int64) *env {
	e := newEnv(b, envConfig{
		coord:  func(o *coordinator.Options) { o.Partitions = partitions },
		server: func(o *server.Options) { o.ResponseCacheBytes = cacheBytes },
	})
	e.http = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	b.Cleanup(e.http.CloseIdleConnections)
	return e
}

// runClients makes b.N requests from clients goroutines, each calling
// request(client, n) for its n-th request, and reports the rate as unit.
func runClients(b *testing.B, clients int, unit string, request func(client, n int) error) {
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			for n := 0; ; n++ {
				if next.Add(1) > int64(b.N) {
					return
				}
				if err := request(c, n); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), unit)
}

func send(e *env, method, url string, body []byte, hdr ...string) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

func expect(status int, err error, want int) error {
	if err != nil {
		return err
	}
	if status != want {
		return fmt.Errorf("status %d, want %d", status, want)
	}
	return nil
}

// BenchmarkHTTPCommit: durable commits of one offset, each client its own
// group. Concurrent clients share fsyncs through group commit, but only
// those whose groups hash to the same internal partition: with 16
// partitions 64 clients make about 4 commits per fsync, and the
// partitions' fsyncs queue on the device.
func BenchmarkHTTPCommit(b *testing.B) {
	for _, partitions := range []int{1, 16} {
		for _, clients := range []int{1, 64} {
			b.Run(fmt.Sprintf("partitions=%d/clients=%d", partitions, clients), func(b *testing.B) {
				e := benchEnv(b, partitions, 0)
				urls := make([]string, clients)
				for c := range urls {
					urls[c] = fmt.Sprintf("%s/v1/groups/group-%d/offsets", e.ts.URL, c)
				}
				runClients(b, clients, "commits/s", func(c, n int) error {
					body := fmt.Appendf(nil, `{"offsets":[{"topic":"orders","partition":%d,"offset":%d}]}`, c%8, n)
					status, err := send(e, "POST", urls[c], body)
					return expect(status, err, http.StatusOK)
				})
			})
		}
	}
}

// seedGroup commits offsets offsets of one group and returns its URL.
func seedGroup(b *testing.B, e *env, group string, offsets int) string {
	var sb strings.Builder
	sb.WriteString(`{"offsets":[`)
	for i := range offsets {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"topic":"orders-%d","partition":%d,"offset":%d,"metadata":"consumer-7"}`, i/8, i%8, 1000+i)
	}
	sb.WriteString(`]}`)
	url := e.ts.URL + "/v1/groups/" + group + "/offsets"
	status, err := send(e, "POST", url, []byte(sb.String()))
	if err := expect(status, err, http.StatusOK); err != nil {
		b.Fatal(err)
	}
	return url
}

// BenchmarkHTTPFetch: clients fetching a group's 16 offsets, each its own
// group, answered from the response cache after the first fetch.
func BenchmarkHTTPFetch(b *testing.B) {
	for _, clients := range []int{1, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			e := benchEnv(b, 16, 0)
			urls := make([]string, clients)
			for c := range urls {
				urls[c] = seedGroup(b, e, fmt.Sprintf("group-%d", c), 16)
			}
			runClients(b, clients, "fetches/s", func(c, n int) error {
				status, err := send(e, "GET", urls[c], nil)
				return expect(status, err, http.StatusOK)
			})
		})
	}
}

// BenchmarkHTTPPolledFetch: a poller re-reading a group of 100 offsets
// that has not changed: the body from the response cache, encoded afresh
// (cache off), or a conditional GET answered 304 without a body.
func BenchmarkHTTPPolledFetch(b *testing.B) {
	for _, c := range []struct {
		name       string
		cacheBytes int64
		status     int
	}{
		{"cached", 0, http.StatusOK},
		{"encoded", -1, http.StatusOK},
		{"not-modified", 0, http.StatusNotModified},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := benchEnv(b, 16, c.cacheBytes)
			url := seedGroup(b, e, "pollers", 100)
			var hdr []string
			if c.status == http.StatusNotModified {
				resp, err := e.http.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				hdr = []string{"If-None-Match", resp.Header.Get("ETag")}
			}
			e.s.WaitResponses()
			runClients(b, 1, "fetches/s", func(_, _ int) error {
				status, err := send(e, "GET", url, nil, hdr...)
				return expect(status, err, c.status)
			})
		})
	}
}
