// Package statictopic is the model of static topics and its rules: mapping
// items, scopes and their logic broker names, epochs, allocation of logic
// queues to brokers, remapping, offset translation and routes. It is pure
// logic: no I/O, no goroutines, no clock (callers pass nowMillis). The
// coordinator stores Mappings durably and calls these functions; RocketMQ's
// statictopic package is the semantic reference.
//
// A static topic has a fixed number of logic queues. Each logic queue is a
// list of MappingItems, oldest first; the last one is the leader, open
// (EndOffset -1) and taking writes. Moving a queue seals the leader and
// appends an item on the new broker whose LogicOffset starts on a block
// boundary (LogicBlockSize) more than half a block past the old item's logic
// end, so logic ranges never touch:
//
//	logic queue 0:  gen 0  b1-0  logic [0, 12345)     physical [0, 12345)   sealed
//	                gen 1  b3-0  logic [20000, ∞)     physical [0, ∞)       leader
//
// A Mapping lives in a Scope ("clusterA", "c1,c2" or "global") and is named
// in routes by the scope's logic broker name ("__logic__clusterA",
// "__logic__c1_c2", "__logic__global"). Every change carries a higher epoch
// (NextEpoch), and stores fence with CheckEpoch.
//
// Sealed items are history: consumers hold logic offsets in their ranges, so
// CheckHistory refuses a newer mapping that rewrites or drops one. An offset
// in a gap (15,000 above) is ErrOutOfRange carried by a GapError whose Next
// (20,000) is where a consumer goes on. PlanRemap plans the fewest moves that
// balance a topic over a set of brokers; Trim drops old sealed items, after
// CheckReaders has made sure no consumer group still reads them (ReadingItem
// says which item a committed offset reads next). Export and Import speak
// RocketMQ's TopicQueueMappingDetail, one Detail per broker, including an old
// leader RocketMQ keeps open (EndOffset -1) after a remap.
//
// Typical use by a coordinator:
//
//	scope, err := statictopic.ParseScope("clusterA")
//	m, err := statictopic.Create("TopicTest", scope, 8, []string{"b1", "b2"}, statictopic.NextEpoch(0, now), now, nil)
//	// store m ...
//	m, err = statictopic.Remap(m, []statictopic.QueueMove{{QueueID: 0, ToBroker: "b3", OldLeaderMaxOffset: 12345}},
//		statictopic.NextEpoch(m.Epoch, now), now)
//	// store m ...
//	item, physical, err := m.ToPhysical(0, 20005) // b3, queue 0, offset 5
//	route, err := statictopic.BuildRoute("TopicTest", scope, statictopic.Consumer, stored, globalRead)
package statictopic
