package statictopic

import (
	"errors"
	"testing"
)

func TestCheckHistory(t *testing.T) {
	_, stored := issueScenario(t) // queue 0: b1 sealed at 12,345, b3 open from 20,000
	tests := []struct {
		name   string
		mutate func(m *Mapping)
		want   error
	}{
		{"unchanged", func(*Mapping) {}, nil},
		{"times of a sealed item", func(m *Mapping) { m.Queues[0][0].TimeOfEnd = 99 }, nil},
		{"leader sealed", func(m *Mapping) { m.Queues[0][1].EndOffset = 5 }, nil},
		{"item appended", func(m *Mapping) {
			m.Queues[1][0].EndOffset = 7
			m.Queues[1] = append(m.Queues[1], MappingItem{Gen: 1, QueueID: 1, Broker: "b3", LogicOffset: 10000, EndOffset: -1})
		}, nil},
		{"sealed end moved", func(m *Mapping) { m.Queues[0][0].EndOffset = 12000 }, ErrHistory},
		{"sealed logic offset moved", func(m *Mapping) { m.Queues[0][0].LogicOffset = 5 }, ErrHistory},
		{"sealed broker changed", func(m *Mapping) { m.Queues[0][0].Broker = "b9" }, ErrHistory},
		{"sealed physical queue changed", func(m *Mapping) { m.Queues[0][0].QueueID = 7 }, ErrHistory},
		{"sealed start changed", func(m *Mapping) { m.Queues[0][0].StartOffset = 1 }, ErrHistory},
		{"sealed gen renumbered", func(m *Mapping) { m.Queues[0][0].Gen = 5; m.Queues[0][1].Gen = 6 }, ErrHistory},
		{"sealed item dropped", func(m *Mapping) { m.Queues[0] = m.Queues[0][1:] }, ErrHistory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := stored.Clone()
			in.Epoch += 1000
			tt.mutate(&in)
			if err := CheckHistory(stored, in); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("CheckHistory = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestCheckHistoryReservedIDs(t *testing.T) {
	_, m := issueScenario(t)
	stored, _, err := Trim(m, []int32{0}, 20000, m.Epoch+1000) // drops b1-0, reserves b1 ids below 1
	if err != nil {
		t.Fatal(err)
	}
	lowered := stored.Clone()
	lowered.Epoch += 1000
	lowered.Reserved = nil
	if err := CheckHistory(stored, lowered); !errors.Is(err, ErrHistory) {
		t.Errorf("reservation dropped: %v, want ErrHistory", err)
	}
	reused := stored.Clone()
	reused.Epoch += 1000
	reused.Queues[1][0].EndOffset = 3
	reused.Queues[1] = append(reused.Queues[1], MappingItem{Gen: 1, QueueID: 0, Broker: "b1", LogicOffset: 10000, EndOffset: -1})
	if err := reused.Validate(); err != nil {
		t.Fatal(err) // a plain validation cannot see the reuse
	}
	if err := CheckHistory(stored, reused); !errors.Is(err, ErrHistory) {
		t.Errorf("reserved id reused: %v, want ErrHistory", err)
	}
}
