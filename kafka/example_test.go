package kafka_test

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/kafka"
)

// A Kafka admin client commits and fetches a group's offsets through
// offsetd's Kafka listener, as it would on a Kafka cluster.
func Example() {
	dir, _ := os.MkdirTemp("", "offsetd-example")
	defer os.RemoveAll(dir)
	c, err := coordinator.Open(dir, coordinator.DefaultOptions())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	h, _ := kafka.NewHandler(c, kafka.DefaultOptions())
	defer h.Close()
	s, _ := kafka.NewServer(h, kafka.DefaultServerOptions())
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go s.Serve(ln)
	defer s.Close()

	// What a Kafka user runs, pointed at offsetd's -kafka-listen address.
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()

	var offsets kadm.Offsets
	offsets.AddOffset("orders", 0, 42, -1)
	if err := adm.CommitAllOffsets(ctx, "payments", offsets); err != nil {
		panic(err)
	}
	fetched, err := adm.FetchOffsets(ctx, "payments")
	if err != nil {
		panic(err)
	}
	o, _ := fetched.Lookup("orders", 0)
	fmt.Println("payments orders/0 at", o.At)
	groups, _ := adm.ListGroups(ctx)
	fmt.Println("groups:", groups.Groups())
	// Output:
	// payments orders/0 at 42
	// groups: [payments]
}
