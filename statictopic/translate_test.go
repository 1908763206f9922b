package statictopic

import (
	"errors"
	"testing"
)

// edgeMapping has, on queue 0, a sealed b1 item holding logic [0, 12345) and
// the open b3 leader from logic 20,000; on queue 1, items that do not start at
// logic 0 or physical 0 and a sealed last item; on queue 2 an undecided
// leader.
func edgeMapping(t *testing.T) Mapping {
	t.Helper()
	_, m := issueScenario(t)
	m.TotalQueues = 3
	m.Queues = map[int32][]MappingItem{
		0: m.Queues[0],
		1: {
			{Gen: 3, QueueID: 5, Broker: "b2", LogicOffset: 10000, StartOffset: 100, EndOffset: 200},
			{Gen: 4, QueueID: 6, Broker: "b2", LogicOffset: 20000, StartOffset: 50, EndOffset: 60},
		},
		2: {
			{Gen: 0, QueueID: 1, Broker: "b1", LogicOffset: 0, StartOffset: 0, EndOffset: 10},
			{Gen: 1, QueueID: 1, Broker: "b3", LogicOffset: -1, StartOffset: 0, EndOffset: -1},
		},
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestToPhysical(t *testing.T) {
	m := edgeMapping(t)
	tests := []struct {
		name     string
		queue    int32
		logic    int64
		broker   string
		physQ    int32
		physical int64
		want     error
	}{
		{"first offset", 0, 0, "b1", 0, 0, nil},
		{"last offset of sealed item", 0, 12344, "b1", 0, 12344, nil},
		{"exactly the sealed logic end", 0, 12345, "", 0, 0, ErrOutOfRange},
		{"gap between items", 0, 15000, "", 0, 0, ErrOutOfRange},
		{"just before the next item", 0, 19999, "", 0, 0, ErrOutOfRange},
		{"first offset of the leader", 0, 20000, "b3", 0, 0, nil},
		{"open leader far ahead", 0, 1 << 50, "b3", 0, 1<<50 - 20000, nil},
		{"negative", 0, -1, "", 0, 0, ErrOutOfRange},
		{"before the first item", 1, 9999, "", 0, 0, ErrOutOfRange},
		{"first item with start offset", 1, 10000, "b2", 5, 100, nil},
		{"last of first item", 1, 10099, "b2", 5, 199, nil},
		{"end of first item", 1, 10100, "", 0, 0, ErrOutOfRange},
		{"sealed last item, first", 1, 20000, "b2", 6, 50, nil},
		{"sealed last item, last", 1, 20009, "b2", 6, 59, nil},
		{"beyond sealed last item", 1, 20010, "", 0, 0, ErrOutOfRange},
		{"far beyond sealed last item", 1, 1 << 60, "", 0, 0, ErrOutOfRange},
		{"undecided leader is no range", 2, 10000, "", 0, 0, ErrOutOfRange},
		{"sealed item before undecided leader", 2, 9, "b1", 1, 9, nil},
		{"unknown queue", 3, 0, "", 0, 0, ErrNotFound},
	}
	for _, tt := range tests {
		it, p, err := m.ToPhysical(tt.queue, tt.logic)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: ToPhysical(%d, %d) err = %v, want %v", tt.name, tt.queue, tt.logic, err, tt.want)
			continue
		}
		if err == nil && (it.Broker != tt.broker || it.QueueID != tt.physQ || p != tt.physical) {
			t.Errorf("%s: ToPhysical(%d, %d) = %s-%d@%d, want %s-%d@%d", tt.name, tt.queue, tt.logic, it.Broker, it.QueueID, p, tt.broker, tt.physQ, tt.physical)
		}
	}
}

func TestToLogic(t *testing.T) {
	m := edgeMapping(t)
	tests := []struct {
		name     string
		broker   string
		physQ    int32
		physical int64
		queue    int32
		logic    int64
		want     error
	}{
		{"first offset", "b1", 0, 0, 0, 0, nil},
		{"last offset of sealed item", "b1", 0, 12344, 0, 12344, nil},
		{"exactly the sealed end", "b1", 0, 12345, 0, 0, ErrOutOfRange},
		{"past the sealed end", "b1", 0, 20000, 0, 0, ErrOutOfRange},
		{"negative", "b1", 0, -1, 0, 0, ErrOutOfRange},
		{"leader first offset", "b3", 0, 0, 0, 20000, nil},
		{"open leader far ahead", "b3", 0, 1 << 50, 0, 20000 + 1<<50, nil},
		{"below start offset clamps to the item's first logic offset", "b2", 5, 10, 1, 10000, nil},
		{"start offset", "b2", 5, 100, 1, 10000, nil},
		{"last of sealed last item", "b2", 6, 59, 1, 20009, nil},
		{"end of sealed last item", "b2", 6, 60, 0, 0, ErrOutOfRange},
		{"undecided leader", "b3", 1, 0, 0, 0, ErrOutOfRange},
		{"unknown physical queue", "b2", 0, 0, 0, 0, ErrNotFound},
		{"unknown broker", "b9", 0, 0, 0, 0, ErrNotFound},
	}
	for _, tt := range tests {
		q, l, err := m.ToLogic(tt.broker, tt.physQ, tt.physical)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: ToLogic(%s-%d, %d) err = %v, want %v", tt.name, tt.broker, tt.physQ, tt.physical, err, tt.want)
			continue
		}
		if err == nil && (q != tt.queue || l != tt.logic) {
			t.Errorf("%s: ToLogic(%s-%d, %d) = %d@%d, want %d@%d", tt.name, tt.broker, tt.physQ, tt.physical, q, l, tt.queue, tt.logic)
		}
	}
}

// TestToPhysicalGapRule checks that an offset no item holds answers the next
// valid logic offset whenever a later item exists.
func TestToPhysicalGapRule(t *testing.T) {
	m := edgeMapping(t)
	tests := []struct {
		name     string
		queue    int32
		logic    int64
		next     int64
		hasNext  bool
		outRange bool
	}{
		{"exactly the sealed logic end", 0, 12345, 20000, true, true},
		{"in the gap", 0, 15000, 20000, true, true},
		{"just before the next item", 0, 19999, 20000, true, true},
		{"negative", 0, -1, 0, true, true},
		{"before the first item", 1, 9999, 10000, true, true},
		{"end of first item", 1, 10100, 20000, true, true},
		{"beyond sealed last item", 1, 20010, 0, false, true},
		{"undecided leader is no next", 2, 10000, 0, false, true},
		{"held", 0, 20000, 0, false, false},
	}
	for _, tt := range tests {
		_, _, err := m.ToPhysical(tt.queue, tt.logic)
		next, ok := NextLogicOffset(err)
		if ok != tt.hasNext || next != tt.next || errors.Is(err, ErrOutOfRange) != tt.outRange {
			t.Errorf("%s: ToPhysical(%d, %d) = %v; next %d %v, want %d %v", tt.name, tt.queue, tt.logic, err, next, ok, tt.next, tt.hasNext)
		}
	}
}
