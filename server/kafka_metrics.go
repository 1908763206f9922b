package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/kafka"
)

// kafkaMetrics count the requests of the Kafka listener.
type kafkaMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newKafkaMetrics(latencyBuckets []float64) kafkaMetrics {
	return kafkaMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "offsetd_kafka_requests_total",
			Help: "Kafka protocol requests by API and the error their response carries (NONE when none).",
		}, []string{"api", "error"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "offsetd_kafka_request_duration_seconds",
			Help:    "Kafka protocol request latency by API (JoinGroup and SyncGroup include the wait for the other members).",
			Buckets: latencyBuckets,
		}, []string{"api"}),
	}
}

// zeroSeries creates, at 0, the series of every API the Kafka listener
// serves answered without error.
func (k kafkaMetrics) zeroSeries() {
	keys := []int16{int16(kmsg.ApiVersions)}
	for key := range kafka.Supported() {
		keys = append(keys, key)
	}
	for _, key := range keys {
		api := kmsg.NameForKey(key)
		k.requests.WithLabelValues(api, "NONE")
		k.latency.WithLabelValues(api)
	}
}

// ObserveKafkaRequest counts and times one Kafka request; Metrics is the
// kafka package's Observer.
func (m *Metrics) ObserveKafkaRequest(api, errorCode string, took time.Duration) {
	m.kafka.requests.WithLabelValues(api, errorCode).Inc()
	m.kafka.latency.WithLabelValues(api).Observe(took.Seconds())
}
