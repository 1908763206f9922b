package kafka

import (
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// Broker names the Kafka broker that FindCoordinator answers with: the node
// whose listener (or whose embedding broker) hands group and offset requests
// to the Handler.
type Broker struct {
	NodeID int32
	// Host and Port are where clients reach the broker. An empty Host is
	// filled in by Server with the address each connection arrived at.
	Host string
	Port int32
}

// Options configures a Handler. Zero fields take the values of
// DefaultOptions.
type Options struct {
	// Broker is the coordinator FindCoordinator returns for every group; in
	// a cluster, this node's entry of Brokers.
	Broker Broker
	// Brokers, in a cluster, lists every node (NodeID: its id in the
	// cluster) with where its Kafka listener is reached. The coordinator of
	// a group is then the node that leads the group's partition:
	// FindCoordinator names it, Metadata lists every node, and the group's
	// requests sent to another node are answered NOT_COORDINATOR. Nil is a
	// single node, which coordinates every group.
	Brokers []Broker
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// member may ask for in JoinGroup (Kafka's
	// group.min.session.timeout.ms and group.max.session.timeout.ms).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// Topics, if set, says which topics exist: the server-side assignors of
	// consumer groups (KIP-848) hand out the partitions it names. Nil means
	// no topic has partitions, and consumer-group members are assigned
	// nothing.
	Topics Topics
	// ConsumerSessionTimeout is how long a member of a consumer group
	// (KIP-848) stays without a heartbeat before it is removed, and
	// ConsumerHeartbeatInterval how often it is told to heartbeat (Kafka's
	// group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms).
	ConsumerSessionTimeout    time.Duration
	ConsumerHeartbeatInterval time.Duration
	// Logger receives group events. Nil means slog.Default().
	Logger *slog.Logger
	// Observer, if set, is told about every request handled.
	Observer Observer
}

// Topics tells a Handler which topics exist and how many partitions each
// has, for the server-side assignors of consumer groups. An embedding
// broker implements it with its own topics; offsetd serve with its static
// topics. It must be quick and safe for concurrent use: it is asked under a
// group's lock.
type Topics interface {
	// Topic returns the ID and partition count of the topic named name;
	// ok is false when there is no such topic.
	Topic(name string) (id [16]byte, partitions int32, ok bool)
	// Names returns the name of every topic, for the members that
	// subscribe by regular expression.
	Names() []string
}

// Observer receives one call per Kafka request answered, for metrics. It
// must be quick and safe for concurrent use.
type Observer interface {
	// ObserveKafkaRequest reports a request by API name (OffsetCommit), the
	// error its response carries by Kafka's name for it (NONE, or the first
	// error of a group, topic or partition) and how long it took.
	ObserveKafkaRequest(api, errorCode string, took time.Duration)
}

// DefaultOptions returns the options a Handler runs with unless told
// otherwise: Kafka's default session-timeout bounds.
func DefaultOptions() Options {
	return Options{
		MinSessionTimeout: 6 * time.Second,
		MaxSessionTimeout: 30 * time.Minute,

		ConsumerSessionTimeout:    45 * time.Second,
		ConsumerHeartbeatInterval: 5 * time.Second,
	}
}

func (o *Options) ensureDefaults() {
	d := DefaultOptions()
	if o.MinSessionTimeout == 0 {
		o.MinSessionTimeout = d.MinSessionTimeout
	}
	if o.MaxSessionTimeout == 0 {
		o.MaxSessionTimeout = d.MaxSessionTimeout
	}
	if o.ConsumerSessionTimeout == 0 {
		o.ConsumerSessionTimeout = d.ConsumerSessionTimeout
	}
	if o.ConsumerHeartbeatInterval == 0 {
		o.ConsumerHeartbeatInterval = d.ConsumerHeartbeatInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o Options) validate() error {
	switch {
	case o.MinSessionTimeout < 0:
		return fmt.Errorf("kafka: Options.MinSessionTimeout is %s, want > 0", o.MinSessionTimeout)
	case o.MaxSessionTimeout < o.MinSessionTimeout:
		return fmt.Errorf("kafka: Options.MaxSessionTimeout is %s, below MinSessionTimeout %s", o.MaxSessionTimeout, o.MinSessionTimeout)
	case o.ConsumerSessionTimeout < 0:
		return fmt.Errorf("kafka: Options.ConsumerSessionTimeout is %s, want > 0", o.ConsumerSessionTimeout)
	case o.ConsumerHeartbeatInterval < 0 || o.ConsumerHeartbeatInterval >= o.ConsumerSessionTimeout:
		return fmt.Errorf("kafka: Options.ConsumerHeartbeatInterval is %s, want > 0 and below ConsumerSessionTimeout %s", o.ConsumerHeartbeatInterval, o.ConsumerSessionTimeout)
	case o.Broker.Port < 0:
		return fmt.Errorf("kafka: Options.Broker.Port is %d", o.Broker.Port)
	}
	if o.Brokers == nil {
		return nil
	}
	seen := map[int32]bool{}
	for _, b := range o.Brokers {
		switch {
		case b.Host == "" || b.Port <= 0:
			return fmt.Errorf("kafka: Options.Brokers: node %d has no host:port", b.NodeID)
		case seen[b.NodeID]:
			return fmt.Errorf("kafka: Options.Brokers: node %d is listed twice", b.NodeID)
		}
		seen[b.NodeID] = true
	}
	if !slices.Contains(o.Brokers, o.Broker) {
		return fmt.Errorf("kafka: Options.Broker %+v is not one of Options.Brokers", o.Broker)
	}
	return nil
}

// ServerOptions configures a Server. Zero fields take the values of
// DefaultServerOptions. What a client can hold is bounded as a Kafka broker
// bounds it: how long it may stay silent, how long a frame may take once
// begun, how many connections stay open and how much memory the frames
// being read or answered take in all.
type ServerOptions struct {
	// MaxFrameBytes bounds one request frame; a larger one closes the
	// connection that sent it (Kafka's socket.request.max.bytes).
	MaxFrameBytes int
	// IdleTimeout closes a connection that has not begun a request for
	// this long since its last response, or since it opened (Kafka's
	// connections.max.idle.ms). Clients reconnect when they next need to.
	IdleTimeout time.Duration
	// FrameTimeout bounds the rest of a request frame once its size has
	// arrived, and the writing of a response: a client that stalls
	// mid-frame, or stops reading, is closed. Kafka has no such bound.
	FrameTimeout time.Duration
	// MaxConnections caps the open connections; one more is closed as
	// soon as it is accepted, and the next is accepted once one has closed
	// (Kafka's max.connections, whose acceptor waits instead).
	MaxConnections int
	// MaxQueuedBytes bounds the memory of the frames above
	// smallFrameBytes that are being read or answered, summed over every
	// connection (Kafka's queued.max.request.bytes). A frame's memory grows
	// with the bytes that arrived, not with its size prefix; a connection
	// whose next bytes find the bound reached stops reading until memory
	// is released, within its FrameTimeout. Smaller frames (heartbeats,
	// commits of a few partitions) are each connection's own and never
	// wait. Below MaxFrameBytes is an error: the largest frame must fit.
	MaxQueuedBytes int64
	// AuthToken, when not empty, is the password of SASL/PLAIN (any user
	// name): a connection must authenticate before anything but ApiVersions
	// and the SASL requests.
	AuthToken string
	// Logger receives connection errors. Nil means slog.Default().
	Logger *slog.Logger
	// Observer, if set, is told about the requests the server answers
	// itself (ApiVersions, Metadata, SASL); give the Handler the same one.
	Observer Observer
}

// DefaultServerOptions returns the options a Server runs with unless told
// otherwise: Kafka's default idle timeout, and bounds on connections and
// queued frames that a node holds without trouble (each is explained in
// the README's configuration table).
func DefaultServerOptions() ServerOptions {
	return ServerOptions{
		MaxFrameBytes:  1 << 20,
		IdleTimeout:    10 * time.Minute,
		FrameTimeout:   30 * time.Second,
		MaxConnections: defaultMaxConnections,
		MaxQueuedBytes: 100 << 20,
	}
}

// defaultMaxConnections is DefaultServerOptions' MaxConnections. A Kafka
// consumer holds one or two connections to its coordinator (franz-go a
// group and a normal one; librdkafka one for the coordinator), so this
// serves 5,000 consumers or more on one node. An open, idle connection
// costs about 8.5 KiB of heap and stack (BenchmarkIdleConnection), so the
// cap holds them to about 85 MiB, and to about 125 MiB with a small frame
// in each; large frames are MaxQueuedBytes'. It also stays clear of the
// open-file limit (Go raises the soft limit to the hard one, commonly
// 65,536 or more), where accepting would fail.
const defaultMaxConnections = 10000

func (o *ServerOptions) ensureDefaults() {
	d := DefaultServerOptions()
	if o.MaxFrameBytes == 0 {
		o.MaxFrameBytes = d.MaxFrameBytes
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = d.IdleTimeout
	}
	if o.FrameTimeout == 0 {
		o.FrameTimeout = d.FrameTimeout
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = d.MaxConnections
	}
	if o.MaxQueuedBytes == 0 {
		o.MaxQueuedBytes = max(d.MaxQueuedBytes, int64(o.MaxFrameBytes))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o ServerOptions) validate() error {
	switch {
	case o.MaxFrameBytes < 0:
		return fmt.Errorf("kafka: ServerOptions.MaxFrameBytes is %d, want > 0", o.MaxFrameBytes)
	case o.IdleTimeout < 0:
		return fmt.Errorf("kafka: ServerOptions.IdleTimeout is %s, want > 0", o.IdleTimeout)
	case o.FrameTimeout < 0:
		return fmt.Errorf("kafka: ServerOptions.FrameTimeout is %s, want > 0", o.FrameTimeout)
	case o.MaxConnections < 0:
		return fmt.Errorf("kafka: ServerOptions.MaxConnections is %d, want > 0", o.MaxConnections)
	case o.MaxQueuedBytes < int64(o.MaxFrameBytes):
		return fmt.Errorf("kafka: ServerOptions.MaxQueuedBytes is %d, below MaxFrameBytes %d", o.MaxQueuedBytes, o.MaxFrameBytes)
	}
	return nil
}
