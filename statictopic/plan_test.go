package statictopic

import (
	"errors"
	"slices"
	"testing"
)

// leadCounts returns how many queues each broker leads.
func leadCounts(m Mapping) map[string]int {
	out := map[string]int{}
	for q := int32(0); q < m.TotalQueues; q++ {
		out[leaderOf(m, q).Broker]++
	}
	return out
}

func TestPlanRemap(t *testing.T) {
	created := func(n int32, brokers ...string) Mapping {
		m, err := Create("T", Scope{name: "clusterA"}, n, brokers, 1000, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name      string
		m         Mapping
		brokers   []string
		wantMoves int
	}{
		// 8 queues on b1,b2 (4+4) to b1,b2,b3: shares 3,3,2; two queues move.
		{"grow 2 to 3", created(8, "b1", "b2"), []string{"b1", "b2", "b3"}, 2},
		// 9 queues on b1,b2 (5+4): shares 3,3,3 and three move.
		{"grow uneven", created(9, "b1", "b2"), []string{"b3", "b2", "b1"}, 3},
		// b2 leaves: its 4 queues move, 2 to each.
		{"shrink 3 to 2", created(12, "b1", "b2", "b3"), []string{"b1", "b3"}, 4},
		{"already balanced", created(8, "b1", "b2"), []string{"b2", "b1"}, 0},
		// all queues leave for new brokers.
		{"replace", created(4, "b1", "b2"), []string{"b3", "b4"}, 4},
		{"more brokers than queues", created(2, "b1"), []string{"b1", "b2", "b3"}, 1},
		// b1 leads 2, b2 leads 5: the larger share (4) goes to b2, so one
		// queue moves, not two.
		{"larger share to the busier broker", func() Mapping {
			m := created(7, "b2")
			m, err := Remap(m, []QueueMove{{QueueID: 0, ToBroker: "b1"}, {QueueID: 1, ToBroker: "b1"}}, m.Epoch+1000, 20)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}(), []string{"b1", "b2"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moves, err := PlanRemap(tt.m, tt.brokers)
			if err != nil {
				t.Fatal(err)
			}
			if len(moves) != tt.wantMoves {
				t.Fatalf("%d moves, want %d: %+v", len(moves), tt.wantMoves, moves)
			}
			again, _ := PlanRemap(tt.m, tt.brokers)
			if !slices.Equal(moves, again) {
				t.Errorf("plan not deterministic: %+v then %+v", moves, again)
			}
			if len(moves) == 0 {
				return
			}
			for i := range moves {
				if moves[i].OldLeaderMaxOffset != -1 {
					t.Errorf("move %+v: open leader's max offset should be left to the caller", moves[i])
				}
				moves[i].OldLeaderMaxOffset = 100
			}
			after, err := Remap(tt.m, moves, tt.m.Epoch+1000, 20)
			if err != nil {
				t.Fatal(err)
			}
			counts := leadCounts(after)
			lo, hi := int(after.TotalQueues), 0
			for _, b := range tt.brokers {
				lo, hi = min(lo, counts[b]), max(hi, counts[b])
			}
			total := 0
			for b, n := range counts {
				if !slices.Contains(tt.brokers, b) {
					t.Errorf("broker %s outside the set still leads %d queues", b, n)
				}
				total += n
			}
			if hi-lo > 1 || total != int(after.TotalQueues) {
				t.Errorf("unbalanced after the plan: %v", counts)
			}
			if again, _ := PlanRemap(after, tt.brokers); len(again) != 0 {
				t.Errorf("a second plan still moves %+v", again)
			}
		})
	}
}

func TestPlanRemapSealedLeaderAndErrors(t *testing.T) {
	_, m := issueScenario(t) // q0 led by b3, q1 b2, q2 b1, q3 b2
	m.Queues[2][0].EndOffset = 77
	moves, err := PlanRemap(m, []string{"b2", "b3"})
	if err != nil {
		t.Fatal(err)
	}
	want := []QueueMove{{QueueID: 2, ToBroker: "b3", OldLeaderMaxOffset: 77}}
	if !slices.Equal(moves, want) {
		t.Errorf("moves = %+v, want %+v", moves, want)
	}
	for _, brokers := range [][]string{nil, {"b1", "b1"}, {""}, {"__logic__x"}} {
		if _, err := PlanRemap(m, brokers); !errors.Is(err, ErrInvalid) {
			t.Errorf("brokers %q: %v, want ErrInvalid", brokers, err)
		}
	}
}

// TestPlanRemapFewest compares PlanRemap with every balanced assignment of
// small topics: no balanced assignment moves fewer queues.
func TestPlanRemapFewest(t *testing.T) {
	pool := []string{"b1", "b2", "b3"}
	targets := [][]string{{"b1", "b2"}, {"b2", "b3", "b4"}, {"b1", "b2", "b3"}, {"b4"}}
	for n := 1; n <= 5; n++ {
		leaders := make([]int, n)
		for {
			m := Mapping{Version: MappingVersion, Topic: "T", Scope: "c", Bname: "__logic__c", TotalQueues: int32(n), Epoch: 1,
				Queues: map[int32][]MappingItem{}}
			for q, b := range leaders {
				m.Queues[int32(q)] = []MappingItem{{QueueID: int32(q), Broker: pool[b], EndOffset: -1, TimeOfEnd: -1}}
			}
			for _, target := range targets {
				moves, err := PlanRemap(m, target)
				if err != nil {
					t.Fatal(err)
				}
				if best := fewestBalanced(leaders, pool, target); len(moves) != best {
					t.Fatalf("leaders %v to %v: %d moves, fewest balanced is %d", leaders, target, len(moves), best)
				}
			}
			// Next leader combination, as a base-3 counter.
			i := 0
			for ; i < n && leaders[i] == len(pool)-1; i++ {
				leaders[i] = 0
			}
			if i == n {
				break
			}
			leaders[i]++
		}
	}
}

// fewestBalanced tries every assignment of the queues to target and
// returns the fewest moves among the balanced ones.
func fewestBalanced(leaders []int, pool, target []string) int {
	n, best := len(leaders), len(leaders)+1
	assign := make([]int, n)
	for {
		counts := make([]int, len(target))
		moves := 0
		for q, b := range assign {
			counts[b]++
			if target[b] != pool[leaders[q]] {
				moves++
			}
		}
		if slices.Max(counts)-slices.Min(counts) <= 1 {
			best = min(best, moves)
		}
		i := 0
		for ; i < n && assign[i] == len(target)-1; i++ {
			assign[i] = 0
		}
		if i == n {
			return best
		}
		assign[i]++
	}
}
