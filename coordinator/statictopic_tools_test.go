package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/offsetd/offsetd/statictopic"
)

// lockedBuffer is a log sink safe for the writer goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// movedTopic creates "orders" in clusterA on b1,b2 (4 queues) and moves
// queue 0 to b3 with b1's queue sealed at 12,345.
func movedTopic(t *testing.T, c *Coordinator) statictopic.Mapping {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateStaticTopic(ctx, "orders", "clusterA", 4, []string{"b1", "b2"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.RemapStaticTopic(ctx, "orders", "clusterA", []statictopic.QueueMove{{QueueID: 0, ToBroker: "b3", OldLeaderMaxOffset: 12345}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPutKeepsSealedHistory(t *testing.T) {
	dir := t.TempDir()
	var logs lockedBuffer
	opts := testOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c := mustOpen(t, dir, opts)
	ctx := context.Background()
	stored := movedTopic(t, c)

	rewrite := stored.Clone()
	rewrite.Epoch += 1000
	rewrite.Queues[0][0].EndOffset = 12000 // the sealed b1 item now ends elsewhere
	err := c.PutStaticTopic(ctx, rewrite)
	if !errors.Is(err, statictopic.ErrHistory) || !strings.Contains(err.Error(), "queue 0") || !strings.Contains(err.Error(), "gen 0") {
		t.Fatalf("rewrite of a sealed item = %v, want ErrHistory naming queue 0 gen 0", err)
	}
	if got := mustMapping(t, c, "orders", "clusterA"); !got.Equal(stored) {
		t.Fatalf("a refused put changed the mapping: %+v", got)
	}
	if c.ForcedChanges() != 0 || strings.Contains(logs.String(), "forced") {
		t.Fatalf("refused put counted or logged as forced: %d\n%s", c.ForcedChanges(), logs.String())
	}
	// Appending and sealing the leader is allowed.
	grow := stored.Clone()
	grow.Epoch += 1000
	grow.Queues[0][1].EndOffset, grow.Queues[0][1].TimeOfEnd = 50, 99
	if err := c.PutStaticTopic(ctx, grow); err != nil {
		t.Fatalf("sealing the leader: %v", err)
	}
	// Force that overrides nothing is not counted.
	grow.Epoch += 1000
	if err := c.ForcePutStaticTopic(ctx, grow); err != nil || c.ForcedChanges() != 0 {
		t.Fatalf("forced put that keeps history: %v, counted %d", err, c.ForcedChanges())
	}
	rewrite.Epoch = grow.Epoch + 1000
	if err := c.ForcePutStaticTopic(ctx, rewrite); err != nil {
		t.Fatalf("forced rewrite: %v", err)
	}
	if c.ForcedChanges() != 1 || !strings.Contains(logs.String(), "forced change overrides a check") || !strings.Contains(logs.String(), "sealed item gen 0 rewritten") {
		t.Fatalf("forced change: count %d, log:\n%s", c.ForcedChanges(), logs.String())
	}
	c.Close()
	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	if got := mustMapping(t, c, "orders", "clusterA"); !got.Equal(rewrite) {
		t.Fatalf("after restart %+v, want the forced %+v", got, rewrite)
	}
}

// rocketMQDetails reads the statictopic package's sample of TopicTest as
// two RocketMQ brokers hold it after logic queue 0 moved from broker-a to
// broker-b: the old leader still open.
func rocketMQDetails(t *testing.T) []statictopic.Detail {
	t.Helper()
	b, err := os.ReadFile("../statictopic/testdata/rocketmq_remapped.json")
	if err != nil {
		t.Fatal(err)
	}
	var details []statictopic.Detail
	if err := json.Unmarshal(b, &details); err != nil {
		t.Fatal(err)
	}
	return details
}

func TestImportExportRocketMQ(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	ctx := context.Background()
	details := rocketMQDetails(t)
	imported, err := c.ImportStaticTopic(ctx, details, false)
	if err != nil {
		t.Fatal(err)
	}
	check := func(c *Coordinator) {
		t.Helper()
		for _, tt := range []struct {
			logic    int64
			broker   string
			physical int64
		}{{19999, "broker-a", 19999}, {20003, "broker-b", 3}} {
			b, _, po, err := c.Translate("TopicTest", "global", 0, tt.logic)
			if err != nil || b != tt.broker || po != tt.physical {
				t.Fatalf("Translate(%d) = %s %d %v", tt.logic, b, po, err)
			}
		}
		out, err := c.ExportStaticTopic("TopicTest", "global")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(out)
		var again []statictopic.Detail
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatal(err)
		}
		back, err := statictopic.Import(again)
		if err != nil || !back.Equal(imported) {
			t.Fatalf("export does not import back: %v\n%+v\n%+v", err, back, imported)
		}
	}
	check(c)
	// The same details again: an idempotent repeat.
	if _, err := c.ImportStaticTopic(ctx, details, false); err != nil {
		t.Fatalf("repeat import: %v", err)
	}
	bad := append([]statictopic.Detail(nil), details[1:]...)
	if _, err := c.ImportStaticTopic(ctx, bad, false); !errors.Is(err, ErrInvalid) {
		t.Fatalf("import missing a queue = %v, want ErrInvalid", err)
	}
	c.Close()
	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	check(c)
}

func TestRemapToBrokers(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	ctx := context.Background()
	before, err := c.CreateStaticTopic(ctx, "orders", "clusterA", 8, []string{"b1", "b2"})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := c.PlanStaticTopicRemap("orders", "clusterA", []string{"b1", "b2", "b3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Moves) != 2 || plan.Epoch != before.Epoch {
		t.Fatalf("plan = %+v, want 2 moves on epoch %d", plan, before.Epoch)
	}
	if got := mustMapping(t, c, "orders", "clusterA"); !got.Equal(before) {
		t.Fatal("the dry run changed the mapping")
	}
	offsets := map[int32]int64{}
	for _, mv := range plan.Moves {
		if mv.ToBroker != "b3" || mv.OldLeaderMaxOffset != -1 {
			t.Fatalf("move %+v", mv)
		}
		offsets[mv.QueueID] = 100 + int64(mv.QueueID)
	}
	brokers := []string{"b3", "b2", "b1"}
	if _, err := c.RemapStaticTopicToBrokers(ctx, "orders", "clusterA", brokers, nil, plan.Epoch); !errors.Is(err, ErrInvalid) {
		t.Fatalf("apply without max offsets = %v, want ErrInvalid", err)
	}
	if _, err := c.RemapStaticTopicToBrokers(ctx, "orders", "clusterA", brokers, offsets, plan.Epoch-1); !errors.Is(err, statictopic.ErrStaleEpoch) {
		t.Fatalf("apply on another epoch = %v, want ErrStaleEpoch", err)
	}
	extra := map[int32]int64{99: 1}
	for q, v := range offsets {
		extra[q] = v
	}
	if _, err := c.RemapStaticTopicToBrokers(ctx, "orders", "clusterA", brokers, extra, plan.Epoch); !errors.Is(err, ErrInvalid) {
		t.Fatalf("apply with an offset for a queue that does not move = %v, want ErrInvalid", err)
	}
	if got := mustMapping(t, c, "orders", "clusterA"); !got.Equal(before) {
		t.Fatal("a refused apply changed the mapping")
	}
	after, err := c.RemapStaticTopicToBrokers(ctx, "orders", "clusterA", brokers, offsets, plan.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	check := func(m statictopic.Mapping) {
		t.Helper()
		if m.Epoch <= before.Epoch {
			t.Fatalf("epoch %d not above %d", m.Epoch, before.Epoch)
		}
		leads := map[string]int{}
		moved := 0
		for q := int32(0); q < m.TotalQueues; q++ {
			items := m.Queues[q]
			leads[items[len(items)-1].Broker]++
			if len(items) == 2 {
				moved++
				if items[0].EndOffset != offsets[q] {
					t.Fatalf("queue %d sealed at %d, want %d", q, items[0].EndOffset, offsets[q])
				}
			}
		}
		if moved != 2 || leads["b1"] != 3 || leads["b2"] != 3 || leads["b3"] != 2 {
			t.Fatalf("after the remap: %d moved, leads %v", moved, leads)
		}
	}
	check(after)
	// Applying again finds nothing to move and writes nothing.
	again, err := c.RemapStaticTopicToBrokers(ctx, "orders", "clusterA", brokers, nil, 0)
	if err != nil || again.Epoch != after.Epoch {
		t.Fatalf("second apply = epoch %d %v", again.Epoch, err)
	}
	c.Close()
	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	check(mustMapping(t, c, "orders", "clusterA"))
}

func TestTranslateGapRule(t *testing.T) {
	c := mustOpen(t, t.TempDir(), testOptions())
	defer c.Close()
	movedTopic(t, c)
	for _, logic := range []int64{12345, 15000, 19999} {
		_, _, _, err := c.Translate("orders", "clusterA", 0, logic)
		if next, ok := statictopic.NextLogicOffset(err); !errors.Is(err, statictopic.ErrOutOfRange) || !ok || next != 20000 {
			t.Errorf("Translate(%d) = %v; next %d %v, want 20000", logic, err, next, ok)
		}
	}
}

// readers returns, for logic queue q, the groups reading each item.
func readers(t *testing.T, c *Coordinator, q int32) [][]string {
	t.Helper()
	rs, err := c.StaticTopicReaders("orders", "clusterA")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, it := range rs[q].Items {
		var gs []string
		for _, g := range it.Groups {
			gs = append(gs, g.Group)
		}
		out = append(out, gs)
	}
	return out
}

func TestTrimWithReaders(t *testing.T) {
	dir := t.TempDir()
	c := mustOpen(t, dir, testOptions())
	ctx := context.Background()
	stored := movedTopic(t, c)
	commit := func(group string, offset int64) {
		t.Helper()
		if err := c.Commit(ctx, group, []OffsetCommit{{Topic: "orders", Partition: 0, Offset: offset}}); err != nil {
			t.Fatal(err)
		}
	}
	commit("slow", 500)
	commit("gap", 15000) // read all of b1's item: the gap rule sends it to b3
	commit("fast", 20005)
	if got := readers(t, c, 0); len(got) != 2 || strings.Join(got[0], ",") != "slow" || strings.Join(got[1], ",") != "fast,gap" {
		t.Fatalf("readers of queue 0 = %v", got)
	}
	_, err := c.TrimStaticTopic(ctx, "orders", "clusterA", nil, 20000, false)
	if !errors.Is(err, statictopic.ErrHistory) || !strings.Contains(err.Error(), `"slow"`) {
		t.Fatalf("trim while slow reads the item = %v, want ErrHistory naming slow", err)
	}
	if got := mustMapping(t, c, "orders", "clusterA"); !got.Equal(stored) {
		t.Fatal("a refused trim changed the mapping")
	}
	commit("slow", 12345) // done with b1's item; the gap rule sends it to b3
	trimmed, err := c.TrimStaticTopic(ctx, "orders", "clusterA", nil, 20000, false)
	if err != nil {
		t.Fatalf("trim after the group moved on: %v", err)
	}
	check := func(c *Coordinator) {
		t.Helper()
		m := mustMapping(t, c, "orders", "clusterA")
		if !m.Equal(trimmed) || m.Epoch <= stored.Epoch || len(m.Queues[0]) != 1 || m.Queues[0][0].Broker != "b3" {
			t.Fatalf("trimmed mapping = %+v", m)
		}
		if len(m.Reserved) != 1 || m.Reserved[0] != (statictopic.ReservedQueueIDs{Broker: "b1", Below: stored.Queues[0][0].QueueID + 1}) {
			t.Fatalf("reserved = %+v", m.Reserved)
		}
		_, _, _, err := c.Translate("orders", "clusterA", 0, 500)
		if next, ok := statictopic.NextLogicOffset(err); !ok || next != 20000 {
			t.Fatalf("Translate(500) after the trim = %v", err)
		}
		if got := readers(t, c, 0); len(got) != 1 || strings.Join(got[0], ",") != "fast,gap,slow" {
			t.Fatalf("readers after the trim = %v", got)
		}
	}
	check(c)
	// The trimmed mapping and its reserved ids also survive in a snapshot.
	if err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = mustOpen(t, dir, testOptions())
	defer c.Close()
	check(c)
	// A move back to b1 takes a fresh physical queue, and a forced trim
	// drops an item a group still reads.
	m, err := c.RemapStaticTopic(ctx, "orders", "clusterA", []statictopic.QueueMove{{QueueID: 0, ToBroker: "b1", OldLeaderMaxOffset: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if it := m.Queues[0][1]; it.Broker != "b1" || it.QueueID < m.Reserved[0].Below {
		t.Fatalf("move back to b1 reuses a trimmed physical queue: %+v", it)
	}
	if _, err := c.TrimStaticTopic(ctx, "orders", "clusterA", []int32{0}, 1<<40, false); !errors.Is(err, statictopic.ErrHistory) {
		t.Fatalf("trim of the b3 item = %v, want ErrHistory", err)
	}
	m, err = c.TrimStaticTopic(ctx, "orders", "clusterA", []int32{0}, 1<<40, true)
	if err != nil || len(m.Queues[0]) != 1 || c.ForcedChanges() != 1 {
		t.Fatalf("forced trim = %+v %v (forced %d)", m.Queues[0], err, c.ForcedChanges())
	}
}
