package kafka

import (
	"slices"
	"strings"
)

// The server-side assignors of consumer groups (KIP-848), named as Kafka
// names them (group.consumer.assignors). Both are pure functions of the
// members' subscriptions, the topics' partition counts and, for uniform,
// the previous target assignment.
const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// assignors lists the assignors in the order of preference when members do
// not agree: the first is the default, as in Kafka.
var assignors = []string{assignorUniform, assignorRange}

// partitionsOf is a member's partitions by topic name, each slice sorted.
type partitionsOf map[string][]int32

// assignee is what an assignor knows of a member.
type assignee struct {
	id         string
	subscribed []string // sorted topic names
	previous   partitionsOf
}

// assign runs the assignor named name over members and the partition
// counts of the topics they subscribe to.
func assign(name string, members []assignee, partitions map[string]int32) map[string]partitionsOf {
	slices.SortFunc(members, func(a, b assignee) int { return strings.Compare(a.id, b.id) })
	if name == assignorRange {
		return assignRange(members, partitions)
	}
	return assignUniform(members, partitions)
}

// assignRange gives each topic's members contiguous ranges of its
// partitions, the first members (by member id) one more when the
// partitions do not divide evenly, as Kafka's range assignor does: members
// that subscribe to the same topics get the same partition numbers of each
// (co-partitioning).
func assignRange(members []assignee, partitions map[string]int32) map[string]partitionsOf {
	out := make(map[string]partitionsOf, len(members))
	for _, m := range members {
		out[m.id] = partitionsOf{}
	}
	for _, topic := range sortedTopics(partitions) {
		var subs []string
		for _, m := range members {
			if slices.Contains(m.subscribed, topic) {
				subs = append(subs, m.id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := partitions[topic]
		each, extra := n/int32(len(subs)), n%int32(len(subs))
		next := int32(0)
		for i, id := range subs {
			count := each
			if int32(i) < extra {
				count++
			}
			for p := next; p < next+count; p++ {
				out[id][topic] = append(out[id][topic], p)
			}
			next += count
		}
	}
	return out
}

// assignUniform spreads the partitions over the members that subscribe to
// them as evenly as the subscriptions allow, keeping each partition with
// its previous member where that keeps the balance (sticky), as Kafka's
// uniform assignor does. A partition goes, in turn, to its previous member
// while that member holds fewer than its fair share, and otherwise to the
// subscribed member holding the fewest.
func assignUniform(members []assignee, partitions map[string]int32) map[string]partitionsOf {
	out := make(map[string]partitionsOf, len(members))
	count := make(map[string]int, len(members))
	subscribed := map[string][]string{} // topic → member ids, sorted
	for _, m := range members {
		out[m.id] = partitionsOf{}
		for _, t := range m.subscribed {
			if _, ok := partitions[t]; ok {
				subscribed[t] = append(subscribed[t], m.id)
			}
		}
	}
	total := 0
	for t, ids := range subscribed {
		if len(ids) > 0 {
			total += int(partitions[t])
		}
	}
	if len(members) == 0 {
		return out
	}
	// A fair share is floor members get, and total%members of them one
	// more.
	floor, extra := total/len(members), total%len(members)
	previous := map[string]map[int32]string{}
	for _, m := range members {
		for t, ps := range m.previous {
			for _, p := range ps {
				if previous[t] == nil {
					previous[t] = map[int32]string{}
				}
				previous[t][p] = m.id
			}
		}
	}
	type tp struct {
		topic string
		p     int32
	}
	var rest []tp
	// Sticky pass: partitions stay where they were, up to a fair share.
	for _, t := range sortedTopics(partitions) {
		ids := subscribed[t]
		for p := range partitions[t] {
			owner, ok := previous[t][p]
			if ok && slices.Contains(ids, owner) && (count[owner] < floor || count[owner] == floor && extra > 0) {
				if count[owner] == floor {
					extra--
				}
				out[owner][t] = append(out[owner][t], p)
				count[owner]++
				continue
			}
			if len(ids) > 0 {
				rest = append(rest, tp{t, p})
			}
		}
	}
	// Balance pass: the rest go to the subscribed member with the fewest.
	for _, x := range rest {
		best := ""
		for _, id := range subscribed[x.topic] {
			if best == "" || count[id] < count[best] {
				best = id
			}
		}
		out[best][x.topic] = append(out[best][x.topic], x.p)
		count[best]++
	}
	for _, a := range out {
		for t := range a {
			slices.Sort(a[t])
		}
	}
	return out
}

func sortedTopics(partitions map[string]int32) []string {
	topics := make([]string, 0, len(partitions))
	for t := range partitions {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	return topics
}
