package statictopic

import (
	"errors"
	"slices"
	"testing"
)

// twiceMoved has queue 0 moved b1 → b3 → b2: sealed [0, 12345) on b1-0,
// sealed [20000, 20100) on b3-0, open from 30000 on b2-2.
func twiceMoved(t *testing.T) Mapping {
	t.Helper()
	_, m := issueScenario(t)
	m, err := Remap(m, []QueueMove{{QueueID: 0, ToBroker: "b2", OldLeaderMaxOffset: 100}}, m.Epoch+1000, 30)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReadingItem(t *testing.T) {
	m := twiceMoved(t)
	for _, tt := range []struct {
		offset int64
		want   int
	}{
		{0, 0}, {12344, 0}, {12345, 1}, {19999, 1}, {20000, 1}, {20099, 1}, {20100, 2}, {30000, 2}, {1 << 40, 2}, {-5, 0},
	} {
		got, err := m.ReadingItem(0, tt.offset)
		if err != nil || got != tt.want {
			t.Errorf("ReadingItem(0, %d) = %d, %v; want %d", tt.offset, got, err, tt.want)
		}
	}
	if _, err := m.ReadingItem(9, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown queue: %v", err)
	}
}

func TestTrim(t *testing.T) {
	m := twiceMoved(t)
	tests := []struct {
		name    string
		queues  []int32
		below   int64
		dropped []int32 // gens dropped from queue 0
	}{
		{"nothing ends below", nil, 12344, nil},
		{"the first item", nil, 12345, []int32{0}},
		{"in the gap", nil, 19999, []int32{0}},
		{"both sealed items", nil, 20100, []int32{0, 1}},
		{"never the leader", nil, 1 << 50, []int32{0, 1}},
		{"only queue 1", []int32{1}, 1 << 50, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, dropped, err := Trim(m, tt.queues, tt.below, m.Epoch+1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(dropped) != len(tt.dropped) {
				t.Fatalf("dropped %+v, want gens %v", dropped, tt.dropped)
			}
			if len(dropped) == 0 {
				if !out.Equal(m) {
					t.Errorf("nothing to drop changed the mapping: %+v", out)
				}
				return
			}
			for i, d := range dropped {
				if d.QueueID != 0 || d.Gen != tt.dropped[i] {
					t.Errorf("dropped[%d] = %+v, want queue 0 gen %d", i, d, tt.dropped[i])
				}
			}
			if out.Epoch != m.Epoch+1000 || len(out.Queues[0]) != 3-len(dropped) || len(m.Queues[0]) != 3 {
				t.Errorf("trimmed = %+v (input %+v)", out.Queues[0], m.Queues[0])
			}
			// The gap rule now answers for the trimmed range.
			if next, ok := NextLogicOffset(func() error { _, _, err := out.ToPhysical(0, 0); return err }()); !ok || next != out.Queues[0][0].LogicOffset {
				t.Errorf("offset 0 after the trim: next %d %v", next, ok)
			}
			// A later move to b3, whose only queue (b3-0) may be trimmed,
			// must not reuse b3-0.
			moved, err := Remap(out, []QueueMove{{QueueID: 3, ToBroker: "b3", OldLeaderMaxOffset: 1}}, out.Epoch+1000, 40)
			if err != nil {
				t.Fatal(err)
			}
			if it := leaderOf(moved, 3); it.Broker != "b3" || it.QueueID == 0 {
				t.Errorf("new b3 item reuses a trimmed physical queue: %+v", it)
			}
		})
	}
	if _, _, err := Trim(m, []int32{7}, 0, m.Epoch+1000); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown queue: %v", err)
	}
	if _, _, err := Trim(m, nil, 20100, m.Epoch); !errors.Is(err, ErrEpochConflict) {
		t.Errorf("same epoch: %v", err)
	}
}

func TestCheckReaders(t *testing.T) {
	m := twiceMoved(t)
	_, dropped, err := Trim(m, nil, 20100, m.Epoch+1000) // gens 0 and 1 of queue 0
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		offset int64
		queue  int32
		want   error
	}{
		{"reads the first item", 500, 0, ErrHistory},
		{"in the gap before gen 1", 15000, 0, ErrHistory},
		{"last offset of gen 1", 20099, 0, ErrHistory},
		{"done with gen 1", 20100, 0, nil},
		{"on the leader", 30005, 0, nil},
		{"another queue", 0, 1, nil},
	}
	for _, tt := range tests {
		err := CheckReaders(m, dropped, []GroupOffset{{Group: "g", QueueID: tt.queue, Offset: tt.offset}})
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: CheckReaders = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestReaders(t *testing.T) {
	m := twiceMoved(t)
	rs := m.Readers([]GroupOffset{
		{Group: "z", QueueID: 0, Offset: 20050},
		{Group: "a", QueueID: 0, Offset: 20099},
		{Group: "gap", QueueID: 0, Offset: 13000},
		{Group: "q1", QueueID: 1, Offset: 3},
		{Group: "stray", QueueID: 9, Offset: 3},
	})
	if len(rs) != 4 || len(rs[0].Items) != 3 {
		t.Fatalf("Readers = %+v", rs)
	}
	want := [][]GroupReader{{}, {{"a", 20099}, {"gap", 13000}, {"z", 20050}}, {}}
	for i, it := range rs[0].Items {
		if it.Gen != m.Queues[0][i].Gen || !slices.Equal(it.Groups, want[i]) {
			t.Errorf("queue 0 item %d: %+v, want groups %v", i, it, want[i])
		}
	}
	if g := rs[1].Items[0].Groups; len(g) != 1 || g[0].Group != "q1" {
		t.Errorf("queue 1: %+v", g)
	}
}
