package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func retentionOptions(clock *fakeClock) Options {
	o := testOptions()
	o.Partitions = 4
	o.Now = clock.Now
	o.Retention = 24 * time.Hour
	o.RetentionCheckInterval = time.Hour // the test expires by hand
	return o
}

func TestRetention(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	opts := retentionOptions(clock)
	c := mustOpen(t, dir, opts)
	ctx := context.Background()
	commit := func(group string, part int32, off int64) {
		t.Helper()
		if err := c.Commit(ctx, group, []OffsetCommit{{Topic: "t", Partition: part, Offset: off}}); err != nil {
			t.Fatal(err)
		}
	}
	commit("idle", 0, 1)
	commit("active", 0, 1) // partition 0 of "active" is never committed again
	commit("active", 1, 1)
	clock.Advance(20 * time.Hour)
	commit("active", 1, 2)
	clock.Advance(5 * time.Hour) // idle: 25h without a commit; active: 5h

	n, err := c.ExpireGroups(ctx)
	if err != nil || n != 1 {
		t.Fatalf("ExpireGroups = %d %v, want 1", n, err)
	}
	if _, ok, _ := c.Group("idle"); ok {
		t.Fatal("idle group not expired")
	}
	if v, ok, _ := c.Fetch("active", "t", 0); !ok || v.Offset != 1 {
		t.Fatal("the idle partition of an active group expired")
	}
	if n, _ := c.ExpireGroups(ctx); n != 0 {
		t.Fatalf("second sweep expired %d", n)
	}

	// Expiry survives a restart.
	c.Close()
	c = mustOpen(t, dir, opts)
	if _, ok, _ := c.Group("idle"); ok {
		t.Fatal("expired group came back after restart")
	}
	// A deleted group can commit again, and recommitting keeps it alive.
	commit("idle", 0, 7)
	clock.Advance(23 * time.Hour)
	if n, _ := c.ExpireGroups(ctx); n != 1 { // "active" is now 28h idle
		t.Fatalf("expired %d, want only active", n)
	}
	if v, ok, _ := c.Fetch("idle", "t", 0); !ok || v.Offset != 7 {
		t.Fatalf("recommitted group = %v %v", v, ok)
	}
	c.Close()
}

// TestRetentionBatches expires more groups than one record holds.
func TestRetentionBatches(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	opts := retentionOptions(clock)
	opts.Partitions = 1
	opts.UnsafeNoSync = true
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	const groups = 2*maxExpirePerRecord + 10
	for g := range groups {
		if err := c.Commit(context.Background(), fmt.Sprintf("g%05d", g), []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	before := c.d.journal.LastIndex()
	clock.Advance(48 * time.Hour)
	n, err := c.ExpireGroups(context.Background())
	if err != nil || n != groups {
		t.Fatalf("ExpireGroups = %d %v, want %d", n, err, groups)
	}
	if records := c.d.journal.LastIndex() - before; records != 3 {
		t.Fatalf("expiry wrote %d records, want 3 of at most %d groups", records, maxExpirePerRecord)
	}
	if g := c.Groups(); len(g) != 0 {
		t.Fatalf("%d groups left", len(g))
	}
}

func TestRetentionOff(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	opts := retentionOptions(clock)
	opts.Retention = KeepForever
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	if err := c.Commit(context.Background(), "g", []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * 365 * 24 * time.Hour)
	if n, err := c.ExpireGroups(context.Background()); n != 0 || err != nil {
		t.Fatalf("ExpireGroups with KeepForever = %d %v", n, err)
	}
}
