package statictopic

import (
	"encoding/json"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

var propertyBrokers = []string{"b1", "b2", "b3", "b4", "b5"}

// genMapping builds a random valid mapping the way a coordinator would: Create,
// then random grows and Remaps, each checked not to change its input.
func genMapping(t *rapid.T) Mapping {
	scope := rapid.SampledFrom([]Scope{{name: "c1"}, {name: "c1,c2"}, Global()}).Draw(t, "scope")
	brokers := propertyBrokers[:rapid.IntRange(1, 3).Draw(t, "brokers")]
	now := rapid.Int64Range(0, 1<<41).Draw(t, "now")
	m, err := Create("T", scope, rapid.Int32Range(1, 6).Draw(t, "queues"), brokers, NextEpoch(0, now), now, nil)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	steps := rapid.IntRange(0, 12).Draw(t, "steps")
	for range steps {
		now += rapid.Int64Range(0, 5000).Draw(t, "tick")
		before := m.Clone()
		if rapid.IntRange(0, 7).Draw(t, "grow?") == 0 {
			total := m.TotalQueues + rapid.Int32Range(1, 3).Draw(t, "more")
			grown, err := Create(m.Topic, scope, total, propertyBrokers[:rapid.IntRange(1, 5).Draw(t, "growBrokers")], NextEpoch(m.Epoch, now), now, &m)
			if err != nil {
				t.Fatalf("grow to %d: %v", total, err)
			}
			if !m.Equal(before) {
				t.Fatal("Create changed existing")
			}
			m = grown
			continue
		}
		var moves []QueueMove
		for q := int32(0); q < m.TotalQueues; q++ {
			if !rapid.Bool().Draw(t, "move?") {
				continue
			}
			leader, _ := m.Leader(q)
			to := rapid.SampledFrom(propertyBrokers).Draw(t, "to")
			if to == leader.Broker {
				continue
			}
			// Mostly small ranges, sometimes empty, sometimes huge.
			n := rapid.OneOf(rapid.Int64Range(0, 30000), rapid.Just(int64(0)), rapid.Int64Range(0, 1<<40)).Draw(t, "messages")
			moves = append(moves, QueueMove{QueueID: q, ToBroker: to, OldLeaderMaxOffset: leader.StartOffset + n})
		}
		if len(moves) == 0 {
			continue
		}
		next, err := Remap(m, moves, NextEpoch(m.Epoch, now), now)
		if err != nil {
			t.Fatalf("Remap %+v: %v", moves, err)
		}
		if !m.Equal(before) {
			t.Fatal("Remap changed its input")
		}
		m = next
	}
	return m
}

func TestPropertyTranslationRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMapping(t)
		if err := m.Validate(); err != nil {
			t.Fatalf("generated mapping invalid: %v", err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back Mapping
		if err := json.Unmarshal(b, &back); err != nil || !back.Equal(m) {
			t.Fatalf("JSON round trip: %v", err)
		}

		for q, items := range m.Queues {
			for i, it := range items {
				checkItemRoundTrip(t, m, q, it)
				if end, ok := it.LogicEnd(); ok {
					// Nothing between this item's logic end and the next
					// item (or forever, after a sealed last item) translates.
					limit := end + 3*LogicBlockSize
					if i+1 < len(items) {
						limit = items[i+1].LogicOffset - 1
					}
					for _, l := range []int64{end, limit, rapid.Int64Range(end, limit).Draw(t, "gap")} {
						if _, _, err := m.ToPhysical(q, l); !errors.Is(err, ErrOutOfRange) {
							t.Fatalf("queue %d logic %d after item gen %d (end %d): %v, want ErrOutOfRange", q, l, it.Gen, end, err)
						}
					}
					if _, _, err := m.ToLogic(it.Broker, it.QueueID, it.EndOffset); !errors.Is(err, ErrOutOfRange) {
						t.Fatalf("%s-%d at its sealed end %d: %v, want ErrOutOfRange", it.Broker, it.QueueID, it.EndOffset, err)
					}
				}
			}
		}

		// Any logic offset either translates and round-trips, or is out of
		// range: never a guess.
		for range 20 {
			q := rapid.Int32Range(0, m.TotalQueues-1).Draw(t, "anyQueue")
			l := rapid.Int64Range(0, 1<<42).Draw(t, "anyLogic")
			it, p, err := m.ToPhysical(q, l)
			if errors.Is(err, ErrOutOfRange) {
				continue
			}
			if err != nil {
				t.Fatalf("ToPhysical(%d, %d): %v", q, l, err)
			}
			if l < it.LogicOffset {
				t.Fatalf("ToPhysical(%d, %d) picked item gen %d starting at %d", q, l, it.Gen, it.LogicOffset)
			}
			if end, ok := it.LogicEnd(); ok && l >= end {
				t.Fatalf("ToPhysical(%d, %d) picked item gen %d ending at %d", q, l, it.Gen, end)
			}
			if gq, gl, err := m.ToLogic(it.Broker, it.QueueID, p); err != nil || gq != q || gl != l {
				t.Fatalf("%d@%d -> %s-%d@%d -> %d@%d, %v", q, l, it.Broker, it.QueueID, p, gq, gl, err)
			}
		}

		r, err := BuildRoute("T", mustScope(t, m.Scope), Producer, []Mapping{m}, nil)
		if err != nil || len(r.Queues) != int(m.TotalQueues) || r.Epoch != m.Epoch {
			t.Fatalf("route: %d queues, epoch %d, %v", len(r.Queues), r.Epoch, err)
		}
	})
}

// checkItemRoundTrip checks logic→physical→logic and physical→logic→physical
// at the edges of it's range and at a random offset inside it.
func checkItemRoundTrip(t *rapid.T, m Mapping, q int32, it MappingItem) {
	span := int64(1 << 42) // an open item's range has no end; sample its start
	if it.IsSealed() {
		span = it.EndOffset - it.StartOffset
	}
	if span == 0 {
		return
	}
	for _, d := range []int64{0, span - 1, rapid.Int64Range(0, span-1).Draw(t, "inside")} {
		l := it.LogicOffset + d
		got, p, err := m.ToPhysical(q, l)
		if err != nil || got != it || p != it.StartOffset+d {
			t.Fatalf("ToPhysical(%d, %d) = %+v@%d, %v; want %+v@%d", q, l, got, p, err, it, it.StartOffset+d)
		}
		gq, gl, err := m.ToLogic(got.Broker, got.QueueID, p)
		if err != nil || gq != q || gl != l {
			t.Fatalf("logic %d@%d -> %s-%d@%d -> %d@%d, %v", q, l, got.Broker, got.QueueID, p, gq, gl, err)
		}

		p = it.StartOffset + d
		gq, gl, err = m.ToLogic(it.Broker, it.QueueID, p)
		if err != nil || gq != q || gl != it.LogicOffset+d {
			t.Fatalf("ToLogic(%s-%d, %d) = %d@%d, %v; want %d@%d", it.Broker, it.QueueID, p, gq, gl, err, q, it.LogicOffset+d)
		}
		got, gp, err := m.ToPhysical(gq, gl)
		if err != nil || got != it || gp != p {
			t.Fatalf("physical %s-%d@%d -> %d@%d -> %+v@%d, %v", it.Broker, it.QueueID, p, gq, gl, got, gp, err)
		}
	}
}
