package kafka

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
)

// BenchmarkSimpleOffsetCommit measures the handler's own work on the
// commit path of bench/'s Kafka row: an OffsetCommit of one partition,
// without member or generation, to a group the handler holds nothing of
// (1,000 groups taken in turn), over a coordinator that does not sync, so
// that the handler's share shows beside the coordinator's.
func BenchmarkSimpleOffsetCommit(b *testing.B) {
	o := coordinator.DefaultOptions()
	o.Partitions = 4
	o.Logger = quiet
	o.UnsafeNoSync = true
	c, err := coordinator.Open(b.TempDir(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	h := newHandler(b, c, testHandlerOptions())
	groups := make([]string, 1000)
	for i := range groups {
		groups[i] = fmt.Sprintf("g-%06d", i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group = groups[i%len(groups)]
		req.Generation = -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "orders-0",
			Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: int64(i), LeaderEpoch: -1}}}}
		resp, err := h.Handle(ctx, req, Client{})
		if err != nil {
			b.Fatal(err)
		}
		if code := resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			b.Fatalf("OffsetCommit answered error %d", code)
		}
	}
}
