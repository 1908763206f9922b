package statictopic

import (
	"fmt"
	"slices"
)

// CheckRecreate reports whether a create request of m's topic with m's
// queue count and brokers asks for what m already is, so that repeating a
// create (a retry, say) succeeds without writing while a create that asks
// for other brokers is refused rather than ignored. The request differs,
// with an error wrapping ErrTopicExists, when a logic queue's current leader
// is on a broker the request does not list, or when a listed broker leads
// no queue while another leads several (the least-loaded placement of
// Create would have given it one). Bad broker names are ErrInvalid.
func CheckRecreate(m Mapping, brokers []string) error {
	sorted, err := checkBrokers(brokers)
	if err != nil {
		return fmt.Errorf("topic %q: %w", m.Topic, err)
	}
	load := make(map[string]int, len(sorted))
	for _, b := range sorted {
		load[b] = 0
	}
	ids := make([]int32, 0, len(m.Queues))
	for id := range m.Queues {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		items := m.Queues[id]
		if len(items) == 0 {
			continue
		}
		leader := items[len(items)-1].Broker
		if _, ok := load[leader]; !ok {
			return fmt.Errorf("%w: topic %q scope %q has %d logic queues; queue %d is on broker %q, which the request %v does not list",
				ErrTopicExists, m.Topic, m.Scope, m.TotalQueues, id, leader, sorted)
		}
		load[leader]++
	}
	busiest := sorted[0]
	for _, b := range sorted {
		if load[b] > load[busiest] {
			busiest = b
		}
	}
	for _, b := range sorted {
		if load[b] == 0 && load[busiest] > 1 {
			return fmt.Errorf("%w: topic %q scope %q has %d logic queues; broker %q of the request leads none while %q leads %d",
				ErrTopicExists, m.Topic, m.Scope, m.TotalQueues, b, busiest, load[busiest])
		}
	}
	return nil
}
