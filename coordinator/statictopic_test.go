package coordinator

import (
	"context"
	"errors"
	"testing"

	"github.com/offsetd/offsetd/statictopic"
)

func routeScopes(r statictopic.Route) map[string]int {
	out := map[string]int{}
	for _, q := range r.Queues {
		out[q.BrokerName]++
	}
	return out
}

// TestMultiActive is the multi-active scenario: TopicTest with 50 logic
// queues in clusterA and in clusterB. Each scope's clients see only their
// own queues until clusterA is switched to global read; then clusterB's
// consumers also see clusterA's queues, its producers still do not. All of
// it survives a restart.
func TestMultiActive(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	ctx := context.Background()
	if _, err := c.CreateStaticTopic(ctx, "TopicTest", "clusterA", 50, []string{"a1", "a2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStaticTopic(ctx, "TopicTest", "clusterB", 50, []string{"b1", "b2"}); err != nil {
		t.Fatal(err)
	}
	// Consumers commit logic offsets through the ordinary path, in the same logs.
	if err := c.Commit(ctx, "cg", []OffsetCommit{{Topic: "TopicTest", Partition: 7, Offset: 1234}}); err != nil {
		t.Fatal(err)
	}

	expect := func(c *Coordinator, scope string, role statictopic.Role, want map[string]int) {
		t.Helper()
		r, err := c.Route("TopicTest", scope, role)
		if err != nil {
			t.Fatalf("Route(%s, %v): %v", scope, role, err)
		}
		got := routeScopes(r)
		if len(got) != len(want) {
			t.Fatalf("Route(%s, %v) sees %v, want %v", scope, role, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("Route(%s, %v) sees %v, want %v", scope, role, got, want)
			}
		}
	}
	own := func(scope string) map[string]int { return map[string]int{"__logic__" + scope: 50} }
	both := map[string]int{"__logic__clusterA": 50, "__logic__clusterB": 50}
	normal := func(c *Coordinator) {
		t.Helper()
		for _, s := range []string{"clusterA", "clusterB"} {
			expect(c, s, statictopic.Producer, own(s))
			expect(c, s, statictopic.Consumer, own(s))
		}
	}
	disaster := func(c *Coordinator) {
		t.Helper()
		expect(c, "clusterB", statictopic.Consumer, both)
		expect(c, "clusterB", statictopic.Producer, own("clusterB"))
		expect(c, "clusterA", statictopic.Producer, own("clusterA"))
	}
	normal(c)

	if err := c.SetGlobalRead(ctx, "clusterA", true); err != nil {
		t.Fatal(err)
	}
	disaster(c)
	c.Close()
	c = mustOpen(t, dir, testOptions())
	disaster(c)
	if s := c.Scopes(); len(s) != 2 || !s[0].GlobalRead || s[0].Scope != "clusterA" || s[1].GlobalRead || s[0].Topics != 1 {
		t.Fatalf("Scopes = %+v", s)
	}

	if err := c.SetGlobalRead(ctx, "clusterA", false); err != nil {
		t.Fatal(err)
	}
	normal(c)
	c.Close()
	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	normal(c)
	if v, ok, _ := c.Fetch("cg", "TopicTest", 7); !ok || v.Offset != 1234 {
		t.Fatalf("logic offset commit lost: %v %v", v, ok)
	}
}

// TestRemap creates a topic on b1,b2, moves queue 0 to b3 after b1's queue
// held 12,345 messages, and checks the new item and translation on both
// sides of the move, before and after a restart.
func TestRemap(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	ctx := context.Background()
	m, err := c.CreateStaticTopic(ctx, "orders", "clusterA", 4, []string{"b1", "b2"})
	if err != nil {
		t.Fatal(err)
	}
	old := m.Queues[0][0]
	if old.Broker != "b1" {
		t.Fatalf("queue 0 on %s, want b1 (least-loaded first, by name)", old.Broker)
	}
	m2, err := c.RemapStaticTopic(ctx, "orders", "clusterA", []statictopic.QueueMove{{QueueID: 0, ToBroker: "b3", OldLeaderMaxOffset: 12345}})
	if err != nil {
		t.Fatal(err)
	}
	if m2.Epoch <= m.Epoch {
		t.Fatalf("epoch did not grow: %d → %d", m.Epoch, m2.Epoch)
	}
	check := func(c *Coordinator) {
		t.Helper()
		items := mustMapping(t, c, "orders", "clusterA").Queues[0]
		if len(items) != 2 || items[0].EndOffset != 12345 || items[1].LogicOffset != 20000 || items[1].Broker != "b3" || items[1].Gen != 1 {
			t.Fatalf("queue 0 items = %+v", items)
		}
		broker, pq, po, err := c.Translate("orders", "clusterA", 0, 100)
		if err != nil || broker != "b1" || pq != old.QueueID || po != 100 {
			t.Fatalf("Translate(100) = %s %d %d %v", broker, pq, po, err)
		}
		broker, _, po, err = c.Translate("orders", "clusterA", 0, 20005)
		if err != nil || broker != "b3" || po != 5 {
			t.Fatalf("Translate(20005) = %s %d %v", broker, po, err)
		}
		if _, _, _, err := c.Translate("orders", "clusterA", 0, 15000); !errors.Is(err, statictopic.ErrOutOfRange) {
			t.Fatalf("Translate in the gap = %v, want ErrOutOfRange", err)
		}
		if _, _, _, err := c.Translate("orders", "clusterA", 0, 12345); !errors.Is(err, statictopic.ErrOutOfRange) {
			t.Fatalf("Translate at the sealed end = %v, want ErrOutOfRange", err)
		}
		q, lo, err := c.TranslateToLogic("orders", "clusterA", "b3", items[1].QueueID, 5)
		if err != nil || q != 0 || lo != 20005 {
			t.Fatalf("TranslateToLogic = %d %d %v", q, lo, err)
		}
		r, err := c.Route("orders", "clusterA", statictopic.Producer)
		if err != nil || r.Queues[0].Broker != "b3" || r.Queues[0].PhysicalQueueID != items[1].QueueID {
			t.Fatalf("Route after remap = %+v %v", r, err)
		}
	}
	check(c)
	c.Close()
	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	check(c)
}

func mustMapping(t *testing.T, c *Coordinator, topic, scope string) statictopic.Mapping {
	t.Helper()
	m, ok, err := c.StaticTopic(topic, scope)
	if err != nil || !ok {
		t.Fatalf("StaticTopic(%s, %s) = %v %v", topic, scope, ok, err)
	}
	return m
}

func TestStaticTopicRules(t *testing.T) {
	c := mustOpen(t, t.TempDir(), testOptions())
	defer c.Close()
	ctx := context.Background()
	m, err := c.CreateStaticTopic(ctx, "t", "clusterA", 4, []string{"b1"})
	if err != nil {
		t.Fatal(err)
	}
	// Same count: nothing changes.
	same, err := c.CreateStaticTopic(ctx, "t", "clusterA", 4, []string{"b1"})
	if err != nil || same.Epoch != m.Epoch {
		t.Fatalf("repeat create = %v %v", same.Epoch, err)
	}
	// Same count on other brokers is refused, naming what differs; no
	// broker is silently ignored.
	for _, brokers := range [][]string{{"b2"}, {"b1", "b2"}} {
		if _, err := c.CreateStaticTopic(ctx, "t", "clusterA", 4, brokers); !errors.Is(err, statictopic.ErrTopicExists) {
			t.Fatalf("create again on %v = %v, want ErrTopicExists", brokers, err)
		}
	}
	if got := mustMapping(t, c, "t", "clusterA"); got.Epoch != m.Epoch {
		t.Fatalf("a refused create changed the epoch to %d", got.Epoch)
	}
	// Grow keeps the existing queues.
	grown, err := c.CreateStaticTopic(ctx, "t", "clusterA", 6, []string{"b1", "b2"})
	if err != nil || grown.TotalQueues != 6 || grown.Queues[0][0] != m.Queues[0][0] || grown.Epoch <= m.Epoch {
		t.Fatalf("grow = %+v %v", grown, err)
	}
	// Repeating the grow (a retry) is the same request: nothing changes.
	if again, err := c.CreateStaticTopic(ctx, "t", "clusterA", 6, []string{"b2", "b1"}); err != nil || again.Epoch != grown.Epoch {
		t.Fatalf("repeated grow = %v %v", again.Epoch, err)
	}
	if _, err := c.CreateStaticTopic(ctx, "t", "clusterA", 3, []string{"b1"}); !errors.Is(err, statictopic.ErrInvalid) {
		t.Fatalf("shrink = %v, want ErrInvalid", err)
	}
	// The global scope excludes the same name in a cluster scope, and the reverse.
	if _, err := c.CreateStaticTopic(ctx, "t", "global", 4, []string{"b1"}); !errors.Is(err, statictopic.ErrScopeConflict) {
		t.Fatalf("global over cluster = %v, want ErrScopeConflict", err)
	}
	if _, err := c.CreateStaticTopic(ctx, "g", "global", 4, []string{"b1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStaticTopic(ctx, "g", "clusterB", 4, []string{"b1"}); !errors.Is(err, statictopic.ErrScopeConflict) {
		t.Fatalf("cluster over global = %v, want ErrScopeConflict", err)
	}
	if _, err := c.CreateStaticTopic(ctx, "t", "bad scope!", 4, []string{"b1"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad scope = %v, want ErrInvalid", err)
	}
	// Epoch fencing of whole-mapping puts.
	stored := mustMapping(t, c, "t", "clusterA")
	if err := c.PutStaticTopic(ctx, stored); err != nil {
		t.Fatalf("equal epoch, identical content: %v", err)
	}
	lower := stored.Clone()
	lower.Epoch--
	if err := c.PutStaticTopic(ctx, lower); !errors.Is(err, statictopic.ErrStaleEpoch) {
		t.Fatalf("lower epoch = %v", err)
	}
	different := stored.Clone()
	different.Queues[0][0].TimeOfStart++
	if err := c.PutStaticTopic(ctx, different); !errors.Is(err, statictopic.ErrEpochConflict) {
		t.Fatalf("equal epoch, other content = %v", err)
	}
	higher := different.Clone()
	higher.Epoch += 5
	if err := c.PutStaticTopic(ctx, higher); err != nil {
		t.Fatalf("higher epoch = %v", err)
	}
	if got := mustMapping(t, c, "t", "clusterA"); !got.Equal(higher) {
		t.Fatalf("stored %+v, want %+v", got, higher)
	}
	if _, err := c.RemapStaticTopic(ctx, "missing", "clusterA", []statictopic.QueueMove{{QueueID: 0, ToBroker: "b9"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remap of a missing topic = %v", err)
	}
	if err := c.SetGlobalRead(ctx, "global", true); !errors.Is(err, ErrInvalid) {
		t.Fatalf("global read of the global scope = %v", err)
	}
	if n := len(c.StaticTopics()); n != 2 {
		t.Fatalf("StaticTopics has %d, want 2", n)
	}
}
