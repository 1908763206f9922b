// Package librdkafka holds one test: librdkafka consumers on the consumer
// group protocol (KIP-848, group.protocol=consumer), through
// confluent-kafka-go v2.11.1 and the librdkafka 2.11.1 it bundles, against
// an offsetd serve process over a static topic.
//
// It is a module of its own, so that confluent-kafka-go (cgo, and a long
// list of requirements of its other packages) never enters offsetd's
// dependencies nor bench/'s. It imports nothing of offsetd: the test builds
// cmd/offsetd from the repository with the go tool and speaks to it as any
// user would, over Kafka and HTTP. ci.sh here runs it; without cgo the test
// skips, saying so, and ci.sh skips the module, saying why, where the
// module proxy cannot serve confluent-kafka-go.
package librdkafka
