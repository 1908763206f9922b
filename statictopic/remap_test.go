package statictopic

import (
	"errors"
	"math"
	"testing"
)

func TestNextBlockStart(t *testing.T) {
	tests := []struct{ end, want int64 }{
		{0, 10000},
		{1, 10000},
		{4999, 10000},
		{5000, 20000}, // exactly half a block left: not enough, as in RocketMQ
		{9999, 20000},
		{10000, 20000},
		{12345, 20000},
		{14999, 20000},
		{15000, 30000},
		{17000, 30000},
		{20000, 30000},
	}
	for _, tt := range tests {
		got, err := nextBlockStart(tt.end)
		if err != nil || got != tt.want {
			t.Errorf("nextBlockStart(%d) = %d, %v; want %d", tt.end, got, err, tt.want)
		}
		if got%LogicBlockSize != 0 || got-tt.end <= LogicBlockSize/2 {
			t.Errorf("nextBlockStart(%d) = %d: not a block boundary more than half a block away", tt.end, got)
		}
	}
	for _, end := range []int64{-1, math.MaxInt64, math.MaxInt64 - 2*LogicBlockSize + 1} {
		if _, err := nextBlockStart(end); !errors.Is(err, ErrInvalid) {
			t.Errorf("nextBlockStart(%d) = %v, want ErrInvalid", end, err)
		}
	}
}

// issueScenario is the remap scenario of the static-topics issue: a topic on
// b1 and b2, then queue 0 moved to b3 after b1's queue held 12,345 messages.
func issueScenario(t testing.TB) (created, moved Mapping) {
	t.Helper()
	created, err := Create("T", Scope{name: "clusterA"}, 4, []string{"b1", "b2"}, 1000, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	moved, err = Remap(created, []QueueMove{{QueueID: 0, ToBroker: "b3", OldLeaderMaxOffset: 12345}}, NextEpoch(created.Epoch, 20), 20)
	if err != nil {
		t.Fatal(err)
	}
	return created, moved
}

func TestRemapScenario(t *testing.T) {
	created, moved := issueScenario(t)
	if moved.Epoch != 2000 {
		t.Errorf("epoch = %d, want 2000", moved.Epoch)
	}
	items := moved.Queues[0]
	if len(items) != 2 {
		t.Fatalf("queue 0 = %+v", items)
	}
	wantOld := MappingItem{Gen: 0, QueueID: 0, Broker: "b1", LogicOffset: 0, StartOffset: 0, EndOffset: 12345, TimeOfStart: 10, TimeOfEnd: 20}
	wantNew := MappingItem{Gen: 1, QueueID: 0, Broker: "b3", LogicOffset: 20000, StartOffset: 0, EndOffset: -1, TimeOfStart: 20, TimeOfEnd: -1}
	if items[0] != wantOld || items[1] != wantNew {
		t.Errorf("queue 0 = %+v, want [%+v %+v]", items, wantOld, wantNew)
	}
	for q := int32(1); q < 4; q++ {
		if len(moved.Queues[q]) != 1 || moved.Queues[q][0] != created.Queues[q][0] {
			t.Errorf("queue %d changed: %+v", q, moved.Queues[q])
		}
	}

	// Before the move, everything on queue 0 was on b1.
	if it, p, err := created.ToPhysical(0, 15000); err != nil || it.Broker != "b1" || p != 15000 {
		t.Errorf("before: ToPhysical(0, 15000) = %s, %d, %v", it.Broker, p, err)
	}
	// After it, b1 keeps its sealed range and b3 takes over from 20,000.
	if it, p, err := moved.ToPhysical(0, 100); err != nil || it.Broker != "b1" || it.QueueID != 0 || p != 100 {
		t.Errorf("ToPhysical(0, 100) = %+v, %d, %v", it, p, err)
	}
	if it, p, err := moved.ToPhysical(0, 20005); err != nil || it.Broker != "b3" || it.QueueID != 0 || p != 5 {
		t.Errorf("ToPhysical(0, 20005) = %+v, %d, %v", it, p, err)
	}
	for _, l := range []int64{12345, 15000, 19999} {
		if _, _, err := moved.ToPhysical(0, l); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("ToPhysical(0, %d) = %v, want ErrOutOfRange", l, err)
		}
	}
	if q, l, err := moved.ToLogic("b3", 0, 5); err != nil || q != 0 || l != 20005 {
		t.Errorf("ToLogic(b3, 0, 5) = %d, %d, %v", q, l, err)
	}
	if _, _, err := moved.ToLogic("b1", 0, 12345); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("ToLogic past the sealed end = %v, want ErrOutOfRange", err)
	}
}

func TestRemapDoesNotMutate(t *testing.T) {
	created, _ := issueScenario(t)
	before := created.Clone()
	if _, err := Remap(created, []QueueMove{{QueueID: 1, ToBroker: "b3", OldLeaderMaxOffset: 5}, {QueueID: 2, ToBroker: "b2", OldLeaderMaxOffset: 0}}, 5000, 30); err != nil {
		t.Fatal(err)
	}
	if !created.Equal(before) {
		t.Error("Remap changed its input")
	}
}

func TestRemapSeveralAndBack(t *testing.T) {
	_, m := issueScenario(t)
	// Move queue 0 back to b1 (a fresh physical queue, never b1-0 again) and
	// queue 1 to b3 in the same call.
	m2, err := Remap(m, []QueueMove{
		{QueueID: 0, ToBroker: "b1", OldLeaderMaxOffset: 17000},
		{QueueID: 1, ToBroker: "b3", OldLeaderMaxOffset: 0},
	}, 3000, 30)
	if err != nil {
		t.Fatal(err)
	}
	q0 := m2.Queues[0]
	// b1 used ids 0 (queue 0) and 1 (queue 2): the fresh one is 2.
	if len(q0) != 3 || q0[2].Broker != "b1" || q0[2].QueueID != 2 || q0[2].Gen != 2 {
		t.Errorf("queue 0 = %+v", q0)
	}
	// Logic end of gen 1 is 20,000 + 17,000 = 37,000 → 50,000.
	if q0[1].EndOffset != 17000 || q0[2].LogicOffset != 50000 {
		t.Errorf("queue 0 gen 1 end %d, gen 2 logic %d; want 17000, 50000", q0[1].EndOffset, q0[2].LogicOffset)
	}
	// b3 used id 0 (queue 0, gen 1): the fresh one is 1. An empty item's
	// logic end is its start, 0 → 10,000.
	q1 := m2.Queues[1]
	if len(q1) != 2 || q1[1].Broker != "b3" || q1[1].QueueID != 1 || q1[1].LogicOffset != 10000 || q1[0].EndOffset != 0 {
		t.Errorf("queue 1 = %+v", q1)
	}
}

func TestRemapDecidesUndecidedLeader(t *testing.T) {
	_, m := issueScenario(t)
	m.Queues[0][1].LogicOffset = -1 // imported before its logic offset was decided
	m.Queues[1][0].LogicOffset = -1
	m2, err := Remap(m, []QueueMove{
		{QueueID: 0, ToBroker: "b2", OldLeaderMaxOffset: 100},
		{QueueID: 1, ToBroker: "b1", OldLeaderMaxOffset: 100},
	}, 3000, 30)
	if err != nil {
		t.Fatal(err)
	}
	// Queue 0: the previous item ends at logic 12,345, so the undecided item
	// starts at 20,000, ends at 20,100, and the next starts at 30,000.
	if q := m2.Queues[0]; q[1].LogicOffset != 20000 || q[2].LogicOffset != 30000 {
		t.Errorf("queue 0 = %+v", q)
	}
	// Queue 1: a first item starts at 0.
	if q := m2.Queues[1]; q[0].LogicOffset != 0 || q[1].LogicOffset != 10000 {
		t.Errorf("queue 1 = %+v", q)
	}
}

func TestRemapSealedLeader(t *testing.T) {
	_, m := issueScenario(t)
	m.Queues[0][1].EndOffset = 7
	m.Queues[0][1].TimeOfEnd = 25
	m2, err := Remap(m, []QueueMove{{QueueID: 0, ToBroker: "b2", OldLeaderMaxOffset: 7}}, 3000, 30)
	if err != nil {
		t.Fatal(err)
	}
	if q := m2.Queues[0]; q[1].TimeOfEnd != 25 || q[2].LogicOffset != 30000 {
		t.Errorf("queue 0 = %+v", q)
	}
	if _, err := Remap(m, []QueueMove{{QueueID: 0, ToBroker: "b2", OldLeaderMaxOffset: 8}}, 3000, 30); !errors.Is(err, ErrInvalid) {
		t.Errorf("resealing at another offset = %v, want ErrInvalid", err)
	}
}

func TestRemapRejects(t *testing.T) {
	_, m := issueScenario(t)
	broken := m.Clone()
	broken.Queues[0][0].Gen = -1
	tests := []struct {
		name  string
		m     Mapping
		moves []QueueMove
		epoch int64
		want  error
	}{
		{"invalid mapping", broken, []QueueMove{{QueueID: 1, ToBroker: "b3"}}, 3000, ErrInvalid},
		{"no moves", m, nil, 3000, ErrInvalid},
		{"unknown queue", m, []QueueMove{{QueueID: 4, ToBroker: "b3"}}, 3000, ErrNotFound},
		{"queue twice", m, []QueueMove{{QueueID: 1, ToBroker: "b3"}, {QueueID: 1, ToBroker: "b1"}}, 3000, ErrInvalid},
		{"empty target", m, []QueueMove{{QueueID: 1, ToBroker: ""}}, 3000, ErrInvalid},
		{"logic broker target", m, []QueueMove{{QueueID: 1, ToBroker: "__logic__clusterA"}}, 3000, ErrInvalid},
		{"same broker", m, []QueueMove{{QueueID: 0, ToBroker: "b3"}}, 3000, ErrInvalid},
		{"max offset below start", m, []QueueMove{{QueueID: 1, ToBroker: "b3", OldLeaderMaxOffset: -1}}, 3000, ErrInvalid},
		{"lower epoch", m, []QueueMove{{QueueID: 1, ToBroker: "b3"}}, 1999, ErrStaleEpoch},
		{"same epoch", m, []QueueMove{{QueueID: 1, ToBroker: "b3"}}, 2000, ErrEpochConflict},
		{"logic overflow", func() Mapping {
			o := m.Clone()
			o.Queues[0][1].LogicOffset = math.MaxInt64 - 100
			return o
		}(), []QueueMove{{QueueID: 0, ToBroker: "b1", OldLeaderMaxOffset: 50}}, 3000, ErrInvalid},
	}
	for _, tt := range tests {
		if _, err := Remap(tt.m, tt.moves, tt.epoch, 30); !errors.Is(err, tt.want) {
			t.Errorf("%s: Remap = %v, want %v", tt.name, err, tt.want)
		}
	}
}
