package statictopic

import (
	"cmp"
	"fmt"
	"slices"
)

// DroppedItem is an item Trim removed from logic queue QueueID.
type DroppedItem struct {
	QueueID int32 `json:"queueId"`
	MappingItem
}

// GroupOffset is a consumer group's committed logic offset on one logic
// queue: the offset of the next message the group will read.
type GroupOffset struct {
	Group   string `json:"group"`
	QueueID int32  `json:"queueId"`
	Offset  int64  `json:"offset"`
}

// ReadingItem returns the index, in m.Queues[queueID], of the item a
// consumer whose committed logic offset is logicOffset reads next: the item
// whose logic range holds it; or, for an offset in a gap or before the first
// item, the next item (where the gap rule sends the consumer); or the newest
// item for an offset past every decided range. An unknown queue is
// ErrNotFound.
func (m Mapping) ReadingItem(queueID int32, logicOffset int64) (int, error) {
	items, ok := m.Queues[queueID]
	if !ok {
		return 0, fmt.Errorf("%w: topic %q scope %q: logic queue %d", ErrNotFound, m.Topic, m.Scope, queueID)
	}
	item, _, err := m.ToPhysical(queueID, logicOffset)
	if err == nil {
		return slices.IndexFunc(items, func(it MappingItem) bool { return it.Gen == item.Gen }), nil
	}
	if next, ok := NextLogicOffset(err); ok {
		return slices.IndexFunc(items, func(it MappingItem) bool { return it.LogicOffset == next }), nil
	}
	return len(items) - 1, nil
}

// Trim returns a copy of m without the sealed items whose logic range ends
// at or below below, at epoch, and the items it dropped; m itself is not
// changed. queues limits the trim to those logic queues; nil means every
// queue. Only a queue's oldest items go, and only sealed, decided ones: the
// first item that is open or ends above below stops the queue's trim, and a
// queue's newest item is never dropped. The physical queue of each dropped
// item is recorded in Reserved so that it is never handed out again.
//
// Trim does not know the consumers: callers check the dropped items with
// CheckReaders first. Nothing to drop returns m unchanged and no items. An
// unknown queue is ErrNotFound; an epoch not above m.Epoch is ErrStaleEpoch
// or ErrEpochConflict.
func Trim(m Mapping, queues []int32, below, epoch int64) (Mapping, []DroppedItem, error) {
	if err := m.Validate(); err != nil {
		return Mapping{}, nil, err
	}
	if queues == nil {
		for q := int32(0); q < m.TotalQueues; q++ {
			queues = append(queues, q)
		}
	}
	out := m.Clone()
	var dropped []DroppedItem
	for _, q := range queues {
		items, ok := out.Queues[q]
		if !ok {
			return Mapping{}, nil, fmt.Errorf("%w: topic %q scope %q: logic queue %d", ErrNotFound, m.Topic, m.Scope, q)
		}
		n := 0
		for n < len(items)-1 {
			end, ok := items[n].LogicEnd()
			if !ok || end > below {
				break
			}
			n++
		}
		for _, it := range items[:n] {
			dropped = append(dropped, DroppedItem{QueueID: q, MappingItem: it})
			out.reserve(it.Broker, it.QueueID+1)
		}
		out.Queues[q] = slices.Clone(items[n:])
	}
	if len(dropped) == 0 {
		return m.Clone(), nil, nil
	}
	if err := requireNewerEpoch(m, epoch); err != nil {
		return Mapping{}, nil, err
	}
	out.Epoch = epoch
	if err := out.Validate(); err != nil {
		return Mapping{}, nil, err
	}
	return out, dropped, nil
}

// CheckReaders reports, as ErrHistory, the first group of committed that
// still reads an item of dropped: its ReadingItem in m (the mapping before
// the trim) is one of the dropped items. Groups on other queues, or past
// the dropped items, do not count.
func CheckReaders(m Mapping, dropped []DroppedItem, committed []GroupOffset) error {
	gone := make(map[int32]map[int32]bool)
	for _, d := range dropped {
		if gone[d.QueueID] == nil {
			gone[d.QueueID] = make(map[int32]bool)
		}
		gone[d.QueueID][d.Gen] = true
	}
	for _, g := range committed {
		if gone[g.QueueID] == nil {
			continue
		}
		i, err := m.ReadingItem(g.QueueID, g.Offset)
		if err != nil {
			return err
		}
		if it := m.Queues[g.QueueID][i]; gone[g.QueueID][it.Gen] {
			return fmt.Errorf("%w: topic %q scope %q queue %d: group %q (committed logic offset %d) still reads item gen %d (%s-%d)",
				ErrHistory, m.Topic, m.Scope, g.QueueID, g.Group, g.Offset, it.Gen, it.Broker, it.QueueID)
		}
	}
	return nil
}

// QueueReaders is one logic queue with its items, oldest first, and the
// consumer groups that read each.
type QueueReaders struct {
	QueueID int32         `json:"queueId"`
	Items   []ItemReaders `json:"items"`
}

// ItemReaders is one mapping item and the groups that read it next (see
// ReadingItem).
type ItemReaders struct {
	MappingItem
	Groups []GroupReader `json:"groups"`
}

// GroupReader is a consumer group and its committed logic offset.
type GroupReader struct {
	Group  string `json:"group"`
	Offset int64  `json:"offset"`
}

// Readers returns every logic queue of m with its items and, for each item,
// the groups of committed that read it next, sorted by group: the view an
// operator checks before a trim. Offsets on queue ids m does not have are
// left out.
func (m Mapping) Readers(committed []GroupOffset) []QueueReaders {
	out := make([]QueueReaders, m.TotalQueues)
	for q := range out {
		items := m.Queues[int32(q)]
		out[q] = QueueReaders{QueueID: int32(q), Items: make([]ItemReaders, len(items))}
		for i, it := range items {
			out[q].Items[i] = ItemReaders{MappingItem: it, Groups: []GroupReader{}}
		}
	}
	committed = slices.Clone(committed)
	slices.SortFunc(committed, func(a, b GroupOffset) int { return cmp.Compare(a.Group, b.Group) })
	for _, g := range committed {
		i, err := m.ReadingItem(g.QueueID, g.Offset)
		if err != nil || g.QueueID >= m.TotalQueues {
			continue // not a queue of this topic
		}
		item := &out[g.QueueID].Items[i]
		item.Groups = append(item.Groups, GroupReader{Group: g.Group, Offset: g.Offset})
	}
	return out
}
