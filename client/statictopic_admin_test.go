package client_test

import (
	"errors"
	"testing"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/server"
	"github.com/offsetd/offsetd/statictopic"
)

// TestStaticTopicTools runs the operator's calls through a real server: the
// gap rule, the sealed-history fence, export and import, remap to a broker
// set, the readers view and a trim.
func TestStaticTopicTools(t *testing.T) {
	ts, _ := newServer(t, server.Options{}, false, nil)
	c := newClient(t, ts, client.Options{})
	ctx := t.Context()
	if _, err := c.CreateStaticTopic(ctx, "T", "clusterA", 4, []string{"b1", "b2"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.RemapStaticTopic(ctx, "T", "clusterA", []statictopic.QueueMove{{QueueID: 0, ToBroker: "b3", OldLeaderMaxOffset: 12345}})
	if err != nil {
		t.Fatal(err)
	}

	_, _, _, err = c.Translate(ctx, "T", "clusterA", 0, 15000)
	if next, ok := client.NextLogicOffset(err); !errors.Is(err, client.ErrOutOfRange) || !ok || next != 20000 {
		t.Fatalf("Translate in the gap: %v (next %d %v)", err, next, ok)
	}
	if _, ok := client.NextLogicOffset(errors.New("other")); ok {
		t.Fatal("NextLogicOffset of another error")
	}

	rewrite := m.Clone()
	rewrite.Epoch += 1000
	rewrite.Queues[0][0].LogicOffset = 1
	if err := c.PutStaticTopic(ctx, rewrite); !errors.Is(err, client.ErrSealedHistory) || !errors.Is(err, client.ErrConflict) {
		t.Fatalf("rewrite of a sealed item: %v, want ErrSealedHistory", err)
	}
	if err := c.ForcePutStaticTopic(ctx, rewrite); err != nil {
		t.Fatalf("forced rewrite: %v", err)
	}

	details, err := c.ExportStaticTopic(ctx, "T", "clusterA")
	if err != nil || len(details) != 3 {
		t.Fatalf("export: %+v %v", details, err)
	}
	back, err := c.ImportStaticTopic(ctx, "T", details, false)
	if err != nil || !back.Equal(rewrite) {
		t.Fatalf("import of the export: %+v %v", back, err)
	}

	plan, err := c.PlanRemapToBrokers(ctx, "T", "clusterA", []string{"b1", "b2"})
	if err != nil || len(plan.Moves) != 1 || plan.Moves[0].QueueID != 0 || plan.Epoch != rewrite.Epoch {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	remapped, err := c.RemapToBrokers(ctx, "T", "clusterA", []string{"b1", "b2"}, map[int32]int64{0: 9}, plan.Epoch)
	if err != nil || len(remapped.Queues[0]) != 3 {
		t.Fatalf("remap to b1,b2: %+v %v", remapped.Queues[0], err)
	}

	if _, err := c.Commit(ctx, "slow", -1, []client.OffsetCommit{{Topic: "T", Partition: 0, Offset: 7}}); err != nil {
		t.Fatal(err)
	}
	readers, err := c.StaticTopicReaders(ctx, "T", "clusterA")
	if err != nil || len(readers) != 4 || len(readers[0].Items[0].Groups) != 1 || readers[0].Items[0].Groups[0] != (statictopic.GroupReader{Group: "slow", Offset: 7}) {
		t.Fatalf("readers: %+v %v", readers, err)
	}
	if _, err := c.TrimStaticTopic(ctx, "T", "clusterA", nil, 20000, false); !errors.Is(err, client.ErrSealedHistory) {
		t.Fatalf("trim under a reader: %v", err)
	}
	if none, err := c.TrimStaticTopic(ctx, "T", "clusterA", []int32{}, 20000, true); err != nil || len(none.Queues[0]) != 3 {
		t.Fatalf("trim of no queues: %+v %v", none.Queues[0], err)
	}
	trimmed, err := c.TrimStaticTopic(ctx, "T", "clusterA", nil, 20000, true)
	if err != nil || len(trimmed.Queues[0]) != 2 {
		t.Fatalf("forced trim: %+v %v", trimmed.Queues[0], err)
	}
}
