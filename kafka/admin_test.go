package kafka

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestAdminClient drives the listener with franz-go's admin client: what it
// commits is what the coordinator holds, and lists, describes and deletes
// see the same groups.
func TestAdminClient(t *testing.T) {
	ctx := testContext(t)
	c := openCoordinator(t, t.TempDir())
	addr := listen(t, newHandler(t, c, testHandlerOptions()), ServerOptions{})
	adm := newAdmin(t, addr)

	var os kadm.Offsets
	os.AddOffset("orders", 0, 42, -1)
	os.AddOffset("orders", 1, 7, 3)
	os.Add(kadm.Offset{Topic: "payments", Partition: 2, At: 100, LeaderEpoch: -1, Metadata: "by test"})
	if err := adm.CommitAllOffsets(ctx, "g1", os); err != nil {
		t.Fatalf("CommitAllOffsets: %v", err)
	}
	fetched, err := adm.FetchOffsets(ctx, "g1")
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	if err := fetched.Error(); err != nil {
		t.Fatalf("FetchOffsets partition error: %v", err)
	}
	stored, err := c.FetchGroup("g1")
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 3 {
		t.Fatalf("coordinator holds %d offsets, want 3", len(stored))
	}
	for _, s := range stored {
		got, ok := fetched.Lookup(s.Topic, s.Partition)
		if !ok {
			t.Fatalf("kadm did not fetch %s/%d", s.Topic, s.Partition)
		}
		if got.At != s.Offset.Offset || got.LeaderEpoch != s.LeaderEpoch || got.Metadata != s.Metadata {
			t.Errorf("%s/%d: kadm read %+v, coordinator holds %+v", s.Topic, s.Partition, got.Offset, s.Offset)
		}
	}

	// A second group, to list and describe.
	var os2 kadm.Offsets
	os2.AddOffset("orders", 0, 1, -1)
	if err := adm.CommitAllOffsets(ctx, "g2", os2); err != nil {
		t.Fatal(err)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if got := listed.Groups(); !slices.Equal(got, []string{"g1", "g2"}) {
		t.Errorf("ListGroups = %v, want [g1 g2]", got)
	}
	if listed, err = adm.ListGroups(ctx, "Stable"); err != nil || len(listed) != 0 {
		t.Errorf("ListGroups(Stable) = %v, %v; want none", listed.Groups(), err)
	}
	described, err := adm.DescribeGroups(ctx, "g1", "missing")
	if err != nil {
		t.Fatalf("DescribeGroups: %v", err)
	}
	if d := described["g1"]; d.Err != nil || d.State != "Empty" {
		t.Errorf("g1 described as %q (%v), want Empty", d.State, d.Err)
	}
	if d := described["missing"]; d.State != "Dead" {
		t.Errorf("missing group described as %q (%v), want Dead", d.State, d.Err)
	}

	// Delete one topic's offsets, then a group.
	dels, err := adm.DeleteOffsets(ctx, "g1", kadm.TopicsSet{"orders": {0: {}, 1: {}}})
	if err != nil {
		t.Fatalf("DeleteOffsets: %v", err)
	}
	if err := dels.Error(); err != nil {
		t.Fatalf("DeleteOffsets partition error: %v", err)
	}
	if stored, _ := c.FetchGroup("g1"); len(stored) != 1 || stored[0].Topic != "payments" {
		t.Errorf("after DeleteOffsets the coordinator holds %+v, want only payments/2", stored)
	}
	deleted, err := adm.DeleteGroups(ctx, "g2", "never-was")
	if err != nil {
		t.Fatalf("DeleteGroups: %v", err)
	}
	if err := deleted["g2"].Err; err != nil {
		t.Errorf("DeleteGroups g2: %v", err)
	}
	if err := deleted["never-was"].Err; !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("DeleteGroups of an unknown group: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if got := c.Groups(); !slices.Equal(got, []string{"g1"}) {
		t.Errorf("coordinator groups after delete = %v, want [g1]", got)
	}
}

// TestAdminCommitRefusedWhole shows the atomic commit: one bad partition
// refuses the request, every partition carries the code, nothing is
// written.
func TestAdminCommitRefusedWhole(t *testing.T) {
	ctx := testContext(t)
	c := openCoordinator(t, t.TempDir())
	addr := listen(t, newHandler(t, c, testHandlerOptions()), ServerOptions{})
	adm := newAdmin(t, addr)

	var os kadm.Offsets
	os.AddOffset("orders", 0, 1, -1)
	os.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 2, LeaderEpoch: -1, Metadata: string(make([]byte, c.MaxMetadataBytes()+1))})
	resps, err := adm.CommitOffsets(ctx, "g", os)
	if err != nil {
		t.Fatal(err)
	}
	resps.Each(func(r kadm.OffsetResponse) {
		if !errors.Is(r.Err, kerr.OffsetMetadataTooLarge) {
			t.Errorf("%s/%d: %v, want OFFSET_METADATA_TOO_LARGE", r.Topic, r.Partition, r.Err)
		}
	})
	if got, _ := c.FetchGroup("g"); len(got) != 0 {
		t.Errorf("a refused commit wrote %+v", got)
	}
	if _, ok, _ := c.Group("g"); ok {
		t.Error("a refused commit created the group")
	}
}
