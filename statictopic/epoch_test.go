package statictopic

import (
	"errors"
	"math"
	"testing"
)

func TestNextEpoch(t *testing.T) {
	tests := []struct {
		name           string
		old, now, want int64
	}{
		{"clock behind: old+1000", 5000, 1000, 6000},
		{"clock equal to old+1000", 5000, 6000, 6000},
		{"clock ahead: now", 5000, 1_700_000_000_000, 1_700_000_000_000},
		{"first epoch", 0, 42, 1000},
		{"saturates", math.MaxInt64 - 10, 0, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := NextEpoch(tt.old, tt.now); got != tt.want {
			t.Errorf("%s: NextEpoch(%d, %d) = %d, want %d", tt.name, tt.old, tt.now, got, tt.want)
		}
	}
}

func TestCheckEpoch(t *testing.T) {
	stored := validMapping()
	stored.Epoch = 5000
	with := func(epoch int64, change func(*Mapping)) Mapping {
		m := stored.Clone()
		m.Epoch = epoch
		if change != nil {
			change(&m)
		}
		return m
	}
	moved := func(m *Mapping) { m.Queues[1][0].TimeOfStart = 99 }
	tests := []struct {
		name        string
		incoming    Mapping
		wantReplace bool
		wantErr     error
	}{
		{"lower", with(4999, nil), false, ErrStaleEpoch},
		{"lower and different", with(4000, moved), false, ErrStaleEpoch},
		{"far lower, no overflow", with(math.MinInt64, nil), false, ErrStaleEpoch},
		{"equal and identical", with(5000, nil), false, nil},
		{"equal, identical, empty vs nil maps", with(5000, nil), false, nil},
		{"equal and different", with(5000, moved), false, ErrEpochConflict},
		{"equal, one more queue", with(5000, func(m *Mapping) {
			m.TotalQueues = 3
			m.Queues[2] = []MappingItem{{QueueID: 7, Broker: "b9", EndOffset: -1}}
		}), false, ErrEpochConflict},
		{"higher", with(5001, nil), true, nil},
		{"higher and different", with(math.MaxInt64, moved), true, nil},
		{"other topic", with(6000, func(m *Mapping) { m.Topic = "U" }), false, ErrInvalid},
		{"other scope", with(6000, func(m *Mapping) { m.Scope = "clusterB" }), false, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			replace, err := CheckEpoch(stored, tt.incoming)
			if replace != tt.wantReplace || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("CheckEpoch = %v, %v; want %v, %v", replace, err, tt.wantReplace, tt.wantErr)
			}
		})
	}

	// A mapping with no queues at all compares equal whether its map is nil
	// or empty.
	a, b := Mapping{Topic: "T", Scope: "c1", Epoch: 7}, Mapping{Topic: "T", Scope: "c1", Epoch: 7, Queues: map[int32][]MappingItem{}}
	if replace, err := CheckEpoch(a, b); replace || err != nil {
		t.Errorf("nil vs empty queues: %v, %v; want false, nil", replace, err)
	}
}
