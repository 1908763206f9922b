package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/internal/buildinfo"
	"github.com/offsetd/offsetd/server"
)

// scrape reads /metrics in the text format: series (name and labels, as
// printed) to value.
func scrape(t testing.TB, e *env) map[string]float64 {
	t.Helper()
	r := e.must(http.StatusOK, "GET", "/metrics", "")
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func cacheCounts(t testing.TB, e *env) (hits, misses float64) {
	m := scrape(t, e)
	return m["offsetd_response_cache_hits_total"], m["offsetd_response_cache_misses_total"]
}

func TestMetrics(t *testing.T) {
	metrics := server.NewMetrics()
	var clock atomic.Int64 // Unix milliseconds
	clock.Store(time.Now().UnixMilli())
	e := newEnv(t, envConfig{
		coord: func(o *coordinator.Options) {
			o.Observer = metrics
			o.Partitions = 1
			o.Now = func() time.Time { return time.UnixMilli(clock.Load()) }
			o.Retention = time.Hour
		},
		server: func(o *server.Options) { o.Metrics = metrics },
	})
	for range 3 {
		e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1},{"topic":"t","partition":1,"offset":1}]}`)
	}
	e.fail(http.StatusBadRequest, "invalid_argument", "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"","partition":0,"offset":1}]}`)
	e.must(http.StatusOK, "GET", "/v1/groups/g/offsets", "")
	e.fail(http.StatusMethodNotAllowed, "method_not_allowed", "PATCH", "/v1/groups/g/offsets", "")

	// A snapshot; a commit of h two hours later; a second snapshot (the
	// journal, a single segment, keeps it all); then g, idle for two
	// hours, expires.
	if err := e.c.Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Hour.Milliseconds())
	e.must(http.StatusOK, "POST", "/v1/groups/h/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	if err := e.c.Snapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := e.c.ExpireGroups(t.Context()); err != nil || n != 1 {
		t.Fatalf("ExpireGroups: %d, %v", n, err)
	}

	m := scrape(t, e)
	want := map[string]float64{
		`offsetd_commits_total{result="ok"}`:                                                  4,
		`offsetd_commits_total{result="invalid_argument"}`:                                    1,
		`offsetd_commit_duration_seconds_count`:                                               5,
		`offsetd_snapshots_total{result="ok"}`:                                                2,
		`offsetd_snapshot_duration_seconds_count`:                                             2,
		`offsetd_groups_expired_total`:                                                        1,
		`offsetd_partition_ready{partition="0"}`:                                              1,
		`offsetd_partition_keys{partition="0"}`:                                               1,
		`offsetd_partition_groups{partition="0"}`:                                             1,
		`offsetd_http_requests_total{code="200",route="POST /v1/groups/{group}/offsets"}`:     4,
		`offsetd_http_requests_total{code="400",route="POST /v1/groups/{group}/offsets"}`:     1,
		`offsetd_http_requests_total{code="200",route="GET /v1/groups/{group}/offsets"}`:      1,
		`offsetd_http_requests_total{code="405",route="/v1/groups/{group}/offsets"}`:          1,
		`offsetd_response_cache_misses_total`:                                                 1,
		`offsetd_http_request_duration_seconds_count{route="GET /v1/groups/{group}/offsets"}`: 1,
	}
	for series, v := range want {
		if got, ok := m[series]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, v)
		}
	}
	// The journal carried them, one fsync each.
	if m[`offsetd_journal_batch_records_sum`] != 5 || m[`offsetd_journal_append_duration_seconds_count`] != 5 || m[`offsetd_journal_batch_partitions_sum`] != 5 {
		t.Errorf("journal batches: %v records in %v appends, %v partitions", m[`offsetd_journal_batch_records_sum`],
			m[`offsetd_journal_append_duration_seconds_count`], m[`offsetd_journal_batch_partitions_sum`])
	}
	// 4 commits and an expiry record, each its own batch.
	if m[`offsetd_log_batch_requests_count`] != 5 || m[`offsetd_log_batch_requests_sum`] != 5 || m[`offsetd_log_append_duration_seconds_count`] != 5 {
		t.Errorf("batches %v of %v requests, appends %v", m[`offsetd_log_batch_requests_count`],
			m[`offsetd_log_batch_requests_sum`], m[`offsetd_log_append_duration_seconds_count`])
	}
	for _, series := range []string{`offsetd_snapshot_bytes{partition="0"}`, `offsetd_partition_load_seconds{partition="0"}`, "go_goroutines"} {
		if _, ok := m[series]; !ok {
			t.Errorf("no %s", series)
		}
	}
	if got, want := m[`offsetd_snapshot_bytes{partition="0"}`], float64(e.c.Stats()[0].SnapshotBytes); got != want {
		t.Errorf("offsetd_snapshot_bytes = %v, Stats says %v", got, want)
	}
}

// One Metrics serves one Server.
func TestMetricsNotShared(t *testing.T) {
	metrics := server.NewMetrics()
	e := newEnv(t, envConfig{server: func(o *server.Options) { o.Metrics = metrics }})
	if _, err := server.New(e.c, server.Options{Metrics: metrics, Logger: quiet}); err == nil {
		t.Fatal("a second Server took the same Metrics")
	}
}

// Every counter and gauge has a series from the start, at 0 (build info at
// 1): an alert on a rate or an absence must not misfire on a fresh server.
func TestMetricsExistAtStart(t *testing.T) {
	metrics := server.NewMetrics()
	e := newEnv(t, envConfig{
		coord:  func(o *coordinator.Options) { o.Observer = metrics; o.Partitions = 2 },
		server: func(o *server.Options) { o.Metrics = metrics },
	})
	got := scrape(t, e)
	for _, series := range []string{
		`offsetd_commits_total{result="ok"}`,
		`offsetd_commits_total{result="write_failed"}`,
		`offsetd_commit_duration_seconds_count`,
		`offsetd_journal_batch_records_count`,
		`offsetd_journal_append_duration_seconds_count`,
		`offsetd_journal_append_failures_total`,
		`offsetd_log_batch_requests_count`,
		`offsetd_log_append_duration_seconds_count`,
		`offsetd_log_append_failures_total`,
		`offsetd_response_cache_hits_total`,
		`offsetd_response_cache_misses_total`,
		`offsetd_http_requests_total{code="200",route="POST /v1/groups/{group}/offsets"}`,
		`offsetd_http_requests_total{code="200",route="GET /metrics"}`,
		`offsetd_http_request_duration_seconds_count{route="PUT /v1/scopes/{scope}/global-read"}`,
		`offsetd_snapshots_total{result="ok"}`,
		`offsetd_snapshots_total{result="error"}`,
		`offsetd_snapshot_duration_seconds_count`,
		`offsetd_log_truncations_total{result="ok"}`,
		`offsetd_log_truncations_total{result="error"}`,
		`offsetd_groups_expired_total`,
		`offsetd_static_topic_forced_changes_total`,
		`offsetd_kafka_requests_total{api="OffsetCommit",error="NONE"}`,
		`offsetd_kafka_requests_total{api="ApiVersions",error="NONE"}`,
		`offsetd_kafka_requests_total{api="JoinGroup",error="NONE"}`,
		`offsetd_kafka_request_duration_seconds_count{api="Heartbeat"}`,
		`offsetd_partition_ready{partition="1"}`,
	} {
		v, ok := got[series]
		if !ok {
			t.Errorf("no series %s in a fresh server's metrics", series)
		} else if v != 0 && !strings.HasPrefix(series, "offsetd_partition_ready") {
			t.Errorf("%s = %v on a fresh server, want 0", series, v)
		}
	}
	info := buildinfo.Read()
	want := fmt.Sprintf(`offsetd_build_info{goversion=%q,revision=%q,version=%q}`, info.GoVersion, info.Revision, info.Version)
	if got[want] != 1 {
		t.Errorf("no %s 1 in the metrics", want)
	}
}
