package statictopic

import "fmt"

// CheckHistory reports whether incoming, a newer version of stored (same
// topic and scope), keeps the history stored has fixed, and returns the
// first breach as an ErrHistory naming the queue and item; nil if there is
// none.
//
// A sealed item is history: consumers have committed logic offsets in its
// range, and translation must keep sending them to the same messages. So
// every item sealed in stored must appear in incoming, by its Gen, with the
// same Broker, QueueID, LogicOffset, StartOffset and EndOffset (its times
// may change). An item still open in stored may be sealed, and new items may
// be appended. Besides, a reserved physical queue id stays reserved: no
// broker's entry of Reserved may shrink, and no item that stored does
// not hold may use a reserved id. Dropping sealed items is Trim's work, which
// checks the consumers first.
func CheckHistory(stored, incoming Mapping) error {
	for q := int32(0); q < stored.TotalQueues; q++ {
		newItems := incoming.Queues[q]
		byGen := make(map[int32]MappingItem, len(newItems))
		for _, it := range newItems {
			byGen[it.Gen] = it
		}
		for _, old := range stored.Queues[q] {
			if !old.IsSealed() {
				continue
			}
			it, ok := byGen[old.Gen]
			if !ok {
				return fmt.Errorf("%w: topic %q scope %q queue %d: sealed item gen %d (%s-%d, logic offset %d) dropped",
					ErrHistory, stored.Topic, stored.Scope, q, old.Gen, old.Broker, old.QueueID, old.LogicOffset)
			}
			if it.Broker != old.Broker || it.QueueID != old.QueueID || it.LogicOffset != old.LogicOffset ||
				it.StartOffset != old.StartOffset || it.EndOffset != old.EndOffset {
				return fmt.Errorf("%w: topic %q scope %q queue %d: sealed item gen %d rewritten: %s-%d logic %d physical [%d, %d) became %s-%d logic %d physical [%d, %d)",
					ErrHistory, stored.Topic, stored.Scope, q, old.Gen,
					old.Broker, old.QueueID, old.LogicOffset, old.StartOffset, old.EndOffset,
					it.Broker, it.QueueID, it.LogicOffset, it.StartOffset, it.EndOffset)
			}
		}
	}
	for _, r := range stored.Reserved {
		if below := incoming.reservedBelow(r.Broker); below < r.Below {
			return fmt.Errorf("%w: topic %q scope %q: reserved physical queue ids of broker %q lowered from %d to %d",
				ErrHistory, stored.Topic, stored.Scope, r.Broker, r.Below, below)
		}
	}
	known := make(map[physicalQueue]bool)
	for _, items := range stored.Queues {
		for _, it := range items {
			known[physicalQueue{it.Broker, it.QueueID}] = true
		}
	}
	for q, items := range incoming.Queues {
		for _, it := range items {
			if !known[physicalQueue{it.Broker, it.QueueID}] && it.QueueID < stored.reservedBelow(it.Broker) {
				return fmt.Errorf("%w: topic %q scope %q queue %d: item gen %d reuses %s-%d, a physical queue of trimmed items",
					ErrHistory, stored.Topic, stored.Scope, q, it.Gen, it.Broker, it.QueueID)
			}
		}
	}
	return nil
}

// physicalQueue is one queue of one broker.
type physicalQueue struct {
	broker string
	id     int32
}
