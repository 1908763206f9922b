package statictopic

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
)

func TestCloneIsDeep(t *testing.T) {
	m := validMapping()
	c := m.Clone()
	if !c.Equal(m) {
		t.Fatal("clone differs")
	}
	c.Queues[0][0].EndOffset = 999
	c.Queues[1] = append(c.Queues[1], MappingItem{Gen: 1})
	c.Queues[7] = nil
	if !m.Equal(validMapping()) {
		t.Fatal("changing the clone changed the original")
	}
	if (Mapping{}).Clone().Queues != nil {
		t.Error("clone of nil queues is not nil")
	}
}

func TestEqual(t *testing.T) {
	base := validMapping()
	if !base.Equal(validMapping()) {
		t.Error("equal mappings differ")
	}
	for name, change := range map[string]func(*Mapping){
		"version": func(m *Mapping) { m.Version = "x" },
		"topic":   func(m *Mapping) { m.Topic = "x" },
		"scope":   func(m *Mapping) { m.Scope = "x" },
		"total":   func(m *Mapping) { m.TotalQueues++ },
		"epoch":   func(m *Mapping) { m.Epoch++ },
		"bname":   func(m *Mapping) { m.Bname = "x" },
		"item":    func(m *Mapping) { m.Queues[0][1].TimeOfStart++ },
		"items":   func(m *Mapping) { m.Queues[1] = append(m.Queues[1], MappingItem{}) },
		"queue":   func(m *Mapping) { m.Queues[9] = m.Queues[1] },
	} {
		m := validMapping()
		change(&m)
		if m.Equal(base) || base.Equal(m) {
			t.Errorf("%s: changed mapping still equal", name)
		}
	}
	a := Mapping{Queues: map[int32][]MappingItem{0: nil}}
	b := Mapping{Queues: map[int32][]MappingItem{0: {}}}
	if !a.Equal(b) {
		t.Error("nil and empty item lists differ")
	}
}

func TestLeader(t *testing.T) {
	m := validMapping()
	l, err := m.Leader(0)
	if err != nil || l.Broker != "b2" || l.Gen != 1 {
		t.Errorf("Leader(0) = %+v, %v", l, err)
	}
	if _, err := m.Leader(2); !errors.Is(err, ErrNotFound) {
		t.Errorf("Leader(2) = %v, want ErrNotFound", err)
	}
	m.Queues[1] = nil
	if _, err := m.Leader(1); !errors.Is(err, ErrInvalid) {
		t.Errorf("Leader of empty list = %v, want ErrInvalid", err)
	}
}

func TestItemRanges(t *testing.T) {
	tests := []struct {
		it             MappingItem
		sealed, decide bool
		end            int64
		ok             bool
	}{
		{MappingItem{LogicOffset: 10, StartOffset: 5, EndOffset: 8}, true, true, 13, true},
		{MappingItem{LogicOffset: 10, EndOffset: -1}, false, true, 0, false},
		{MappingItem{LogicOffset: -1, EndOffset: 4}, true, false, 0, false},
		{MappingItem{LogicOffset: 1 << 62, EndOffset: 1 << 62}, true, true, 0, false}, // end overflows
	}
	for i, tt := range tests {
		end, ok := tt.it.LogicEnd()
		if tt.it.IsSealed() != tt.sealed || tt.it.IsDecided() != tt.decide || end != tt.end || ok != tt.ok {
			t.Errorf("%d: sealed %v decided %v LogicEnd %d %v", i, tt.it.IsSealed(), tt.it.IsDecided(), end, ok)
		}
	}
}

// The JSON field names are a contract with stored records and clients.
func TestJSONNames(t *testing.T) {
	keys := func(v any) []string {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(maps.Keys(obj))
	}
	tests := []struct {
		v    any
		want []string
	}{
		{MappingItem{}, []string{"bname", "endOffset", "gen", "logicOffset", "queueId", "startOffset", "timeOfEnd", "timeOfStart"}},
		{Mapping{}, []string{"bname", "epoch", "queues", "scope", "topic", "totalQueues", "version"}},
		{QueueMove{}, []string{"oldLeaderMaxOffset", "queueId", "toBroker"}},
		{Route{}, []string{"epoch", "queues", "topic"}},
		{RouteQueue{}, []string{"broker", "brokerName", "physicalQueueId", "queueId"}},
	}
	for _, tt := range tests {
		if got := keys(tt.v); !slices.Equal(got, tt.want) {
			t.Errorf("%T keys = %q, want %q", tt.v, got, tt.want)
		}
	}

	m := validMapping()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back Mapping
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Equal(m) {
		t.Errorf("JSON round trip changed the mapping:\n%s", b)
	}
}

func FuzzMappingJSON(f *testing.F) {
	b, _ := json.Marshal(validMapping())
	f.Add(b)
	f.Add([]byte(`{"version":"1","topic":"T","scope":"c1","totalQueues":1,"bname":"__logic__c1","queues":{"0":[{"bname":"b","endOffset":-1}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Mapping
		if json.Unmarshal(data, &m) != nil {
			return
		}
		if err := m.Validate(); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate error not ErrInvalid: %v", err)
			}
			return
		}
		// A valid mapping translates without panicking, and whatever a
		// translation finds maps back.
		for q, items := range m.Queues {
			for _, it := range items {
				for _, p := range []int64{it.StartOffset, it.EndOffset - 1, it.StartOffset + 1} {
					if p < it.StartOffset || (it.IsSealed() && p >= it.EndOffset) {
						continue
					}
					gotQ, l, err := m.ToLogic(it.Broker, it.QueueID, p)
					if err != nil {
						continue
					}
					back, bp, err := m.ToPhysical(gotQ, l)
					if gotQ != q || err != nil || back != it || bp != p {
						t.Fatalf("%s-%d@%d -> %d@%d -> %+v@%d, %v", it.Broker, it.QueueID, p, gotQ, l, back, bp, err)
					}
				}
			}
		}
		if _, err := BuildRoute(m.Topic, mustScope(t, m.Scope), Consumer, []Mapping{m}, nil); err != nil {
			t.Fatalf("BuildRoute of a valid mapping: %v", err)
		}
	})
}
