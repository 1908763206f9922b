package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/kafka"
)

// offsetdKafkaSystem is offsetd as Kafka clients see it: the coordinator
// with its default options behind the kafka package's handler and listener
// on loopback, in a process of its own (child_test.go), driven by franz-go
// clients, one per concurrent caller (each its own connection, as separate
// consumers are). A commit is what a kgo group consumer sends once it knows
// its coordinator: one OffsetCommit on the coordinator's open connection,
// no Metadata or FindCoordinator request per commit. Whole-group reads go
// through kadm.FetchOffsets; point reads are one OffsetFetch for one
// partition (kadm has no point read), on the same connection. allocs/op
// counts the clients' allocations only; cpu-ns is the server's and the
// clients' CPU together, server-cpu-ns and client-cpu-ns each apart.
var offsetdKafkaSystem = system{
	name:        "offsetd-kafka",
	durable:     true,
	reads:       true,
	skipRestart: true, // its restart is offsetd's plus a listener
	open: func(dir string, callers int) (committer, error) {
		return startKafkaClients(childOffsetdKafka, dir, callers)
	},
	load: loadOffsetd,
}

// serveOffsetdKafka opens a coordinator in dir with offsetd's options and
// serves it with the Kafka listener (default options) on 127.0.0.1: what
// a child process of offsetdKafkaSystem runs.
//
// With BENCH_KAFKA_NOSYNC=1 in the environment the coordinator runs with
// UnsafeNoSync: a diagnostic build of the row without the journal's sync,
// to tell what the Kafka path costs from what waiting for the disk does.
func serveOffsetdKafka(dir string) (childServer, error) {
	o := offsetdOptions()
	o.UnsafeNoSync = os.Getenv("BENCH_KAFKA_NOSYNC") == "1"
	stats := &journalStats{}
	o.Observer = stats
	c, err := coordinator.Open(dir, o)
	if err != nil {
		return nil, err
	}
	k := &kafkaServer{coord: c, stats: stats, served: make(chan error, 1)}
	hopts := kafka.DefaultOptions()
	hopts.Logger = offsetdOptions().Logger
	if k.handler, err = kafka.NewHandler(c, hopts); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if k.server, err = kafka.NewServer(k.handler, kafka.ServerOptions{Logger: hopts.Logger}); err != nil {
		k.handler.Close()
		return nil, errors.Join(err, c.Close())
	}
	if k.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		k.handler.Close()
		return nil, errors.Join(err, c.Close())
	}
	go func() { k.served <- k.server.Serve(k.ln) }()
	return k, nil
}

// kafkaServer is offsetd's Kafka listener over a coordinator.
type kafkaServer struct {
	coord   *coordinator.Coordinator
	handler *kafka.Handler
	server  *kafka.Server
	ln      net.Listener
	served  chan error
	stats   *journalStats
}

func (k *kafkaServer) addr() net.Addr { return k.ln.Addr() }

func (k *kafkaServer) journal() syncCounts { return k.stats.load() }

// Close stops the listener and closes the coordinator.
func (k *kafkaServer) Close() error {
	k.handler.Close()
	err := k.server.Close()
	err = errors.Join(err, <-k.served)
	return errors.Join(err, k.coord.Close())
}

// kafkaStore is a Kafka server in a child process and a pool of clients
// of it.
type kafkaStore struct {
	child   *serverChild
	journal syncStats // the server's, as last read
	clients chan *kafkaClient
	all     []*kafkaClient
}

// kafkaClient is one client and its group coordinator, found once, as a
// group consumer finds it when it joins.
type kafkaClient struct {
	cl    *kgo.Client
	coord *kgo.Broker
}

// startKafkaClients starts server name in a child process over dir and
// connects callers clients, each of which has found its coordinator and
// opened its connection to it before the benchmark starts.
func startKafkaClients(name, dir string, callers int) (*kafkaStore, error) {
	child, err := startChild(name, dir)
	if err != nil {
		return nil, err
	}
	k := &kafkaStore{child: child, clients: make(chan *kafkaClient, max(callers, 1))}
	ctx := context.Background()
	for range max(callers, 1) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(child.addr), kgo.RequestRetries(0))
		if err != nil {
			return nil, errors.Join(err, k.Close())
		}
		c := &kafkaClient{cl: cl}
		k.all = append(k.all, c)
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.CoordinatorKey = "bench"
		resp, err := find.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("FindCoordinator: %w", err), k.Close())
		}
		c.coord = cl.Broker(int(resp.NodeID))
		// One request opens the connection every commit then takes.
		warm := kmsg.NewPtrOffsetFetchRequest()
		warm.Group = "bench-warm-up"
		if _, err := c.coord.Request(ctx, warm); err != nil {
			return nil, errors.Join(fmt.Errorf("warming up: %w", err), k.Close())
		}
		k.clients <- c
	}
	return k, nil
}

// with lends fn one client: callers at once never share one.
func (k *kafkaStore) with(fn func(c *kafkaClient) error) error {
	c := <-k.clients
	defer func() { k.clients <- c }()
	return fn(c)
}

// serverCPU is the CPU time the server's process has used so far.
func (k *kafkaStore) serverCPU() (time.Duration, error) {
	cpu, _, err := k.child.stats()
	return cpu, err
}

// syncStats returns the server's journal counters, read from its process
// now: the commit benchmark reports commits/fsync and the rest from them
// as it does for embedded offsetd. A failed read leaves them as they were.
func (k *kafkaStore) syncStats() *syncStats {
	if _, sc, err := k.child.stats(); err == nil {
		k.journal.store(sc)
	}
	return &k.journal
}

// Commit sends one OffsetCommit to the group's coordinator on the
// client's open connection, as a group consumer commits; it carries no
// member or generation (the workload commits to many groups, of which no
// committer is a member), so offsetd stores it as an admin commit.
func (k *kafkaStore) Commit(ctx context.Context, group string, offsets []coordinator.OffsetCommit) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = group
	req.Generation = -1
	for _, o := range offsets {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != o.Topic {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = o.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = o.Partition, o.Offset, o.LeaderEpoch
		p.Metadata = kmsg.StringPtr(o.Metadata)
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	return k.with(func(c *kafkaClient) error {
		kresp, err := c.coord.Request(ctx, req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.OffsetCommitResponse)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return fmt.Errorf("OffsetCommit of %s/%s/%d: %w", group, t.Topic, p.Partition, err)
				}
			}
		}
		return nil
	})
}

func (k *kafkaStore) Fetch(group, topic string, partition int32) (coordinator.Offset, bool, error) {
	var out coordinator.Offset
	var ok bool
	err := k.with(func(c *kafkaClient) error {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, MemberEpoch: -1,
			Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{partition}}}}}
		kresp, err := c.coord.Request(context.Background(), req)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
			return fmt.Errorf("OffsetFetch of %s/%s/%d: unexpected answer %+v", group, topic, partition, resp)
		}
		if err := kerr.ErrorForCode(resp.Groups[0].ErrorCode); err != nil {
			return err
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return err
		}
		if p.Offset < 0 {
			return nil
		}
		out, ok = coordinator.Offset{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch}, true
		if p.Metadata != nil {
			out.Metadata = *p.Metadata
		}
		return nil
	})
	return out, ok, err
}

// FetchGroup reads the group with kadm.FetchOffsets and sorts it by topic
// and partition, as the coordinator keeps it.
func (k *kafkaStore) FetchGroup(group string) ([]coordinator.PartitionOffset, error) {
	var out []coordinator.PartitionOffset
	err := k.with(func(c *kafkaClient) error {
		resps, err := kadm.NewClient(c.cl).FetchOffsets(context.Background(), group)
		if err != nil {
			return err
		}
		if err := resps.Error(); err != nil {
			return err
		}
		resps.Each(func(r kadm.OffsetResponse) {
			out = append(out, coordinator.PartitionOffset{Topic: r.Topic, Partition: r.Partition,
				Offset: coordinator.Offset{Offset: r.At, LeaderEpoch: r.LeaderEpoch, Metadata: r.Metadata}})
		})
		return nil
	})
	slices.SortFunc(out, func(a, b coordinator.PartitionOffset) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out, err
}

// Close disconnects the clients and stops the server's process.
func (k *kafkaStore) Close() error {
	for _, c := range k.all {
		c.cl.Close()
	}
	return k.child.Close()
}
