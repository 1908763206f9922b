package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/statictopic"
)

// The operator's static-topic tools, as the README's worked example uses
// them: the gap rule, sealed history, RocketMQ details, a remap to a broker
// set and a trim checked against a consumer group.
func Example_staticTopicTools() {
	dir, _ := os.MkdirTemp("", "offsetd-example")
	defer os.RemoveAll(dir)
	opts := coordinator.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := coordinator.Open(dir, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()

	c.CreateStaticTopic(ctx, "TopicTest", "clusterA", 6, []string{"a1", "a2"})
	m, _ := c.RemapStaticTopic(ctx, "TopicTest", "clusterA",
		[]statictopic.QueueMove{{QueueID: 0, ToBroker: "a3", OldLeaderMaxOffset: 12345}})
	_, _, _, err = c.Translate("TopicTest", "clusterA", 0, 15000)
	next, _ := statictopic.NextLogicOffset(err)
	fmt.Println("in the gap, go on at", next)

	bad := m.Clone()
	bad.Epoch += 1000
	bad.Queues[0][0].EndOffset = 12000
	fmt.Println("rewrite refused:", errors.Is(c.PutStaticTopic(ctx, bad), statictopic.ErrHistory))

	details, _ := c.ExportStaticTopic("TopicTest", "clusterA")
	back, _ := c.ImportStaticTopic(ctx, details, false)
	fmt.Println("details:", len(details), "imported back unchanged:", back.Equal(m))

	plan, _ := c.PlanStaticTopicRemap("TopicTest", "clusterA", []string{"a1", "a2", "a3"})
	maxOffsets := map[int32]int64{}
	for _, mv := range plan.Moves {
		maxOffsets[mv.QueueID] = 500
	}
	m, err = c.RemapStaticTopicToBrokers(ctx, "TopicTest", "clusterA", []string{"a1", "a2", "a3"}, maxOffsets, plan.Epoch)
	fmt.Println("moves:", len(plan.Moves), err)

	c.Commit(ctx, "cg", []coordinator.OffsetCommit{{Topic: "TopicTest", Partition: 0, Offset: 500}})
	readers, _ := c.StaticTopicReaders("TopicTest", "clusterA")
	fmt.Println("queue 0, item 0 read by:", readers[0].Items[0].Groups)
	_, err = c.TrimStaticTopic(ctx, "TopicTest", "clusterA", []int32{0}, 20000, false)
	fmt.Println("trim refused:", errors.Is(err, statictopic.ErrHistory))
	c.Commit(ctx, "cg", []coordinator.OffsetCommit{{Topic: "TopicTest", Partition: 0, Offset: 12345}})
	m, err = c.TrimStaticTopic(ctx, "TopicTest", "clusterA", []int32{0}, 20000, false)
	fmt.Println("trimmed:", len(m.Queues[0]), "item left,", err)
	// Output:
	// in the gap, go on at 20000
	// rewrite refused: true
	// details: 3 imported back unchanged: true
	// moves: 1 <nil>
	// queue 0, item 0 read by: [{cg 500}]
	// trim refused: true
	// trimmed: 1 item left, <nil>
}
