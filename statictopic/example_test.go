package statictopic_test

import (
	"fmt"

	"github.com/offsetd/offsetd/statictopic"
)

// A static topic is created on two brokers, queue 0 moves to a third, and
// offsets translate on both sides of the move; an offset in the gap between
// the two items answers where to go on.
func Example() {
	scope, err := statictopic.ParseScope("clusterA")
	if err != nil {
		panic(err)
	}
	now := int64(1_700_000_000_000)
	m, err := statictopic.Create("TopicTest", scope, 4, []string{"b1", "b2"}, statictopic.NextEpoch(0, now), now, nil)
	if err != nil {
		panic(err)
	}
	// b1's physical queue 0 holds 12,345 messages when queue 0 moves to b3.
	m, err = statictopic.Remap(m, []statictopic.QueueMove{{QueueID: 0, ToBroker: "b3", OldLeaderMaxOffset: 12345}},
		statictopic.NextEpoch(m.Epoch, now), now)
	if err != nil {
		panic(err)
	}
	for _, logic := range []int64{100, 20005, 15000} {
		item, physical, err := m.ToPhysical(0, logic)
		if next, ok := statictopic.NextLogicOffset(err); ok {
			fmt.Printf("logic %d: in a gap, go on at %d\n", logic, next)
			continue
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("logic %d: %s-%d offset %d\n", logic, item.Broker, item.QueueID, physical)
	}
	route, err := statictopic.BuildRoute("TopicTest", scope, statictopic.Producer, []statictopic.Mapping{m}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(scope.BrokerName(), route.Queues[0])
	// Output:
	// logic 100: b1-0 offset 100
	// logic 20005: b3-0 offset 5
	// logic 15000: in a gap, go on at 20000
	// __logic__clusterA {__logic__clusterA 0 b3 0}
}

// Epochs fence concurrent writers: a lower epoch loses, the same epoch must
// repeat the same content.
func ExampleCheckEpoch() {
	scope, _ := statictopic.ParseScope("clusterB,clusterA")
	stored, _ := statictopic.Create("T", scope, 2, []string{"b1"}, 5000, 0, nil)
	grown, _ := statictopic.Create("T", scope, 3, []string{"b1"}, statictopic.NextEpoch(stored.Epoch, 0), 0, &stored)

	fmt.Println(statictopic.CheckEpoch(stored, grown))
	fmt.Println(statictopic.CheckEpoch(stored, stored.Clone()))
	fmt.Println(statictopic.CheckEpoch(grown, stored))
	// Output:
	// true <nil>
	// false <nil>
	// false statictopic: stale epoch: topic "T" scope "clusterA,clusterB": epoch 5000 below stored 6000
}
