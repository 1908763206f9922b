package statictopic

import (
	"fmt"
	"math"
	"slices"
)

// Create returns a new mapping of topic in scope with totalQueues logic
// queues, or, when existing is not nil, existing grown to totalQueues.
//
// Each new logic queue gets one open item on a fresh physical queue: gen 0,
// logicOffset 0, startOffset 0, endOffset -1, timeOfStart nowMillis,
// timeOfEnd -1. New queues go, in id order, to the least-loaded of brokers,
// where a broker's load is the number of logic queues it leads (sealed items
// take no writes, so they do not count); ties go to the smallest broker name.
// A fresh physical queue id is one above the highest id the broker already
// uses anywhere in the mapping, 0 for an unused broker, so no Broker+QueueID
// is ever used twice.
//
// Growing keeps every existing queue untouched and requires epoch above
// existing.Epoch (ErrStaleEpoch below, ErrEpochConflict equal). A smaller
// totalQueues is ErrInvalid. An equal totalQueues returns a copy of existing
// unchanged, its epoch included: there is nothing to store, and the caller
// decides whether that is an error.
func Create(topic string, scope Scope, totalQueues int32, brokers []string, epoch, nowMillis int64, existing *Mapping) (Mapping, error) {
	if err := checkTopic(topic); err != nil {
		return Mapping{}, err
	}
	if scope.IsZero() {
		return Mapping{}, fmt.Errorf("%w: topic %q: zero scope", ErrInvalid, topic)
	}
	if totalQueues < 1 || totalQueues > MaxTotalQueues {
		return Mapping{}, fmt.Errorf("%w: topic %q: totalQueues %d outside [1, %d]", ErrInvalid, topic, totalQueues, MaxTotalQueues)
	}
	sorted, err := checkBrokers(brokers)
	if err != nil {
		return Mapping{}, fmt.Errorf("topic %q: %w", topic, err)
	}
	var m Mapping
	if existing == nil {
		m = Mapping{
			Version: MappingVersion,
			Topic:   topic,
			Scope:   scope.String(),
			Bname:   scope.BrokerName(),
			Queues:  make(map[int32][]MappingItem, totalQueues),
		}
	} else {
		if err := existing.Validate(); err != nil {
			return Mapping{}, fmt.Errorf("existing mapping: %w", err)
		}
		if existing.Topic != topic || existing.Scope != scope.String() {
			return Mapping{}, fmt.Errorf("%w: growing topic %q scope %q from a mapping of topic %q scope %q",
				ErrInvalid, topic, scope, existing.Topic, existing.Scope)
		}
		switch {
		case totalQueues < existing.TotalQueues:
			return Mapping{}, fmt.Errorf("%w: topic %q scope %q: cannot shrink from %d to %d queues",
				ErrInvalid, topic, scope, existing.TotalQueues, totalQueues)
		case totalQueues == existing.TotalQueues:
			return existing.Clone(), nil
		}
		if err := requireNewerEpoch(*existing, epoch); err != nil {
			return Mapping{}, err
		}
		m = existing.Clone()
	}
	first := m.TotalQueues
	m.TotalQueues = totalQueues
	m.Epoch = epoch

	load := make(map[string]int, len(sorted))
	for _, b := range sorted {
		load[b] = 0
	}
	for _, items := range m.Queues {
		leader := items[len(items)-1].Broker
		if _, ok := load[leader]; ok {
			load[leader]++
		}
	}
	ids := nextPhysicalIDs(m)
	for q := first; q < totalQueues; q++ {
		b := sorted[0]
		for _, c := range sorted[1:] {
			if load[c] < load[b] {
				b = c
			}
		}
		id, err := takePhysicalID(ids, b)
		if err != nil {
			return Mapping{}, fmt.Errorf("topic %q queue %d: %w", topic, q, err)
		}
		m.Queues[q] = []MappingItem{{
			Gen:         0,
			QueueID:     id,
			Broker:      b,
			LogicOffset: 0,
			StartOffset: 0,
			EndOffset:   -1,
			TimeOfStart: nowMillis,
			TimeOfEnd:   -1,
		}}
		load[b]++
	}
	if err := m.Validate(); err != nil {
		return Mapping{}, err
	}
	return m, nil
}

// checkBrokers returns brokers sorted, or an error for an empty list, an
// empty, reserved or repeated name.
func checkBrokers(brokers []string) ([]string, error) {
	if len(brokers) == 0 {
		return nil, fmt.Errorf("%w: no brokers", ErrInvalid)
	}
	sorted := slices.Clone(brokers)
	slices.Sort(sorted)
	for i, b := range sorted {
		if err := checkBrokerName(b); err != nil {
			return nil, err
		}
		if i > 0 && sorted[i-1] == b {
			return nil, fmt.Errorf("%w: broker %q listed twice", ErrInvalid, b)
		}
	}
	return sorted, nil
}

// nextPhysicalIDs returns, per broker used in m, one above the highest
// physical queue id it uses, and never below the broker's reserved ids.
func nextPhysicalIDs(m Mapping) map[string]int64 {
	next := make(map[string]int64)
	for _, r := range m.Reserved {
		next[r.Broker] = int64(r.Below)
	}
	for _, items := range m.Queues {
		for _, it := range items {
			if n := int64(it.QueueID) + 1; n > next[it.Broker] {
				next[it.Broker] = n
			}
		}
	}
	return next
}

// takePhysicalID hands out broker's next fresh physical queue id.
func takePhysicalID(next map[string]int64, broker string) (int32, error) {
	id := next[broker]
	if id > math.MaxInt32 {
		return 0, fmt.Errorf("%w: broker %q has no physical queue id left", ErrInvalid, broker)
	}
	next[broker] = id + 1
	return int32(id), nil
}
