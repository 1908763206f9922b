package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// ObserveKafkaRequest counts and times one Kafka request; Metrics is the
// kafka package's Observer.
func (m *Metrics) ObserveKafkaRequest(api, errorCode string, took time.Duration) {
	m.kafka.requests.WithLabelValues(api, errorCode).Inc()
	m.kafka.latency.WithLabelValues(api).Observe(took.Seconds())
}
