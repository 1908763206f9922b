package coordinator

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/offsetd/offsetd/cache"
)

func TestDecodeRecord(t *testing.T) {
	commit := encodeCommit(nil, "g", 7, 1000, []OffsetCommit{{Topic: "t", Partition: 2, Offset: 42, LeaderEpoch: 3, Metadata: "m"}})
	r, err := DecodeRecord(recCommit, commit)
	if err != nil || r.Type != "commit" || r.Group != "g" || *r.Generation != 7 || len(r.Offsets) != 1 ||
		*r.Offsets[0].Offset != 42 || *r.Offsets[0].LeaderEpoch != 3 || r.Offsets[0].Metadata != "m" || r.Offsets[0].CommitTime != 1000 {
		t.Fatalf("commit = %+v %v", r, err)
	}
	snap := encodeSnapGroup(nil, "g", cache.GroupInfo{Version: 9, LastCommit: 5, Generation: 2}, 12,
		[]cache.Entry{{TopicPartition: cache.TopicPartition{Topic: "t", Partition: 1}, Offset: cache.Offset{Offset: 8, CommitTime: 4}}})
	if r, err := DecodeRecord(recSnapGroup, snap); err != nil || r.CapturedAt != 12 || r.Version != 9 || r.LastCommit != 5 || *r.Offsets[0].Offset != 8 {
		t.Fatalf("snapshot group = %+v %v", r, err)
	}
	del := encodeDeleteOffsets(nil, "g", []topicPartition{{Topic: "t", Partition: 1}})
	if r, err := DecodeRecord(recDeleteOffsets, del); err != nil || r.Offsets[0].Offset != nil || r.Offsets[0].Topic != "t" {
		t.Fatalf("delete offsets = %+v %v", r, err)
	}
	if r, err := DecodeRecord(recExpireGroups, encodeExpireGroups(nil, []string{"a", "b"})); err != nil || len(r.Groups) != 2 {
		t.Fatalf("expire = %+v %v", r, err)
	}
	if r, err := DecodeRecord(recGlobalRead, encodeGlobalRead(nil, "c1", true)); err != nil || r.Scope != "c1" || !*r.Enabled {
		t.Fatalf("global read = %+v %v", r, err)
	}
	if r, err := DecodeRecord(recMapping, []byte(`{"topic":"T"}`)); err != nil || !json.Valid(r.Mapping) {
		t.Fatalf("mapping = %+v %v", r, err)
	}
	// Every cut of a record, a trailing byte and an unknown type are corrupt.
	for n := range len(commit) {
		if _, err := DecodeRecord(recCommit, commit[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("commit cut to %d bytes: %v", n, err)
		}
	}
	for _, bad := range []struct {
		typ     byte
		payload []byte
	}{
		{recCommit, append(commit, 0)},
		{recGlobalRead, encodeGlobalRead(nil, "c1", true)[:3]},
		{recMapping, []byte("{")},
		{99, nil},
	} {
		if _, err := DecodeRecord(bad.typ, bad.payload); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("type %d payload %q: %v", bad.typ, bad.payload, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(recCommit, encodeCommit(nil, "g", -1, 1, []OffsetCommit{{Topic: "t", Offset: 1}}))
	f.Add(recExpireGroups, encodeExpireGroups(nil, []string{"a"}))
	f.Fuzz(func(t *testing.T, typ byte, payload []byte) {
		DecodeRecord(typ, payload) // must not panic or allocate without bound
	})
}
