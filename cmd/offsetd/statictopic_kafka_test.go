package main

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/kafka"
)

// Kafka consumers on the consumer protocol (kgo.ServerSideBalancer) are
// assigned the logic queues of a static topic of -kafka-scope by offsetd
// serve alone: Metadata shows the topic with its queues as partitions and a
// stable ID, a static topic of another scope has none, two consumers split
// the queues, and the one that stays gets them all when the other leaves.
// offsetd holds no records: only the assignments are checked.
func TestServeKafkaStaticTopic(t *testing.T) {
	s := startServe(t, []string{"serve", "-data", filepath.Join(t.TempDir(), "d"), "-listen", "127.0.0.1:0", "-kafka-scope", "clusterA"}, nil)
	c, err := client.New(s.url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateStaticTopic(ctx, "TopicTest", "clusterA", 8, []string{"b1", "b2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStaticTopic(ctx, "Elsewhere", "clusterB", 4, []string{"b3"}); err != nil {
		t.Fatal(err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("TopicTest")}, {Topic: kmsg.StringPtr("Elsewhere")}}
	resp, err := md.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		want := map[string]int{"TopicTest": 8, "Elsewhere": 0}[*rt.Topic]
		if len(rt.Partitions) != want || rt.TopicID != kafka.TopicID(*rt.Topic) {
			t.Fatalf("Metadata of %s: %d partitions, id %x; want %d, id %x", *rt.Topic, len(rt.Partitions), rt.TopicID, want, kafka.TopicID(*rt.Topic))
		}
	}

	var mu sync.Mutex
	owned := map[string]map[int32]bool{}
	changed := make(chan struct{}, 1)
	track := func(name string, add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			mu.Lock()
			if owned[name] == nil {
				owned[name] = map[int32]bool{}
			}
			for _, p := range ps["TopicTest"] {
				if add {
					owned[name][p] = true
				} else {
					delete(owned[name], p)
				}
			}
			mu.Unlock()
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	start := func(name string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.kafka), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("TopicTest"),
			kgo.ServerSideBalancer(), kgo.OnPartitionsAssigned(track(name, true)),
			kgo.OnPartitionsRevoked(track(name, false)), kgo.OnPartitionsLost(track(name, false)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	waitFor := func(want map[string]int) {
		t.Helper()
		for {
			mu.Lock()
			ok, total := true, 0
			for name, n := range want {
				ok = ok && len(owned[name]) == n
				total += len(owned[name])
			}
			got := map[string]int{}
			for name, ps := range owned {
				got[name] = len(ps)
			}
			mu.Unlock()
			if total > 8 {
				t.Fatalf("queues owned twice: %v", got)
			}
			if ok {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("owned %v, want %v", got, want)
			}
		}
	}
	start("a")
	waitFor(map[string]int{"a": 8})
	b := start("b")
	waitFor(map[string]int{"a": 4, "b": 4})
	b.Close()
	waitFor(map[string]int{"a": 8, "b": 0})
}
