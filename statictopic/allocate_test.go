package statictopic

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

// leaders counts, per broker, the logic queues it leads.
func leaders(m Mapping) map[string]int {
	n := make(map[string]int)
	for _, items := range m.Queues {
		n[items[len(items)-1].Broker]++
	}
	return n
}

func TestCreateEven(t *testing.T) {
	tests := []struct {
		total   int32
		brokers []string
		want    map[string]int
	}{
		{50, []string{"b1", "b2"}, map[string]int{"b1": 25, "b2": 25}},
		{10, []string{"b3", "b1", "b2"}, map[string]int{"b1": 4, "b2": 3, "b3": 3}},
		{1, []string{"b2", "b1"}, map[string]int{"b1": 1}},
		{3, []string{"only"}, map[string]int{"only": 3}},
	}
	for _, tt := range tests {
		m, err := Create("T", mustScope(t, "clusterA"), tt.total, tt.brokers, 1000, 7, nil)
		if err != nil {
			t.Fatalf("Create(%d, %q): %v", tt.total, tt.brokers, err)
		}
		if got := leaders(m); !maps.Equal(got, tt.want) {
			t.Errorf("Create(%d, %q) load = %v, want %v", tt.total, tt.brokers, got, tt.want)
		}
		if m.Version != MappingVersion || m.Topic != "T" || m.Scope != "clusterA" || m.Bname != "__logic__clusterA" ||
			m.Epoch != 1000 || m.TotalQueues != tt.total {
			t.Errorf("header = %+v", m)
		}
		// Physical ids per broker are 0, 1, 2, ... in logic queue order.
		next := make(map[string]int32)
		for q := int32(0); q < tt.total; q++ {
			items := m.Queues[q]
			want := MappingItem{QueueID: next[items[0].Broker], Broker: items[0].Broker, EndOffset: -1, TimeOfStart: 7, TimeOfEnd: -1}
			if len(items) != 1 || items[0] != want {
				t.Errorf("queue %d = %+v, want [%+v]", q, items, want)
			}
			next[items[0].Broker]++
		}
	}
}

func TestCreateScopes(t *testing.T) {
	for _, s := range []string{"global", "c2,c1", "clusterB"} {
		sc := mustScope(t, s)
		m, err := Create("T", sc, 2, []string{"b1"}, 0, 0, nil)
		if err != nil || m.Scope != sc.String() || m.Bname != sc.BrokerName() {
			t.Errorf("Create in %q: %+v, %v", s, m, err)
		}
	}
}

func TestCreateGrow(t *testing.T) {
	sc := mustScope(t, "clusterA")
	m, err := Create("T", sc, 4, []string{"b1", "b2"}, 1000, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Queue 0 leaves b1 for b3: b1 leads 1 (queue 2), b2 leads 2, b3 leads 1,
	// and b1 has used physical ids 0 and 1.
	m, err = Remap(m, []QueueMove{{QueueID: 0, ToBroker: "b3", OldLeaderMaxOffset: 10}}, 2000, 2)
	if err != nil {
		t.Fatal(err)
	}
	before := m.Clone()
	grown, err := Create("T", sc, 8, []string{"b2", "b3", "b1"}, 3000, 3, &m)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Equal(before) {
		t.Fatal("Create changed existing")
	}
	for q := int32(0); q < 4; q++ {
		if !slices.Equal(grown.Queues[q], m.Queues[q]) {
			t.Errorf("queue %d changed: %+v -> %+v", q, m.Queues[q], grown.Queues[q])
		}
	}
	want := []struct {
		broker string
		id     int32
	}{{"b1", 2}, {"b3", 1}, {"b1", 3}, {"b2", 2}}
	for i, w := range want {
		q := int32(4 + i)
		got := grown.Queues[q]
		if len(got) != 1 || got[0].Broker != w.broker || got[0].QueueID != w.id || got[0].TimeOfStart != 3 {
			t.Errorf("queue %d = %+v, want %s-%d", q, got, w.broker, w.id)
		}
	}
	if got := leaders(grown); !maps.Equal(got, map[string]int{"b1": 3, "b2": 3, "b3": 2}) {
		t.Errorf("load after grow = %v", got)
	}
	if grown.Epoch != 3000 || grown.TotalQueues != 8 {
		t.Errorf("epoch %d total %d", grown.Epoch, grown.TotalQueues)
	}

	same, err := Create("T", sc, 8, []string{"b9"}, 9999, 9, &grown)
	if err != nil || !same.Equal(grown) {
		t.Errorf("Create with equal totalQueues = %+v, %v; want existing unchanged", same, err)
	}
	same.Queues[0][0].Gen = 42
	if grown.Queues[0][0].Gen == 42 {
		t.Error("equal-size Create returned existing's own queues")
	}
}

func TestCreateRejects(t *testing.T) {
	sc := mustScope(t, "clusterA")
	existing, err := Create("T", sc, 4, []string{"b1"}, 1000, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	broken := existing.Clone()
	broken.Version = ""
	tests := []struct {
		name     string
		topic    string
		scope    Scope
		total    int32
		brokers  []string
		epoch    int64
		existing *Mapping
		want     error
	}{
		{"empty topic", "", sc, 1, []string{"b1"}, 0, nil, ErrInvalid},
		{"zero scope", "T", Scope{}, 1, []string{"b1"}, 0, nil, ErrInvalid},
		{"no queues", "T", sc, 0, []string{"b1"}, 0, nil, ErrInvalid},
		{"too many queues", "T", sc, MaxTotalQueues + 1, []string{"b1"}, 0, nil, ErrInvalid},
		{"no brokers", "T", sc, 1, nil, 0, nil, ErrInvalid},
		{"empty broker", "T", sc, 1, []string{"b1", ""}, 0, nil, ErrInvalid},
		{"duplicate broker", "T", sc, 1, []string{"b1", "b2", "b1"}, 0, nil, ErrInvalid},
		{"logic broker", "T", sc, 1, []string{"__logic__x"}, 0, nil, ErrInvalid},
		{"negative epoch", "T", sc, 1, []string{"b1"}, -1, nil, ErrInvalid},
		{"shrink", "T", sc, 3, []string{"b1"}, 2000, &existing, ErrInvalid},
		{"other topic", "U", sc, 8, []string{"b1"}, 2000, &existing, ErrInvalid},
		{"other scope", "T", mustScope(t, "clusterB"), 8, []string{"b1"}, 2000, &existing, ErrInvalid},
		{"invalid existing", "T", sc, 8, []string{"b1"}, 2000, &broken, ErrInvalid},
		{"grow with lower epoch", "T", sc, 8, []string{"b1"}, 999, &existing, ErrStaleEpoch},
		{"grow with same epoch", "T", sc, 8, []string{"b1"}, 1000, &existing, ErrEpochConflict},
	}
	for _, tt := range tests {
		if _, err := Create(tt.topic, tt.scope, tt.total, tt.brokers, tt.epoch, 0, tt.existing); !errors.Is(err, tt.want) {
			t.Errorf("%s: Create = %v, want %v", tt.name, err, tt.want)
		}
	}
}
