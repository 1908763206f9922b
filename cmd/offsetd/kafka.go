package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/kafka"
	"github.com/offsetd/offsetd/server"
	"github.com/offsetd/offsetd/statictopic"
)

// kafkaListener is the Kafka side of offsetd serve.
type kafkaListener struct {
	handler *kafka.Handler
	server  *kafka.Server
	addr    net.Addr
	served  chan error
}

// startKafka serves Kafka clients on cfg.kafkaListen, over TLS when
// tlsConfig is set and with SASL/PLAIN when token is.
func startKafka(cfg serveConfig, c *coordinator.Coordinator, tlsConfig *tls.Config, token string, metrics *server.Metrics, logger *slog.Logger) (*kafkaListener, error) {
	opts := kafka.DefaultOptions()
	opts.Logger = logger
	opts.Observer = metrics
	if cfg.kafkaAdvert != "" {
		b, err := kafkaBroker(0, cfg.kafkaAdvert)
		if err != nil {
			return nil, fmt.Errorf("-kafka-advertise: %w", err)
		}
		opts.Broker = b
	}
	for id, addr := range cfg.kafkaPeers {
		if id > math.MaxInt32 {
			return nil, fmt.Errorf("-kafka-peers: node id %d is above a Kafka broker id's %d", id, math.MaxInt32)
		}
		b, err := kafkaBroker(int32(id), addr)
		if err != nil {
			return nil, fmt.Errorf("-kafka-peers: %w", err)
		}
		opts.Brokers = append(opts.Brokers, b)
		if id == cfg.nodeID {
			opts.Broker = b
		}
	}
	slices.SortFunc(opts.Brokers, func(a, b kafka.Broker) int { return int(a.NodeID - b.NodeID) })
	scope, err := statictopic.ParseScope(cfg.kafkaScope)
	if err != nil {
		return nil, fmt.Errorf("-kafka-scope: %w", err)
	}
	opts.Topics = staticTopics{c: c, scope: scope.String()}
	h, err := kafka.NewHandler(c, opts)
	if err != nil {
		return nil, err
	}
	s, err := kafka.NewServer(h, kafka.ServerOptions{
		MaxFrameBytes:  int(cfg.maxBody),
		IdleTimeout:    cfg.kafkaIdleTimeout,
		FrameTimeout:   cfg.kafkaFrameTimeout,
		MaxConnections: cfg.kafkaMaxConns,
		MaxQueuedBytes: int64(cfg.kafkaMaxQueued),
		AuthToken:      token,
		Logger:         logger,
		Observer:       metrics,
	})
	if err != nil {
		h.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.kafkaListen)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("-kafka-listen: %w", err)
	}
	k := &kafkaListener{handler: h, server: s, addr: ln.Addr(), served: make(chan error, 1)}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	go func() { k.served <- s.Serve(ln) }()
	return k, nil
}

// kafkaBroker is the broker a Kafka client is told to reach at addr.
func kafkaBroker(id int32, addr string) (kafka.Broker, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return kafka.Broker{}, fmt.Errorf("%q: %w", addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || host == "" || p == 0 {
		return kafka.Broker{}, fmt.Errorf("%q: want host:port", addr)
	}
	return kafka.Broker{NodeID: id, Host: host, Port: int32(p)}, nil
}

// stop answers the requests waiting in groups, closes the connections and
// waits for them.
func (k *kafkaListener) stop() {
	if k == nil {
		return
	}
	k.handler.Close()
	k.server.Close()
	<-k.served
}

// address is where the listener accepts; nil when it is off.
func (k *kafkaListener) address() net.Addr {
	if k == nil {
		return nil
	}
	return k.addr
}

// errors is where a failure to accept ends up; nil (never ready) when the
// listener is off.
func (k *kafkaListener) errors() <-chan error {
	if k == nil {
		return nil
	}
	return k.served
}

// kafkaMembership shows the Kafka listener's groups on the HTTP side.
type kafkaMembership struct{ h *kafka.Handler }

func (k kafkaMembership) GroupMembers(group string) (server.GroupMembers, bool) {
	d, ok := k.h.Describe(group)
	if !ok {
		return server.GroupMembers{}, false
	}
	out := server.GroupMembers{State: d.State, ProtocolType: d.ProtocolType, Protocol: d.Protocol, Generation: d.Generation, Leader: d.Leader}
	for _, m := range d.Members {
		out.Members = append(out.Members, server.GroupMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost})
	}
	return out, true
}

// staticTopics shows Kafka clients the static topics of one scope: a
// static topic is a Kafka topic whose partitions are its logic queues, with
// the stable ID kafka.TopicID derives from its name. Its logic queues
// survive broker changes, so the consumer protocol's assignments over them
// stay put while the topic moves between brokers.
type staticTopics struct {
	c     *coordinator.Coordinator
	scope string
}

func (s staticTopics) Topic(name string) ([16]byte, int32, bool) {
	m, ok, err := s.c.StaticTopic(name, s.scope)
	if err != nil || !ok {
		return [16]byte{}, 0, false
	}
	return kafka.TopicID(name), m.TotalQueues, true
}

func (s staticTopics) Names() []string {
	var names []string
	for _, m := range s.c.StaticTopics() {
		if m.Scope == s.scope {
			names = append(names, m.Topic)
		}
	}
	return names
}

// validScope reports whether s spells a static-topic scope.
func validScope(s string) bool {
	_, err := statictopic.ParseScope(s)
	return err == nil
}
