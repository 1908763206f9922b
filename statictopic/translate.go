package statictopic

import "fmt"

// ToPhysical translates a logic offset of logic queue queueID into the item
// whose logic range holds it and the physical offset on that item's
// Broker/QueueID: logicOffset − item.LogicOffset + item.StartOffset.
//
// Ranges are half-open: a sealed item holds [LogicOffset, LogicOffset +
// EndOffset − StartOffset), so its logic end itself is out of range; an open
// item holds every offset from its LogicOffset on. An offset before the first
// decided item, in the gap between two items, past a sealed last item, or
// negative is ErrOutOfRange; an unknown queue is ErrNotFound. When a later
// item holds offsets (every case but past the last decided item) the error is
// a *GapError whose Next is that item's LogicOffset: the gap rule, so that a
// consumer can move on without reading the mapping.
//
// An open item that is not the newest (an old leader whose end is not known
// yet) holds every offset up to the next decided item's LogicOffset.
func (m Mapping) ToPhysical(queueID int32, logicOffset int64) (item MappingItem, physicalOffset int64, err error) {
	items, ok := m.Queues[queueID]
	if !ok {
		return MappingItem{}, 0, fmt.Errorf("%w: topic %q scope %q: logic queue %d", ErrNotFound, m.Topic, m.Scope, queueID)
	}
	item, physicalOffset, err = toPhysical(m, queueID, items, logicOffset)
	if err != nil {
		if next, ok := nextItemStart(items, logicOffset); ok {
			return MappingItem{}, 0, &GapError{Next: next, err: err}
		}
	}
	return item, physicalOffset, err
}

// nextItemStart returns the LogicOffset of the first decided item that
// starts above logicOffset.
func nextItemStart(items []MappingItem, logicOffset int64) (int64, bool) {
	for _, it := range items {
		if it.IsDecided() && it.LogicOffset > logicOffset {
			return it.LogicOffset, true
		}
	}
	return 0, false
}

func toPhysical(m Mapping, queueID int32, items []MappingItem, logicOffset int64) (item MappingItem, physicalOffset int64, err error) {
	if logicOffset < 0 {
		return MappingItem{}, 0, fmt.Errorf("%w: topic %q scope %q queue %d: negative logic offset %d", ErrOutOfRange, m.Topic, m.Scope, queueID, logicOffset)
	}
	// Logic ranges increase with the list, so only the newest decided item
	// starting at or before logicOffset can hold it.
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if !it.IsDecided() || it.LogicOffset > logicOffset {
			continue
		}
		delta := logicOffset - it.LogicOffset
		if it.IsSealed() && delta >= it.EndOffset-it.StartOffset {
			return MappingItem{}, 0, fmt.Errorf("%w: topic %q scope %q queue %d: logic offset %d past item gen %d (logic range ends at %d)",
				ErrOutOfRange, m.Topic, m.Scope, queueID, logicOffset, it.Gen, it.LogicOffset+it.EndOffset-it.StartOffset)
		}
		if it.StartOffset > maxInt64-delta {
			return MappingItem{}, 0, fmt.Errorf("%w: topic %q scope %q queue %d: logic offset %d overflows item gen %d",
				ErrOutOfRange, m.Topic, m.Scope, queueID, logicOffset, it.Gen)
		}
		return it, it.StartOffset + delta, nil
	}
	return MappingItem{}, 0, fmt.Errorf("%w: topic %q scope %q queue %d: logic offset %d before the first item",
		ErrOutOfRange, m.Topic, m.Scope, queueID, logicOffset)
}

// ToLogic translates a physical offset of broker's physicalQueueID into the
// logic queue and logic offset it stands for: item.LogicOffset +
// max(0, physicalOffset − item.StartOffset), with the item of that
// Broker+QueueID.
//
// A sealed item's range is half-open, so its EndOffset itself is out of range,
// as is anything beyond it, a negative offset, and any offset of an item whose
// LogicOffset is undecided, and, on an open old leader, an offset that would
// reach the next item's logic range: ErrOutOfRange. A physical queue the
// mapping does not use is ErrNotFound.
func (m Mapping) ToLogic(broker string, physicalQueueID int32, physicalOffset int64) (queueID int32, logicOffset int64, err error) {
	for q, items := range m.Queues {
		for i, it := range items {
			if it.Broker != broker || it.QueueID != physicalQueueID {
				continue
			}
			switch {
			case physicalOffset < 0:
				return 0, 0, fmt.Errorf("%w: topic %q scope %q: %s-%d: negative physical offset %d",
					ErrOutOfRange, m.Topic, m.Scope, broker, physicalQueueID, physicalOffset)
			case !it.IsDecided():
				return 0, 0, fmt.Errorf("%w: topic %q scope %q queue %d: %s-%d: logic offset undecided",
					ErrOutOfRange, m.Topic, m.Scope, q, broker, physicalQueueID)
			case it.IsSealed() && physicalOffset >= it.EndOffset:
				return 0, 0, fmt.Errorf("%w: topic %q scope %q queue %d: %s-%d: physical offset %d at or past sealed end %d",
					ErrOutOfRange, m.Topic, m.Scope, q, broker, physicalQueueID, physicalOffset, it.EndOffset)
			}
			delta := max(0, physicalOffset-it.StartOffset)
			if it.LogicOffset > maxInt64-delta {
				return 0, 0, fmt.Errorf("%w: topic %q scope %q queue %d: %s-%d: physical offset %d overflows",
					ErrOutOfRange, m.Topic, m.Scope, q, broker, physicalQueueID, physicalOffset)
			}
			logic := it.LogicOffset + delta
			if next, ok := nextItemStart(items[i+1:], logic-1); ok && !it.IsSealed() && logic >= next {
				// An open old leader ends where the next item begins.
				return 0, 0, fmt.Errorf("%w: topic %q scope %q queue %d: %s-%d: physical offset %d reaches the next item at logic offset %d",
					ErrOutOfRange, m.Topic, m.Scope, q, broker, physicalQueueID, physicalOffset, next)
			}
			return q, logic, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: topic %q scope %q: physical queue %s-%d", ErrNotFound, m.Topic, m.Scope, broker, physicalQueueID)
}
