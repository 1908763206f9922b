package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/kafka"
)

// offsetdKafkaSystem is offsetd as Kafka clients see it: the coordinator
// with its default options behind the kafka package's handler and listener
// on loopback, driven by franz-go clients, one per concurrent caller (each
// its own connection, as separate consumers are). Commits go through
// kadm.CommitOffsets, which first resolves the topics with a Metadata
// request, as it does against Kafka; whole-group reads through
// kadm.FetchOffsets; point reads are one OffsetFetch for one partition (kadm
// has no point read). It runs in the benchmark's process, so allocs/op
// counts the clients' allocations and the server's together.
var offsetdKafkaSystem = system{
	name:        "offsetd-kafka",
	durable:     true,
	reads:       true,
	skipRestart: true, // its restart is offsetd's plus a listener
	open:        startKafka,
	load:        loadOffsetd,
}

// kafkaStore is offsetd's Kafka listener over a coordinator, and a pool of
// clients of it.
type kafkaStore struct {
	coord   *coordinator.Coordinator
	handler *kafka.Handler
	server  *kafka.Server
	served  chan error
	clients chan *kgo.Client
	all     []*kgo.Client
}

// startKafka opens a coordinator in dir with offsetd's options, serves it
// with the Kafka listener on 127.0.0.1, and connects callers clients.
func startKafka(dir string, callers int) (committer, error) {
	c, err := coordinator.Open(dir, offsetdOptions())
	if err != nil {
		return nil, err
	}
	k := &kafkaStore{coord: c, served: make(chan error, 1), clients: make(chan *kgo.Client, max(callers, 1))}
	hopts := kafka.DefaultOptions()
	hopts.Logger = offsetdOptions().Logger
	if k.handler, err = kafka.NewHandler(c, hopts); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if k.server, err = kafka.NewServer(k.handler, kafka.ServerOptions{Logger: hopts.Logger}); err != nil {
		k.handler.Close()
		return nil, errors.Join(err, c.Close())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		k.handler.Close()
		return nil, errors.Join(err, c.Close())
	}
	go func() { k.served <- k.server.Serve(ln) }()
	for range max(callers, 1) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.RequestRetries(0))
		if err != nil {
			return nil, errors.Join(err, k.Close())
		}
		k.all = append(k.all, cl)
		k.clients <- cl
	}
	return k, nil
}

// with lends fn one client: callers at once never share one.
func (k *kafkaStore) with(fn func(cl *kgo.Client) error) error {
	cl := <-k.clients
	defer func() { k.clients <- cl }()
	return fn(cl)
}

func (k *kafkaStore) Commit(ctx context.Context, group string, offsets []coordinator.OffsetCommit) error {
	var os kadm.Offsets
	for _, o := range offsets {
		os.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
	}
	return k.with(func(cl *kgo.Client) error {
		return kadm.NewClient(cl).CommitAllOffsets(ctx, group, os)
	})
}

func (k *kafkaStore) Fetch(group, topic string, partition int32) (coordinator.Offset, bool, error) {
	var out coordinator.Offset
	var ok bool
	err := k.with(func(cl *kgo.Client) error {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, MemberEpoch: -1,
			Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{partition}}}}}
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			return err
		}
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
	err := k.with(func(cl *kgo.Client) error {
		resps, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
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

// Close disconnects the clients, stops the listener and closes the
// coordinator.
func (k *kafkaStore) Close() error {
	for _, cl := range k.all {
		cl.Close()
	}
	k.handler.Close()
	err := k.server.Close()
	err = errors.Join(err, <-k.served)
	return errors.Join(err, k.coord.Close())
}
