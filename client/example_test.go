package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/server"
)

func Example() {
	// A server for the example; a real client talks to a running offsetd.
	dir, _ := os.MkdirTemp("", "offsetd-example")
	defer os.RemoveAll(dir)
	opts := coordinator.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	coord, _ := coordinator.Open(dir, opts)
	defer coord.Close()
	srv, _ := server.New(coord, server.Options{Logger: opts.Logger})
	ts := httptest.NewServer(srv)
	defer ts.Close()

	ctx := context.Background()
	c, err := client.New(ts.URL, client.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = c.Commit(ctx, "payments", -1, []client.OffsetCommit{
		{Topic: "orders", Partition: 0, Offset: 42, LeaderEpoch: -1},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	g, _ := c.GroupOffsets(ctx, "payments", "")
	for _, o := range g.Offsets {
		fmt.Printf("%s %s/%d at %d\n", g.Group, o.Topic, o.Partition, o.Offset)
	}
	// Nothing changes within 10ms: the poll ends unchanged.
	_, changed, _ := c.PollGroupOffsets(ctx, "payments", "", g.Version, 10*time.Millisecond)
	fmt.Println("changed:", changed)
	// Output:
	// payments orders/0 at 42
	// changed: false
}
