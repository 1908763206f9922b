package coordinator

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/offsetd/offsetd/log"
)

// closed reports whether a watch's channel is closed. Every call that
// changes state returns after its batch woke the watchers, so the answer is
// final when it is asked: no waiting is needed either way.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// sharing returns a name, made from prefix, that of puts in partition want.
func sharing(want int, prefix string, of func(string) int) string {
	for i := 0; ; i++ {
		if s := prefix + strconv.Itoa(i); of(s) == want {
			return s
		}
	}
}

// TestWatchGroup: a watch on a group is closed by the group's own changes
// (commit, delete of offsets, delete of the group, expiry), never by those
// of another group of its partition.
func TestWatchGroup(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	c := mustOpen(t, t.TempDir(), retentionOptions(clock))
	defer c.Close()
	ctx := context.Background()
	const a = "a"
	b := sharing(c.part.Group(a), "b", c.part.Group)
	commit := func(group string) {
		t.Helper()
		if err := c.Commit(ctx, group, []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	changes := []struct {
		name   string
		change func(group string) error
	}{
		{"commit", func(g string) error { return c.Commit(ctx, g, []OffsetCommit{{Topic: "t", Offset: 2}}) }},
		{"delete offsets", func(g string) error { return c.DeleteOffsets(ctx, g, "t") }},
		{"delete group", func(g string) error { commit(g); return c.DeleteGroup(ctx, g) }},
		{"expiry", func(g string) error {
			commit(g)
			clock.Advance(25 * time.Hour)
			_, err := c.ExpireGroups(ctx)
			return err
		}},
	}
	for _, ch := range changes {
		commit(a)
		commit(b)
		v0, changed, stop, err := c.WatchGroup(a)
		if err != nil {
			t.Fatal(err)
		}
		if ch.name != "expiry" { // expiry takes both: b goes first below
			if err := ch.change(b); err != nil {
				t.Fatalf("%s of %s: %v", ch.name, b, err)
			}
			if closed(changed) {
				t.Fatalf("%s of %s, in %s's partition, woke a watch of %s", ch.name, b, a, a)
			}
		}
		if err := ch.change(a); err != nil {
			t.Fatalf("%s of %s: %v", ch.name, a, err)
		}
		if !closed(changed) {
			t.Fatalf("%s of %s did not wake its watch", ch.name, a)
		}
		if v1, _, stop1, _ := c.WatchGroup(a); ch.name == "commit" && v1 <= v0 {
			t.Fatalf("version did not grow: %d → %d", v0, v1)
		} else {
			stop1()
		}
		stop()
	}
	for _, p := range c.parts {
		if n := len(p.watchers.groups) + len(p.watchers.topics); n != 0 {
			t.Fatalf("partition %d holds %d watches after every watcher stopped", p.id, n)
		}
	}
}

// TestWatchStaticTopic: a watch on a static topic is closed by a change of
// its mappings, not by commits of the groups in its partition nor by
// another topic's mappings there.
func TestWatchStaticTopic(t *testing.T) {
	c := mustOpen(t, t.TempDir(), testOptions())
	defer c.Close()
	ctx := context.Background()
	const topic = "T"
	if _, err := c.CreateStaticTopic(ctx, topic, "c1", 2, []string{"b1"}); err != nil {
		t.Fatal(err)
	}
	changed, _, stop, err := c.WatchStaticTopic(topic)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	group := sharing(c.part.Topic(topic), "g", c.part.Group)
	if err := c.Commit(ctx, group, []OffsetCommit{{Topic: topic, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	other := sharing(c.part.Topic(topic), "U", c.part.Topic)
	if _, err := c.CreateStaticTopic(ctx, other, "c1", 2, []string{"b1"}); err != nil {
		t.Fatal(err)
	}
	if closed(changed) {
		t.Fatalf("a commit of %s or a mapping of %s, in %s's partition, woke a watch of %s", group, other, topic, topic)
	}
	if _, err := c.CreateStaticTopic(ctx, topic, "c2", 2, []string{"b2"}); err != nil {
		t.Fatal(err)
	}
	if !closed(changed) {
		t.Fatal("a new mapping of the topic did not wake its watch")
	}
}

// The writer wakes watchers after every batch: with watchers present, a
// batch of commits of other groups costs it no allocation.
func TestWakeAllocatesNothing(t *testing.T) {
	var ws watchers
	_, stop := ws.watchGroup("watched")
	defer stop()
	entries := []log.Entry{
		{Type: recCommit, Payload: encodeCommit(nil, "a", -1, 1, []OffsetCommit{{Topic: "t", Offset: 1}})},
		{Type: recDeleteGroup, Payload: encodeDeleteGroup(nil, "b")},
		{Type: recExpireGroups, Payload: encodeExpireGroups(nil, []string{"c", "d"})},
	}
	if n := testing.AllocsPerRun(100, func() { ws.wake(entries) }); n != 0 {
		t.Fatalf("wake allocated %.0f times per batch", n)
	}
}
