package coordinator

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// fixtureGroup is a group as testdata/format1/state.json holds it.
type fixtureGroup struct {
	Info    GroupInfo
	Offsets []PartitionOffset
}

// fixtureState is what a coordinator serves, in the shape of the fixture.
func fixtureState(t *testing.T, c *Coordinator) []byte {
	t.Helper()
	groups := map[string]fixtureGroup{}
	for _, g := range c.Groups() {
		offs, info, err := c.GroupOffsets(g)
		if err != nil {
			t.Fatal(err)
		}
		groups[g] = fixtureGroup{info, offs}
	}
	b, err := json.MarshalIndent(map[string]any{"groups": groups, "topics": c.StaticTopics(), "scopes": c.Scopes()}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestUpgradeFormat1 opens a data directory written by the release that
// kept a log per partition (testdata/format1/data, with what that release
// served from it in state.json): it must serve exactly the same state,
// versions included, in the new format, take new commits with higher
// versions, and open again.
func TestUpgradeFormat1(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/format1/data")); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/format1/state.json")
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions()
	opts.Partitions = 4
	opts.Retention = 0
	c := mustOpen(t, dir, opts)
	if got := fixtureState(t, c); string(got) != string(want) {
		t.Fatalf("state after the upgrade differs from what the previous release served:\n got %s\nwant %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "p0000")); !os.IsNotExist(err) {
		t.Fatalf("the old partition directory is still there: %v", err)
	}
	before, _, _ := c.Group("group-00")
	v, err := c.CommitGeneration(context.Background(), "group-00", 3, []OffsetCommit{{Topic: "late", Partition: 1, Offset: 9, LeaderEpoch: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if v <= before.Version {
		t.Fatalf("a commit after the upgrade got version %d, not above the old %d", v, before.Version)
	}
	after := fixtureState(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	layout, err := ReadLayout(dir)
	if err != nil || layout.Format != dataFormat {
		t.Fatalf("layout after the upgrade: %+v, %v", layout, err)
	}
	c = mustOpen(t, dir, opts)
	defer c.Close()
	if got := fixtureState(t, c); string(got) != string(after) {
		t.Fatalf("state after a reopen differs:\n got %s\nwant %s", got, after)
	}
}

// TestUpgradeInterrupted: a conversion that stopped before it rewrote the
// meta file leaves a partial new layout beside the old one; the next Open
// starts the conversion over and serves the same state.
func TestUpgradeInterrupted(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/format1/data")); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("testdata/format1/state.json")
	// What a conversion leaves before its commit point: new snapshots of
	// some partitions and a journal with garbage in it.
	for _, d := range []string{SnapshotDir(dir, 0), JournalDir(dir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(SnapshotDir(dir, 0), "snap.00000000000000099999"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(JournalDir(dir), "00000000000000000001"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := testOptions()
	opts.Partitions = 4
	opts.Retention = 0
	c := mustOpen(t, dir, opts)
	defer c.Close()
	if got := fixtureState(t, c); string(got) != string(want) {
		t.Fatalf("state after an interrupted upgrade differs:\n got %s\nwant %s", got, want)
	}
}

// TestUpgradeFormat2 opens a data directory written by the release before
// the compact snapshot format (testdata/format2/data: a shared journal,
// snapshots of groups as whole keys, then a journal tail with commits,
// deletes and a mapping; state.json is what that release served). It must
// serve exactly the same state, load from the old snapshots rather than
// replay the journal, write a snapshot in the new format, and open from it
// again with the same state.
func TestUpgradeFormat2(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/format2/data")); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/format2/state.json")
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions()
	opts.Partitions = 4
	opts.Retention = KeepForever
	opts.SnapshotBytes = NoSnapshots
	c := mustOpen(t, dir, opts)
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fixtureState(t, c); string(got) != string(want) {
		t.Fatalf("state differs from what the previous release served:\n got %s\nwant %s", got, want)
	}
	replayed := 0
	for _, p := range c.Stats() {
		replayed += p.LoadRecords
	}
	if replayed != 4 { // the tail after the snapshot: 2 commits, a delete, a mapping
		t.Fatalf("replayed %d journal records; want the 4 after the old snapshots", replayed)
	}
	if err := c.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, dir, opts)
	defer c.Close()
	if got := fixtureState(t, c); string(got) != string(want) {
		t.Fatalf("state after a snapshot in the new format differs:\n got %s\nwant %s", got, want)
	}
	replayed = 0
	for _, p := range c.Stats() {
		replayed += p.LoadRecords
	}
	if replayed != 0 {
		t.Fatalf("replayed %d journal records after a snapshot of everything", replayed)
	}
}
