package coordinator_test

import (
	"context"
	"fmt"
	"os"

	"github.com/offsetd/offsetd/coordinator"
)

func Example() {
	dir, _ := os.MkdirTemp("", "offsetd-example")
	defer os.RemoveAll(dir)

	c, err := coordinator.Open(dir, coordinator.DefaultOptions())
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	// Commit returns once the offsets are fsynced.
	err = c.Commit(ctx, "payments", []coordinator.OffsetCommit{
		{Topic: "orders", Partition: 0, Offset: 42, LeaderEpoch: -1},
		{Topic: "orders", Partition: 1, Offset: 7, LeaderEpoch: -1},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c.Close()

	// A restart replays the log.
	c, err = coordinator.Open(dir, coordinator.DefaultOptions())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	off, ok, _ := c.Fetch("payments", "orders", 0)
	fmt.Println(off.Offset, ok)
	all, _ := c.FetchGroup("payments")
	for _, o := range all {
		fmt.Println(o.Topic, o.Partition, o.Offset.Offset)
	}
	// Output:
	// 42 true
	// orders 0 42
	// orders 1 7
}
