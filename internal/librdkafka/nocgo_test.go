//go:build !cgo

package librdkafka

import "testing"

// TestLibrdkafkaConsumerProtocol needs cgo: confluent-kafka-go links
// librdkafka, a C library.
func TestLibrdkafkaConsumerProtocol(t *testing.T) {
	t.Skip("built without cgo (CGO_ENABLED=0 or no C compiler): confluent-kafka-go links librdkafka, a C library")
}
