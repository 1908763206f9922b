package statictopic

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"testing"
)

func TestRole(t *testing.T) {
	for _, r := range []Role{Producer, Consumer} {
		got, err := ParseRole(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v", r, got, err)
		}
		text, err := r.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Role
		if err := back.UnmarshalText(text); err != nil || back != r {
			t.Errorf("text round trip of %v = %v, %v", r, back, err)
		}
	}
	for _, s := range []string{"", "Producer", "admin"} {
		if _, err := ParseRole(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRole(%q) = %v, want ErrInvalid", s, err)
		}
	}
	if Role(0).String() != "Role(0)" {
		t.Errorf("Role(0) = %q", Role(0))
	}
	if _, err := Role(7).MarshalText(); !errors.Is(err, ErrInvalid) {
		t.Errorf("MarshalText(7) = %v, want ErrInvalid", err)
	}
}

// multiActive is the issue's multi-active scenario: TopicTest with 50 queues
// in clusterA (brokers a1, a2) and in clusterB (b1, b2).
func multiActive(t *testing.T) []Mapping {
	t.Helper()
	a, err := Create("TopicTest", mustScope(t, "clusterA"), 50, []string{"a1", "a2"}, 1000, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create("TopicTest", mustScope(t, "clusterB"), 50, []string{"b1", "b2"}, 3000, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return []Mapping{a, b}
}

// brokerNames counts route queues per logic broker name.
func brokerNames(r Route) map[string]int {
	n := make(map[string]int)
	for _, q := range r.Queues {
		n[q.BrokerName]++
	}
	return n
}

func TestRouteMultiActive(t *testing.T) {
	mappings := multiActive(t)
	inGlobalRead := map[string]bool{}
	globalRead := func(s string) bool { return inGlobalRead[s] }

	route := func(client string, role Role) Route {
		t.Helper()
		r, err := BuildRoute("TopicTest", mustScope(t, client), role, mappings, globalRead)
		if err != nil {
			t.Fatalf("%s %s: %v", client, role, err)
		}
		if !slices.IsSortedFunc(r.Queues, func(a, b RouteQueue) int {
			return cmp.Or(cmp.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.QueueID, b.QueueID))
		}) {
			t.Errorf("%s %s: queues not sorted", client, role)
		}
		return r
	}
	only := func(name string) map[string]int { return map[string]int{name: 50} }
	both := map[string]int{"__logic__clusterA": 50, "__logic__clusterB": 50}

	for _, c := range []struct{ client, name string }{{"clusterA", "__logic__clusterA"}, {"clusterB", "__logic__clusterB"}} {
		for _, role := range []Role{Producer, Consumer} {
			r := route(c.client, role)
			if got := brokerNames(r); len(r.Queues) != 50 || got[c.name] != 50 {
				t.Errorf("%s %s sees %v, want %v", c.client, role, got, only(c.name))
			}
		}
	}

	// Each route queue is the logic queue with its leader's physical queue.
	r := route("clusterA", Producer)
	for i, q := range r.Queues {
		leader, _ := mappings[0].Leader(int32(i))
		want := RouteQueue{BrokerName: "__logic__clusterA", QueueID: int32(i), Broker: leader.Broker, PhysicalQueueID: leader.QueueID}
		if q != want {
			t.Errorf("queue %d = %+v, want %+v", i, q, want)
		}
	}
	if r.Epoch != 1000 || r.Topic != "TopicTest" {
		t.Errorf("route header = %q epoch %d", r.Topic, r.Epoch)
	}

	// clusterA fails: its scope goes into global read.
	inGlobalRead["clusterA"] = true
	if r := route("clusterB", Consumer); len(r.Queues) != 100 || !maps.Equal(brokerNames(r), both) || r.Epoch != 3000 {
		t.Errorf("clusterB consumer in global read sees %v (epoch %d), want %v", brokerNames(r), r.Epoch, both)
	}
	if got := brokerNames(route("clusterB", Producer)); !maps.Equal(got, only("__logic__clusterB")) {
		t.Errorf("clusterB producer in global read sees %v", got)
	}
	if got := brokerNames(route("clusterA", Consumer)); !maps.Equal(got, only("__logic__clusterA")) {
		t.Errorf("clusterA consumer sees %v", got)
	}

	// Switching back restores the normal view.
	inGlobalRead["clusterA"] = false
	if got := brokerNames(route("clusterB", Consumer)); !maps.Equal(got, only("__logic__clusterB")) {
		t.Errorf("after switching back clusterB consumer sees %v", got)
	}

	// A client of a cluster without its own mapping sees nothing, unless
	// consuming a scope in global read.
	if _, err := BuildRoute("TopicTest", mustScope(t, "clusterC"), Consumer, mappings, globalRead); !errors.Is(err, ErrNotFound) {
		t.Errorf("clusterC: %v, want ErrNotFound", err)
	}
	inGlobalRead["clusterA"] = true
	if got := brokerNames(route("clusterC", Consumer)); !maps.Equal(got, only("__logic__clusterA")) {
		t.Errorf("clusterC consumer in global read sees %v", got)
	}
	if _, err := BuildRoute("TopicTest", mustScope(t, "clusterC"), Producer, mappings, globalRead); !errors.Is(err, ErrNotFound) {
		t.Errorf("clusterC producer: %v, want ErrNotFound", err)
	}
	// A global client has no cluster mapping of its own.
	if _, err := BuildRoute("TopicTest", Global(), Producer, mappings, globalRead); !errors.Is(err, ErrNotFound) {
		t.Errorf("global producer: %v, want ErrNotFound", err)
	}
	if got := brokerNames(route("global", Consumer)); !maps.Equal(got, only("__logic__clusterA")) {
		t.Errorf("global consumer in global read sees %v", got)
	}
}

func TestRouteScopes(t *testing.T) {
	g, err := Create("G", Global(), 4, []string{"b1", "b2"}, 1000, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	multi, err := Create("M", mustScope(t, "c2,c1"), 3, []string{"b1"}, 1000, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		topic  string
		client string
		maps   []Mapping
		want   map[string]int
		err    error
	}{
		{"G", "clusterA", []Mapping{g}, map[string]int{"__logic__global": 4}, nil},
		{"G", "global", []Mapping{g}, map[string]int{"__logic__global": 4}, nil},
		{"G", "c1,c2", []Mapping{g}, map[string]int{"__logic__global": 4}, nil},
		{"M", "c1", []Mapping{multi}, map[string]int{"__logic__c1_c2": 3}, nil},
		{"M", "c2", []Mapping{multi}, map[string]int{"__logic__c1_c2": 3}, nil},
		{"M", "c1,c2", []Mapping{multi}, map[string]int{"__logic__c1_c2": 3}, nil},
		{"M", "c3", []Mapping{multi}, nil, ErrNotFound},
		{"M", "global", []Mapping{multi}, nil, ErrNotFound},
		{"M", "c1", nil, nil, ErrNotFound},
	}
	for _, tt := range tests {
		for _, role := range []Role{Producer, Consumer} {
			r, err := BuildRoute(tt.topic, mustScope(t, tt.client), role, tt.maps, nil)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Errorf("%s for %s %s: %v, want %v", tt.topic, tt.client, role, err, tt.err)
				continue
			}
			if got := brokerNames(r); err == nil && !maps.Equal(got, tt.want) {
				t.Errorf("%s for %s %s sees %v, want %v", tt.topic, tt.client, role, got, tt.want)
			}
		}
	}
}

func TestRouteUsesLeaders(t *testing.T) {
	_, m := issueScenario(t)
	r, err := BuildRoute("T", mustScope(t, "clusterA"), Producer, []Mapping{m}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q := r.Queues[0]; q.Broker != "b3" || q.PhysicalQueueID != 0 || q.QueueID != 0 {
		t.Errorf("queue 0 = %+v, want leader b3-0", q)
	}
	if r.Epoch != m.Epoch {
		t.Errorf("epoch %d, want %d", r.Epoch, m.Epoch)
	}
}

func TestRouteRejects(t *testing.T) {
	mappings := multiActive(t)
	a := mustScope(t, "clusterA")
	g, err := Create("TopicTest", Global(), 2, []string{"b1"}, 1000, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	ab, err := Create("TopicTest", mustScope(t, "clusterA,clusterB"), 2, []string{"b1"}, 1000, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	badBname := mappings[0].Clone()
	badBname.Bname = "__logic__clusterB"
	badScope := mappings[0].Clone()
	badScope.Scope = "a_b"
	emptyQueue := mappings[0].Clone()
	emptyQueue.Queues[3] = nil
	tests := []struct {
		name   string
		client Scope
		role   Role
		maps   []Mapping
		want   error
	}{
		{"zero client scope", Scope{}, Consumer, mappings, ErrInvalid},
		{"unknown role", a, Role(0), mappings, ErrInvalid},
		{"other topic", a, Consumer, slices.Concat([]Mapping{{Topic: "X", Scope: "clusterC"}}, mappings), ErrInvalid},
		{"same scope twice", a, Consumer, slices.Concat(mappings, mappings[:1]), ErrInvalid},
		{"bname not the scope's", a, Consumer, []Mapping{badBname}, ErrInvalid},
		{"bad scope", a, Consumer, []Mapping{badScope}, ErrInvalid},
		{"empty item list", a, Consumer, []Mapping{emptyQueue}, ErrInvalid},
		{"global and cluster scope", a, Producer, slices.Concat(mappings, []Mapping{g}), ErrScopeConflict},
		{"overlapping cluster scopes", a, Consumer, slices.Concat(mappings, []Mapping{ab}), ErrScopeConflict},
	}
	for _, tt := range tests {
		if _, err := BuildRoute("TopicTest", tt.client, tt.role, tt.maps, nil); !errors.Is(err, tt.want) {
			t.Errorf("%s: BuildRoute = %v, want %v", tt.name, err, tt.want)
		}
	}
}
