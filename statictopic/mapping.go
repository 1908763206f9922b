package statictopic

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// MappingVersion is the format version written into every Mapping. Validate
// rejects any other value: a mapping of an unknown format cannot be read safely.
const MappingVersion = "1"

// MaxTopicLen is the longest topic name, in bytes, that Validate accepts.
const MaxTopicLen = 255

// MaxTotalQueues is the largest number of logic queues one static topic may have.
const MaxTotalQueues = 65536

// MappingItem is one physical queue's share of a logic queue.
//
// Its physical range is [StartOffset, EndOffset) on Broker/QueueID, and its
// logic range is [LogicOffset, LogicOffset+EndOffset-StartOffset). While
// EndOffset is -1 the item is open (it is the leader, taking writes) and its
// logic range is [LogicOffset, ∞). A LogicOffset of -1 means undecided: the
// item holds no logic offsets yet.
type MappingItem struct {
	Gen         int32  `json:"gen"`
	QueueID     int32  `json:"queueId"`
	Broker      string `json:"bname"`
	LogicOffset int64  `json:"logicOffset"`
	StartOffset int64  `json:"startOffset"`
	EndOffset   int64  `json:"endOffset"`
	TimeOfStart int64  `json:"timeOfStart"`
	TimeOfEnd   int64  `json:"timeOfEnd"`
}

// IsSealed reports whether the item's physical range has an end, that is
// whether it no longer takes writes.
func (it MappingItem) IsSealed() bool { return it.EndOffset != -1 }

// IsDecided reports whether the item's LogicOffset has been fixed.
func (it MappingItem) IsDecided() bool { return it.LogicOffset >= 0 }

// LogicEnd returns the exclusive end of a sealed, decided item's logic range.
// ok is false for an open or undecided item, whose logic range has no end, and
// for an item whose end does not fit in an int64.
func (it MappingItem) LogicEnd() (end int64, ok bool) {
	if !it.IsSealed() || !it.IsDecided() || it.EndOffset < it.StartOffset {
		return 0, false
	}
	span := it.EndOffset - it.StartOffset
	if it.LogicOffset > maxInt64-span {
		return 0, false
	}
	return it.LogicOffset + span, true
}

// Mapping is a static topic in one scope: its logic queues and, for each, the
// items that have served it, oldest first. The last item of a list is the
// queue's leader.
type Mapping struct {
	Version     string                  `json:"version"`
	Topic       string                  `json:"topic"`
	Scope       string                  `json:"scope"`
	TotalQueues int32                   `json:"totalQueues"`
	Epoch       int64                   `json:"epoch"`
	Bname       string                  `json:"bname"`
	Queues      map[int32][]MappingItem `json:"queues"`
	// Reserved lists, sorted by broker, the physical queue ids that items a
	// trim dropped used: a physical queue is never reused, so no new item
	// takes an id below a broker's Below. Brokers without trimmed items are
	// absent.
	Reserved []ReservedQueueIDs `json:"reserved,omitempty"`
}

// ReservedQueueIDs says that Broker's physical queue ids below Below are
// used up.
type ReservedQueueIDs struct {
	Broker string `json:"bname"`
	Below  int32  `json:"below"`
}

// reservedBelow returns the id below which broker's physical queues are
// used up by trimmed items, 0 if none are.
func (m Mapping) reservedBelow(broker string) int32 {
	for _, r := range m.Reserved {
		if r.Broker == broker {
			return r.Below
		}
	}
	return 0
}

// reserve raises broker's reservation to below, keeping Reserved sorted.
func (m *Mapping) reserve(broker string, below int32) {
	i, found := slices.BinarySearchFunc(m.Reserved, broker, func(r ReservedQueueIDs, b string) int { return cmp.Compare(r.Broker, b) })
	if found {
		m.Reserved[i].Below = max(m.Reserved[i].Below, below)
		return
	}
	m.Reserved = slices.Insert(m.Reserved, i, ReservedQueueIDs{Broker: broker, Below: below})
}

// QueueMove asks Remap to move logic queue QueueID to broker ToBroker.
// OldLeaderMaxOffset is the old leader's physical max offset (the offset the
// next message would get), which becomes the sealed item's EndOffset.
type QueueMove struct {
	QueueID            int32  `json:"queueId"`
	ToBroker           string `json:"toBroker"`
	OldLeaderMaxOffset int64  `json:"oldLeaderMaxOffset"`
}

const maxInt64 = int64(^uint64(0) >> 1)

// Clone returns a deep copy of m: changing the copy's queues or items never
// changes m.
func (m Mapping) Clone() Mapping {
	out := m
	if m.Queues != nil {
		out.Queues = make(map[int32][]MappingItem, len(m.Queues))
		for q, items := range m.Queues {
			out.Queues[q] = slices.Clone(items)
		}
	}
	out.Reserved = slices.Clone(m.Reserved)
	return out
}

// Equal reports whether m and o have the same content. A nil and an empty
// Queues map are equal, and so are a nil and an empty item or Reserved
// list.
func (m Mapping) Equal(o Mapping) bool {
	if m.Version != o.Version || m.Topic != o.Topic || m.Scope != o.Scope ||
		m.TotalQueues != o.TotalQueues || m.Epoch != o.Epoch || m.Bname != o.Bname ||
		!slices.Equal(m.Reserved, o.Reserved) {
		return false
	}
	return maps.EqualFunc(m.Queues, o.Queues, func(a, b []MappingItem) bool {
		return slices.Equal(a, b)
	})
}

// Leader returns the newest item of logic queue queueID: the one that takes
// writes while it is open.
func (m Mapping) Leader(queueID int32) (MappingItem, error) {
	items, ok := m.Queues[queueID]
	if !ok {
		return MappingItem{}, fmt.Errorf("%w: topic %q scope %q: logic queue %d", ErrNotFound, m.Topic, m.Scope, queueID)
	}
	if len(items) == 0 {
		return MappingItem{}, fmt.Errorf("%w: topic %q scope %q queue %d: no items", ErrInvalid, m.Topic, m.Scope, queueID)
	}
	return items[len(items)-1], nil
}
