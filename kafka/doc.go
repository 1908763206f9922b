// Package kafka speaks the Kafka protocol of a group coordinator in front of
// a coordinator.Coordinator, so that Kafka clients and tools commit and
// fetch offsets and run consumer groups on offsetd, classic ones and those
// of the consumer protocol (KIP-848, consumer.go). Requests and
// responses are encoded by franz-go's kmsg; nothing here writes the wire
// format by hand.
//
// Two ways in:
//   - Handler answers the group and offset requests (FindCoordinator,
//     OffsetCommit/Fetch/Delete, List/Describe/DeleteGroups, JoinGroup,
//     SyncGroup, Heartbeat, LeaveGroup, and, given Options.Topics,
//     ConsumerGroupHeartbeat and ConsumerGroupDescribe). A Go program that
//     serves the Kafka protocol, a broker or a proxy, hands it those
//     requests and sends back its responses.
//   - Server listens for Kafka clients itself, as a one-broker cluster: it
//     adds ApiVersions, Metadata and SASL/PLAIN to what Handler answers,
//     and bounds what a client can hold as a broker does (ServerOptions:
//     idle and frame deadlines, a connection cap, and memory for large
//     frames that grows as their bytes arrive, within one shared budget).
//
// Offsets and the group generation are stored by the coordinator; group
// membership (members, protocols, assignments, epochs, timers) lives in
// memory, changed under the group's lock, which no write is made under
// (Handler.inGroup): heartbeats and timers never wait for the disk.
// After a restart the members rejoin and the next generation is above every
// generation made durable (by a commit, or by the rebalance that started
// it). In a cluster (Options.Brokers) each node runs a Handler on its
// cluster node's coordinator; a group is coordinated by the node that leads
// its partition, and its membership starts afresh there when the lead
// moves. One commit request is one log entry: a
// request refused for one partition is refused whole, where Kafka commits
// partition by partition.
//
// Lifecycle:
//
//	h, err := kafka.NewHandler(c, kafka.DefaultOptions())
//	if err != nil { ... }
//	defer h.Close()
//	s, err := kafka.NewServer(h, kafka.DefaultServerOptions())
//	if err != nil { ... }
//	go s.Serve(ln) // ln from net.Listen, or tls.NewListener
//	defer s.Close()
package kafka
