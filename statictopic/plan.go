package statictopic

import (
	"cmp"
	"fmt"
	"slices"
)

// RemapPlan is what a remap of a static topic to a set of brokers would
// do: the moves, and the epoch of the mapping they were planned on.
type RemapPlan struct {
	Topic string `json:"topic"`
	Scope string `json:"scope"`
	// Epoch is the epoch of the mapping the plan was made on.
	Epoch int64 `json:"epoch"`
	// Moves are the queues that move. An OldLeaderMaxOffset of -1 is one the
	// apply must be given: the open leader's max offset on its broker.
	Moves []QueueMove `json:"moves"`
}

// PlanRemap returns the fewest moves that put every logic queue of m on
// brokers with the queues balanced among them: no broker leads more than
// one queue more than another. It is the planning half of RocketMQ's
// remappingStaticTopic; Remap applies the moves.
//
// Queues led by a broker outside brokers always move. Of the balanced
// shares (⌈n/k⌉ or ⌊n/k⌋ queues each), the larger ones go to the brokers that
// already lead the most queues (ties to the smaller name), so that as many
// queues as possible stay where they are; a broker above its share keeps
// its lowest queue ids. Moving queues go, lowest id first, to the brokers
// below their share, in name order. The plan is a function of m and brokers
// alone, so a dry run shows exactly what the change will do.
//
// Each move's OldLeaderMaxOffset is the leader's EndOffset when the leader
// is already sealed, else -1: the caller must supply the old leader's max
// offset before applying it. No moves (nil) means m is already balanced on
// brokers. An empty, reserved or repeated broker name is ErrInvalid.
func PlanRemap(m Mapping, brokers []string) ([]QueueMove, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	sorted, err := checkBrokers(brokers)
	if err != nil {
		return nil, fmt.Errorf("topic %q scope %q: %w", m.Topic, m.Scope, err)
	}
	leads := make(map[string]int, len(sorted))
	for _, b := range sorted {
		leads[b] = 0
	}
	for q := int32(0); q < m.TotalQueues; q++ {
		if b := leaderOf(m, q).Broker; slices.Contains(sorted, b) {
			leads[b]++
		}
	}
	byLoad := slices.Clone(sorted)
	slices.SortStableFunc(byLoad, func(a, b string) int { return cmp.Compare(leads[b], leads[a]) })
	n, k := int(m.TotalQueues), len(sorted)
	share := make(map[string]int, k)
	for i, b := range byLoad {
		share[b] = n / k
		if i < n%k {
			share[b]++
		}
	}
	kept := make(map[string]int, k)
	var waiting []int32
	for q := int32(0); q < m.TotalQueues; q++ {
		b := leaderOf(m, q).Broker
		if s, ok := share[b]; ok && kept[b] < s {
			kept[b]++
			continue
		}
		waiting = append(waiting, q)
	}
	var moves []QueueMove
	for _, b := range sorted {
		for ; kept[b] < share[b]; kept[b]++ {
			q := waiting[0]
			waiting = waiting[1:]
			leader := leaderOf(m, q)
			maxOffset := int64(-1)
			if leader.IsSealed() {
				maxOffset = leader.EndOffset
			}
			moves = append(moves, QueueMove{QueueID: q, ToBroker: b, OldLeaderMaxOffset: maxOffset})
		}
	}
	slices.SortFunc(moves, func(a, b QueueMove) int { return cmp.Compare(a.QueueID, b.QueueID) })
	return moves, nil
}

// leaderOf returns the newest item of queue q of a validated mapping.
func leaderOf(m Mapping, q int32) MappingItem {
	items := m.Queues[q]
	return items[len(items)-1]
}
