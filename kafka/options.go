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
