package server

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/internal/buildinfo"
)

// Metrics holds offsetd's Prometheus metrics. It is a coordinator.Observer,
// JournalObserver and MaintenanceObserver: pass it as the coordinator's
// Options.Observer, and to the Server as Options.Metrics, to record the
// write path (batch sizes, append and sync latency), snapshots and
// retention as well as the HTTP side.
type Metrics struct {
	commits        *prometheus.CounterVec
	commitLatency  prometheus.Histogram
	batchRequests  prometheus.Histogram
	batchBytes     prometheus.Histogram
	appendLatency  prometheus.Histogram
	appendFailures prometheus.Counter
	cacheHits      prometheus.Counter
	cacheMisses    prometheus.Counter
	requests       *prometheus.CounterVec
	requestLatency *prometheus.HistogramVec
	snapshots      *prometheus.CounterVec
	snapshotTime   prometheus.Histogram
	truncations    *prometheus.CounterVec
	expiredGroups  prometheus.Counter
	journalCalls   prometheus.Histogram
	journalParts   prometheus.Histogram
	journalRecords prometheus.Histogram
	journalSync    prometheus.Histogram
	journalFails   prometheus.Counter
	buildInfo      prometheus.Gauge
	kafka          kafkaMetrics

	mu sync.Mutex
	c  *coordinator.Coordinator // guarded by mu; set by register
}

var (
	_ coordinator.Observer            = (*Metrics)(nil)
	_ coordinator.MaintenanceObserver = (*Metrics)(nil)
	_ coordinator.JournalObserver     = (*Metrics)(nil)
)

// NewMetrics returns unregistered metrics; New registers them.
func NewMetrics() *Metrics {
	latencyBuckets := prometheus.ExponentialBuckets(50e-6, 2, 16) // 50µs to ~1.6s
	m := &Metrics{
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "offsetd_commits_total",
			Help: "Commit requests by result: ok, or the error code.",
		}, []string{"result"}),
		commitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "offsetd_commit_duration_seconds",
			Help:    "Time from a commit reaching the coordinator to its acknowledgement (queueing, group commit, the journal's sync or a Raft quorum).",
			Buckets: latencyBuckets,
		}),
		batchRequests: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "offsetd_log_batch_requests",
			Help:    "Requests carried by one partition's batch (one atomic entry each).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 to 1024
		}),
		batchBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "offsetd_log_batch_bytes",
			Help:    "Payload bytes of one partition's batch.",
			Buckets: prometheus.ExponentialBuckets(64, 4, 10), // 64 B to 16 MiB
		}),
		appendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "offsetd_log_append_duration_seconds",
			Help:    "Time from a partition's batch entering the journal to its being durable (the wait for the shared sync included).",
			Buckets: latencyBuckets,
		}),
		appendFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "offsetd_log_append_failures_total",
			Help: "Partition batches whose journal append failed.",
		}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "offsetd_response_cache_hits_total",
			Help: "Responses served from the response cache.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "offsetd_response_cache_misses_total",
			Help: "Responses encoded because the response cache did not hold them.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "offsetd_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		requestLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "offsetd_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern (long polls included).",
			Buckets: latencyBuckets,
		}, []string{"route"}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "offsetd_snapshots_total",
			Help: "Partition snapshots written in the background, by result (ok or error).",
		}, []string{"result"}),
		snapshotTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "offsetd_snapshot_duration_seconds",
			Help:    "Time to write one partition snapshot.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 4, 10), // 1ms to ~4min
		}),
		truncations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "offsetd_log_truncations_total",
			Help: "Log fronts dropped after a snapshot, by result (ok or error).",
		}, []string{"result"}),
		journalCalls: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "offsetd_journal_batch_partition_batches",
			Help:    "Partition batches carried by one journal batch (one append, one sync).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		journalParts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "offsetd_journal_batch_partitions",
			Help:    "Distinct internal partitions whose commits shared one journal sync.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		journalRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "offsetd_journal_batch_records",
			Help:    "Records (commit requests) made durable by one journal sync.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 15),
		}),
		journalSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "offsetd_journal_append_duration_seconds",
			Help:    "Time of one journal append including its sync (an fdatasync of the sync ring).",
			Buckets: latencyBuckets,
		}),
		journalFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "offsetd_journal_append_failures_total",
			Help: "Journal appends that failed; each fails its commits, and the journal is repaired before the next.",
		}),
		expiredGroups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "offsetd_groups_expired_total",
			Help: "Groups whose offsets expired after going without a commit for the retention period.",
		}),
		buildInfo: newBuildInfo(buildinfo.Read()),
		kafka:     newKafkaMetrics(latencyBuckets),
	}
	m.zeroSeries()
	return m
}

// newBuildInfo is offsetd_build_info: 1, labelled with what the binary
// was built from, to join on in queries and to see a rolling upgrade.
func newBuildInfo(info buildinfo.Info) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "offsetd_build_info",
		Help:        "Always 1; its labels say which offsetd is running: module version, VCS revision, Go version.",
		ConstLabels: prometheus.Labels{"version": info.Version, "revision": info.Revision, "goversion": info.GoVersion},
	})
	g.Set(1)
	return g
}

// zeroSeries creates the labelled series known in advance at 0, so that a
// rate or an alert on them has a series before the first event.
func (m *Metrics) zeroSeries() {
	for _, result := range []string{"ok", "error"} {
		m.snapshots.WithLabelValues(result)
		m.truncations.WithLabelValues(result)
	}
	for _, result := range []string{"ok", codeStaleGeneration, codeInvalidArgument, codeLoading, codeWriteFailed,
		codeUnavailable, codeNoLeader, codeNotCommitted, codeOutcomeUnknown, codeInternal} {
		m.commits.WithLabelValues(result)
	}
	m.kafka.zeroSeries()
}

// routeServed creates the series of a route pattern at 0: its requests
// answered 200, and its latency.
func (m *Metrics) routeServed(pattern string) {
	m.requests.WithLabelValues(pattern, "200")
	m.requestLatency.WithLabelValues(pattern)
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// ObserveSnapshot records a background snapshot; it implements
// coordinator.MaintenanceObserver.
func (m *Metrics) ObserveSnapshot(partition int, bytes int64, took time.Duration, err error) {
	m.snapshots.WithLabelValues(result(err)).Inc()
	if err == nil {
		m.snapshotTime.Observe(took.Seconds())
	}
}

// ObserveTruncate records a truncation of the journal's front after a
// snapshot; it implements coordinator.MaintenanceObserver.
func (m *Metrics) ObserveTruncate(took time.Duration, err error) {
	m.truncations.WithLabelValues(result(err)).Inc()
}

// ObserveExpire records groups expired by retention; it implements
// coordinator.MaintenanceObserver.
func (m *Metrics) ObserveExpire(partition int, groups int) {
	m.expiredGroups.Add(float64(groups))
}

// ObserveAppend records one group commit; it implements
// coordinator.Observer.
func (m *Metrics) ObserveAppend(partition, requests, bytes int, took time.Duration, err error) {
	if err != nil {
		m.appendFailures.Inc()
		return
	}
	m.batchRequests.Observe(float64(requests))
	m.batchBytes.Observe(float64(bytes))
	m.appendLatency.Observe(took.Seconds())
}

// ObserveJournalBatch records one journal batch; it implements
// coordinator.JournalObserver.
func (m *Metrics) ObserveJournalBatch(calls, partitions, records, bytes int, took time.Duration, err error) {
	if err != nil {
		m.journalFails.Inc()
		return
	}
	m.journalCalls.Observe(float64(calls))
	m.journalParts.Observe(float64(partitions))
	m.journalRecords.Observe(float64(records))
	m.journalSync.Observe(took.Seconds())
}

// ObserveLoad implements coordinator.Observer. Load times are read from
// Coordinator.Stats at scrape time instead, so it records nothing.
func (m *Metrics) ObserveLoad(partition int, records int, took time.Duration) {}

// commitsDone counts n commits that succeeded, each after took: the
// commits of one request, counted with one look-up of their label.
func (m *Metrics) commitsDone(took time.Duration, n int) {
	if n == 0 {
		return
	}
	s := took.Seconds()
	for range n {
		m.commitLatency.Observe(s)
	}
	m.commits.WithLabelValues("ok").Add(float64(n))
}

func (m *Metrics) commitDone(took time.Duration, err error) {
	m.commitLatency.Observe(took.Seconds())
	result := "ok"
	if err != nil {
		result = classify(err).code
	}
	m.commits.WithLabelValues(result).Inc()
}

func (m *Metrics) cacheLookup(hit bool) {
	if hit {
		m.cacheHits.Inc()
	} else {
		m.cacheMisses.Inc()
	}
}

// register adds every metric to reg, with a collector that reads c's
// partition statistics at scrape time.
func (m *Metrics) register(reg prometheus.Registerer, c *coordinator.Coordinator) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c != nil {
		return errors.New("server: Metrics already serve another Server")
	}
	cs := []prometheus.Collector{
		m.commits, m.commitLatency, m.batchRequests, m.batchBytes, m.appendLatency, m.appendFailures,
		m.cacheHits, m.cacheMisses, m.requests, m.requestLatency,
		m.snapshots, m.snapshotTime, m.truncations, m.expiredGroups,
		m.journalCalls, m.journalParts, m.journalRecords, m.journalSync, m.journalFails, partitionCollector{c},
		m.kafka.requests, m.kafka.latency, m.buildInfo,
	}
	for i, col := range cs {
		if err := reg.Register(col); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	m.c = c
	return nil
}

// statusCodes holds the decimal strings of the HTTP statuses, so that
// counting a request does not format its status anew.
var statusCodes = func() (codes [600]string) {
	for i := 100; i < len(codes); i++ {
		codes[i] = strconv.Itoa(i)
	}
	return codes
}()

// requestDone counts and times a request by the mux pattern that served it.
func (m *Metrics) requestDone(route string, status int, took time.Duration) {
	var code string
	if status >= 100 && status < len(statusCodes) {
		code = statusCodes[status]
	} else {
		code = strconv.Itoa(status)
	}
	m.requests.WithLabelValues(route, code).Inc()
	m.requestLatency.WithLabelValues(route).Observe(took.Seconds())
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status  int
	written bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.written {
		s.status, s.written = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.written = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// partitionCollector exports Coordinator.Stats at scrape time.
type partitionCollector struct {
	c *coordinator.Coordinator
}

var (
	descReady = prometheus.NewDesc("offsetd_partition_ready",
		"1 once the internal partition has loaded, 0 while it loads or after it failed to.", []string{"partition"}, nil)
	descKeys = prometheus.NewDesc("offsetd_partition_keys",
		"Live offset keys (group, topic, partition) held by the internal partition.", []string{"partition"}, nil)
	descGroups = prometheus.NewDesc("offsetd_partition_groups",
		"Groups with offsets in the internal partition.", []string{"partition"}, nil)
	descMappings = prometheus.NewDesc("offsetd_partition_mappings",
		"Static-topic mappings held by the internal partition.", []string{"partition"}, nil)
	descLoadSeconds = prometheus.NewDesc("offsetd_partition_load_seconds",
		"How long loading took at open (snapshots, then one pass over the journal for every partition).", []string{"partition"}, nil)
	descLoadRecords = prometheus.NewDesc("offsetd_partition_load_records",
		"Log entries the internal partition replayed at open.", []string{"partition"}, nil)
	descSnapshotBytes = prometheus.NewDesc("offsetd_snapshot_bytes",
		"Size of the internal partition's newest snapshot, the one it loaded at open or one written since (0 while it has none).", []string{"partition"}, nil)
	descForced = prometheus.NewDesc("offsetd_static_topic_forced_changes_total",
		"Static-topic changes (puts, imports, trims) whose force overrode the sealed-history or readers check, since the coordinator opened.", nil, nil)
)

// Describe implements prometheus.Collector.
func (p partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReady, descKeys, descGroups, descMappings, descLoadSeconds, descLoadRecords, descSnapshotBytes, descForced} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one Stats call per scrape.
func (p partitionCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descForced, prometheus.CounterValue, float64(p.c.ForcedChanges()))
	for _, st := range p.c.Stats() {
		part := strconv.Itoa(st.Partition)
		ready := 0.0
		if st.Ready {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready, part)
		if !st.Ready {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(st.Keys), part)
		ch <- prometheus.MustNewConstMetric(descGroups, prometheus.GaugeValue, float64(st.Groups), part)
		ch <- prometheus.MustNewConstMetric(descMappings, prometheus.GaugeValue, float64(st.Mappings), part)
		ch <- prometheus.MustNewConstMetric(descLoadSeconds, prometheus.GaugeValue, st.LoadTime.Seconds(), part)
		ch <- prometheus.MustNewConstMetric(descLoadRecords, prometheus.GaugeValue, float64(st.LoadRecords), part)
		ch <- prometheus.MustNewConstMetric(descSnapshotBytes, prometheus.GaugeValue, float64(st.SnapshotBytes), part)
	}
}
