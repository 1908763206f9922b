package statictopic

import (
	"fmt"
	"strings"
)

// Validate checks every rule of a mapping and returns the first one broken,
// wrapping ErrInvalid with the topic, queue and item concerned.
//
// Mapping rules: Version is MappingVersion; Topic is non-empty and at most
// MaxTopicLen bytes; Scope parses and is spelled canonically; Bname is the
// scope's broker name; Epoch ≥ 0; 1 ≤ TotalQueues ≤ MaxTotalQueues; Queues
// holds exactly the ids 0..TotalQueues-1, each with at least one item; a
// physical Broker+QueueID appears in one item of the whole mapping only.
//
// Item rules, oldest to newest: Gen ≥ 0 and strictly increasing; QueueID ≥ 0;
// Broker non-empty and not a logic broker name; StartOffset ≥ 0; EndOffset is
// -1 (open) or ≥ StartOffset; LogicOffset is ≥ 0, or -1 (undecided) on the
// newest item if it is still open; decided LogicOffsets strictly increase; a
// sealed item's logic range ends strictly before the next item's LogicOffset
// and fits in an int64. An older item may be open: that is an old leader
// whose end is not known yet, as RocketMQ keeps it after a remap until it is
// sealed; its logic range ends where the next decided item's begins.
// Reserved names valid brokers, each once and in order, with no negative id.
func (m Mapping) Validate() error {
	if m.Version != MappingVersion {
		return fmt.Errorf("%w: topic %q: version %q, want %q", ErrInvalid, m.Topic, m.Version, MappingVersion)
	}
	if err := checkTopic(m.Topic); err != nil {
		return err
	}
	scope, err := ParseScope(m.Scope)
	if err != nil {
		return fmt.Errorf("topic %q: %w", m.Topic, err)
	}
	if scope.String() != m.Scope {
		return fmt.Errorf("%w: topic %q: scope %q not canonical, want %q", ErrInvalid, m.Topic, m.Scope, scope)
	}
	if m.Bname != scope.BrokerName() {
		return fmt.Errorf("%w: topic %q: bname %q does not match scope %q (want %q)", ErrInvalid, m.Topic, m.Bname, m.Scope, scope.BrokerName())
	}
	if m.Epoch < 0 {
		return fmt.Errorf("%w: topic %q: negative epoch %d", ErrInvalid, m.Topic, m.Epoch)
	}
	if m.TotalQueues < 1 || m.TotalQueues > MaxTotalQueues {
		return fmt.Errorf("%w: topic %q: totalQueues %d outside [1, %d]", ErrInvalid, m.Topic, m.TotalQueues, MaxTotalQueues)
	}
	if len(m.Queues) != int(m.TotalQueues) {
		for q := range m.Queues {
			if q < 0 || q >= m.TotalQueues {
				return fmt.Errorf("%w: topic %q: logic queue %d outside 0..%d", ErrInvalid, m.Topic, q, m.TotalQueues-1)
			}
		}
	}
	for i, r := range m.Reserved {
		if err := checkBrokerName(r.Broker); err != nil {
			return fmt.Errorf("topic %q: reserved: %w", m.Topic, err)
		}
		if r.Below < 0 {
			return fmt.Errorf("%w: topic %q: reserved: negative id %d for broker %q", ErrInvalid, m.Topic, r.Below, r.Broker)
		}
		if i == 0 {
			continue
		}
		switch prev := m.Reserved[i-1].Broker; {
		case prev == r.Broker:
			return fmt.Errorf("%w: topic %q: reserved: broker %q listed twice", ErrInvalid, m.Topic, r.Broker)
		case prev > r.Broker:
			return fmt.Errorf("%w: topic %q: reserved: broker %q listed after %q", ErrInvalid, m.Topic, r.Broker, prev)
		}
	}
	type physical struct {
		broker string
		id     int32
	}
	owner := make(map[physical]int32)
	for q := int32(0); q < m.TotalQueues; q++ {
		items, ok := m.Queues[q]
		if !ok {
			return fmt.Errorf("%w: topic %q: logic queue %d missing", ErrInvalid, m.Topic, q)
		}
		if err := checkItems(items); err != nil {
			return fmt.Errorf("topic %q queue %d: %w", m.Topic, q, err)
		}
		for i, it := range items {
			p := physical{it.Broker, it.QueueID}
			if prev, dup := owner[p]; dup {
				return fmt.Errorf("%w: topic %q queue %d item %d: physical queue %s-%d already used by logic queue %d",
					ErrInvalid, m.Topic, q, i, it.Broker, it.QueueID, prev)
			}
			owner[p] = q
		}
	}
	return nil
}

func checkTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic", ErrInvalid)
	}
	if len(topic) > MaxTopicLen {
		return fmt.Errorf("%w: topic of %d bytes, limit %d", ErrInvalid, len(topic), MaxTopicLen)
	}
	return nil
}

func checkBrokerName(b string) error {
	if b == "" {
		return fmt.Errorf("%w: empty broker name", ErrInvalid)
	}
	if strings.HasPrefix(b, LogicBrokerPrefix) {
		return fmt.Errorf("%w: broker name %q uses the reserved prefix %q", ErrInvalid, b, LogicBrokerPrefix)
	}
	return nil
}

// checkItems checks one logic queue's item list, oldest first.
func checkItems(items []MappingItem) error {
	if len(items) == 0 {
		return fmt.Errorf("%w: no items", ErrInvalid)
	}
	newest := len(items) - 1
	for i, it := range items {
		errf := func(format string, args ...any) error {
			return fmt.Errorf("%w: item %d (gen %d): "+format, append([]any{ErrInvalid, i, it.Gen}, args...)...)
		}
		if it.Gen < 0 {
			return errf("negative gen")
		}
		if it.QueueID < 0 {
			return errf("negative physical queueId %d", it.QueueID)
		}
		if err := checkBrokerName(it.Broker); err != nil {
			return fmt.Errorf("item %d (gen %d): %w", i, it.Gen, err)
		}
		if it.StartOffset < 0 {
			return errf("negative startOffset %d", it.StartOffset)
		}
		if it.EndOffset != -1 && it.EndOffset < it.StartOffset {
			return errf("endOffset %d below startOffset %d (and not -1)", it.EndOffset, it.StartOffset)
		}
		if it.LogicOffset < -1 {
			return errf("logicOffset %d below -1", it.LogicOffset)
		}
		if !it.IsDecided() && i != newest {
			return errf("undecided logicOffset (-1) but not the newest item")
		}
		if !it.IsDecided() && it.IsSealed() {
			return errf("sealed at endOffset %d with undecided logicOffset (-1)", it.EndOffset)
		}
		if it.IsSealed() && it.IsDecided() {
			if _, ok := it.LogicEnd(); !ok {
				return errf("logic range [%d, +%d) overflows int64", it.LogicOffset, it.EndOffset-it.StartOffset)
			}
		}
		if i == 0 {
			continue
		}
		prev := items[i-1]
		if it.Gen <= prev.Gen {
			return errf("gen does not increase (previous item gen %d)", prev.Gen)
		}
		if !it.IsDecided() {
			continue
		}
		if it.LogicOffset <= prev.LogicOffset {
			return errf("logicOffset %d does not increase (previous item %d)", it.LogicOffset, prev.LogicOffset)
		}
		// Strict, like RocketMQ's checkLogicQueueMappingItemOffset: the
		// previous item's exclusive logic end must be below this item's
		// logicOffset, so two items' logic ranges never even touch.
		if end, _ := prev.LogicEnd(); end >= it.LogicOffset {
			return errf("logicOffset %d not above the previous item's logic end %d", it.LogicOffset, end)
		}
	}
	return nil
}
