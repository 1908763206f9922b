package coordinator

import (
	"encoding/json"
	"errors"
	"math"
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
	var w snapWriter
	f.Add(recSnapGroups, w.encode(nil, "g", cache.GroupInfo{LastCommit: 9}, 3, []cache.Entry{
		{TopicPartition: cache.TopicPartition{Topic: "t", Partition: 2}, Offset: cache.Offset{Offset: 5, Metadata: "m", CommitTime: 8}},
		{TopicPartition: cache.TopicPartition{Topic: "u", Partition: 0}, Offset: cache.Offset{Offset: 6, LeaderEpoch: 1}},
	}))
	f.Add(recSnapSizes, encodeSnapSizes(nil, 1, 2, 3))
	f.Add(recTxnCommit, encodeTxnCommit(nil, "g", 7, 1, -1, 5, []OffsetCommit{{Topic: "t", Offset: 1}}))
	f.Add(recTxnEnd, encodeTxnEnd(nil, "g", 7, 2, true, []txnOffset{{topicPartition: topicPartition{Topic: "t"}, Offset: cache.Offset{Offset: 1}}}))
	f.Add(recSnapTxn, encodeSnapTxn(nil, "g", 7, 2, []txnOffset{{topicPartition: topicPartition{Topic: "t"}, at: 9, superseded: true}}))
	f.Fuzz(func(t *testing.T, typ byte, payload []byte) {
		DecodeRecord(typ, payload) // must not panic or allocate without bound
	})
}

// TestSnapGroupsRoundTrip encodes a group's entries in the compact
// snapshot format and decodes them back, whatever changes from one offset
// to the next: partition gaps and negative numbers, leader epochs,
// metadata, commit times, offsets going down, topics.
func TestSnapGroupsRoundTrip(t *testing.T) {
	info := cache.GroupInfo{Version: 90, LastCommit: 5000, Generation: 4}
	e := func(topic string, p int32, off int64, epoch int32, md string, at int64) cache.Entry {
		return cache.Entry{TopicPartition: cache.TopicPartition{Topic: topic, Partition: p}, Offset: cache.Offset{Offset: off, LeaderEpoch: epoch, Metadata: md, CommitTime: at}}
	}
	entries := []cache.Entry{
		e("a", -3, -1, -1, "", 5000),
		e("a", 0, 1<<40, 2, "m1", 4999),
		e("a", 1, 1<<40+1, 2, "m1", 4999),
		e("a", 2, 7, 2, "m2", 4999),
		e("a", 1<<31-1, math.MaxInt64, math.MaxInt32, "m1", math.MinInt64),
		e("b", 0, 3, -1, "", 6000),
		e("b", 1000, 2, 5, "m2", 1),
	}
	var w snapWriter
	payload := w.encode(nil, "g", info, 77, entries)
	r, err := DecodeRecord(recSnapGroups, payload)
	if err != nil || r.Group != "g" || r.CapturedAt != 77 || r.Version != 90 || r.LastCommit != 5000 || *r.Generation != 4 || len(r.Offsets) != len(entries) {
		t.Fatalf("decoded %+v, %v", r, err)
	}
	for i, o := range r.Offsets {
		x := entries[i]
		if o.Topic != x.Topic || o.Partition != x.Partition || *o.Offset != x.Offset.Offset || *o.LeaderEpoch != x.LeaderEpoch ||
			o.Metadata != x.Metadata || o.CommitTime != x.CommitTime {
			t.Fatalf("offset %d = %+v, want %+v", i, o, x)
		}
	}
	// Runs of like offsets take two bytes each.
	var run []cache.Entry
	for p := range int32(1000) {
		run = append(run, e("orders", p, 1<<33+int64(p), 3, "consumer-1", 1234))
	}
	if n := len(w.encode(nil, "g", cache.GroupInfo{LastCommit: 1234}, 1, run)); n > 2*len(run)+50 {
		t.Fatalf("%d offsets took %d bytes", len(run), n)
	}
	for n := range len(payload) {
		if _, err := DecodeRecord(recSnapGroups, payload[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("record cut to %d bytes: %v", n, err)
		}
	}
	if _, err := DecodeRecord(recSnapGroups, append(payload, 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a trailing byte: %v", err)
	}
	sizes := encodeSnapSizes(nil, 1, 2, 3)
	if r, err := DecodeRecord(recSnapSizes, sizes); err != nil || len(r.Sizes) != 3 || r.Sizes[2] != 3 {
		t.Fatalf("sizes = %+v %v", r, err)
	}
}
