package server

import (
	"reflect"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/internal/wire"
)

// groupOffsetsJSON is a group's answer as encoding/json wrote it before
// package wire did.
type groupOffsetsJSON struct {
	Group      string        `json:"group"`
	Version    uint64        `json:"version"`
	Generation int32         `json:"generation"`
	Offsets    []wire.Offset `json:"offsets"`
}

// FuzzEncodeGroupOffsets: a group's answer is byte for byte what
// encoding/json wrote, whatever its names hold.
func FuzzEncodeGroupOffsets(f *testing.F) {
	f.Add("g", "t", "m", "")
	f.Add("<g&>", "t\u2028", "\xff", "t\u2028")
	f.Fuzz(func(t *testing.T, group, topic, metadata, filter string) {
		offsets := []coordinator.PartitionOffset{
			{Topic: topic, Partition: 0, Offset: coordinator.Offset{Offset: 1, LeaderEpoch: -1, Metadata: metadata, CommitTime: time.UnixMilli(1700000000000)}},
			{Topic: topic + "x", Partition: 3, Offset: coordinator.Offset{Offset: -1, LeaderEpoch: 2, CommitTime: time.UnixMilli(5)}},
		}
		info := coordinator.GroupInfo{Version: 42, Generation: -1}
		want := groupOffsetsJSON{Group: group, Version: info.Version, Generation: info.Generation, Offsets: []wire.Offset{}}
		for _, o := range offsets {
			if filter == "" || o.Topic == filter {
				want.Offsets = append(want.Offsets, wire.Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTime: o.CommitTime.UnixMilli()})
			}
		}
		wb, _ := marshal(want)
		got, _, _ := encodeGroupOffsets(group, filter, offsets, info)
		if string(got) != string(wb) {
			t.Fatalf("encoded %s, want %s", got, wb)
		}
	})
}

// FuzzDecodeCommit: what the fast path accepts, the strict decoder accepts
// with the same result; so the fast path changes no answer, only its cost.
func FuzzDecodeCommit(f *testing.F) {
	for _, seed := range []string{
		`{"generation":-1,"offsets":[{"topic":"t","partition":0,"offset":42,"leaderEpoch":-1,"metadata":""}]}`,
		`{"offsets":[{"topic":"t","partition":0,"offset":1},{"topic":"t","partition":1,"offset":2,"metadata":"m"}]}`,
		`{"offsets":[]}`, `{"offsets":null}`, `{}`, `{"offsets":[{"topic":"t","partition":0}]}`,
		`{"offsets":[{"topic":"t","partition":0,"offset":1,"offset":2}]}`, `{"generation":1,"generation":2,"offsets":[]}`,
		`{"offsets":[{"Topic":"t","partition":0,"offset":1}]}`, `{"offsets":[{"topic":"\ud800","partition":0,"offset":1}]}`,
		`{"offsets":[{"topic":"t","partition":2147483648,"offset":1}]}`, `{"offsets":[]} {}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		gen, offsets, ok := decodeCommit(body)
		if !ok {
			return
		}
		var req commitRequest
		if e := decodeJSON(body, &req); e != nil {
			t.Fatalf("fast path accepted %q, the strict decoder refused it: %v", body, e)
		}
		wantGen, want, e := req.offsets()
		if e != nil {
			t.Fatalf("fast path accepted %q, the strict decoder refused it: %v", body, e)
		}
		if gen != wantGen || !reflect.DeepEqual(offsets, want) {
			t.Fatalf("%q: fast path read %d %+v, the strict decoder %d %+v", body, gen, offsets, wantGen, want)
		}
	})
}

// The bodies clients send take the fast path; the others fall back.
func TestDecodeCommitFastPath(t *testing.T) {
	for _, c := range []struct {
		body string
		fast bool
	}{
		{`{"generation":3,"offsets":[{"topic":"orders","partition":0,"offset":42,"leaderEpoch":-1,"metadata":"consumer-1"}]}`, true},
		{" {\n \"offsets\" : [ { \"topic\" : \"é\", \"partition\" : 1, \"offset\" : -1 } ] }\n", true},
		{`{"offsets":[]}`, true},
		{`{"offsets":[{"topic":"a\"b","partition":0,"offset":1}]}`, false}, // an escape
		{`{"offsets":[{"topic":"t","partition":0,"offset":1,"leaderEpoch":null}]}`, false},
		{`{"offsets":[{"topic":"t","partition":0}]}`, false}, // missing: the strict decoder says which
		{`{"offsets":[{"topic":"t","partition":0,"offset":1.5}]}`, false},
		{`{"offsets":[{"topic":"t","partition":0,"offset":1,"extra":1}]}`, false},
	} {
		if _, _, ok := decodeCommit([]byte(c.body)); ok != c.fast {
			t.Errorf("%s: fast=%v, want %v", c.body, ok, c.fast)
		}
	}
	// Offsets of one topic share its string.
	_, offsets, _ := decodeCommit([]byte(`{"offsets":[{"topic":"orders","partition":0,"offset":1},{"topic":"orders","partition":1,"offset":2}]}`))
	if len(offsets) != 2 || unsafe.StringData(offsets[0].Topic) != unsafe.StringData(offsets[1].Topic) {
		t.Errorf("offsets of one topic hold two copies of its name: %+v", offsets)
	}
}

// The hot paths' decoding and encoding allocate only what they return: a
// commit of 16 offsets of one topic, its offsets slice and two strings
// (the topic and the shared metadata); a group's answer, its one copy
// for the response cache.
func TestHotPathAllocations(t *testing.T) {
	body := []byte(`{"generation":3,"offsets":[`)
	for p := range 16 {
		if p > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"topic":"orders","partition":`...)
		body = strconv.AppendInt(body, int64(p), 10)
		body = append(body, `,"offset":42,"leaderEpoch":-1,"metadata":"consumer-1"}`...)
	}
	body = append(body, "]}"...)
	if _, offsets, ok := decodeCommit(body); !ok || len(offsets) != 16 {
		t.Fatalf("decodeCommit = %d offsets, ok %v", len(offsets), ok)
	}
	if n := testing.AllocsPerRun(100, func() { decodeCommit(body) }); n > 3 {
		t.Errorf("decoding a commit of 16 offsets allocated %.0f times, want at most 3", n)
	}
	offsets := make([]coordinator.PartitionOffset, 128)
	for i := range offsets {
		offsets[i] = coordinator.PartitionOffset{Topic: "orders-" + strconv.Itoa(i/16), Partition: int32(i % 16),
			Offset: coordinator.Offset{Offset: int64(i), LeaderEpoch: -1, Metadata: "consumer-1", CommitTime: time.UnixMilli(1700000000000)}}
	}
	info := coordinator.GroupInfo{Version: 9, Generation: 3}
	if n := testing.AllocsPerRun(100, func() { encodeGroupOffsets("g", "", offsets, info) }); n > 1 && !raceEnabled {
		t.Errorf("encoding a group of 128 offsets allocated %.0f times, want 1", n)
	}
}

// A batch of commits, as a busy client sends it, is read with one
// allocation per group name and per distinct topic or metadata, and two
// for the whole batch (its commits, and one array for all their offsets).
func TestBatchDecodeAllocations(t *testing.T) {
	const commits = 32
	body := []byte(`{"commits":[`)
	for i := range commits {
		if i > 0 {
			body = append(body, ',')
		}
		body = wire.AppendGroupCommitStart(body, "g-"+strconv.Itoa(i), -1)
		for p := range 2 {
			body = wire.AppendCommitOffset(body, p == 0, "orders-"+strconv.Itoa(i%2), int32(p), 42, 3, "consumer-07-host")
		}
		body = wire.AppendCommitEnd(body)
	}
	body = append(body, "]}"...)
	got, ok := decodeCommits(body)
	if !ok || len(got) != commits {
		t.Fatalf("decodeCommits = %d commits, ok %v", len(got), ok)
	}
	for i, gc := range got {
		if gc.Group != "g-"+strconv.Itoa(i) || len(gc.Offsets) != 2 || cap(gc.Offsets) != 2 || gc.Offsets[1].Topic != "orders-"+strconv.Itoa(i%2) {
			t.Fatalf("commit %d = %+v (cap %d)", i, gc, cap(gc.Offsets))
		}
		if unsafe.StringData(gc.Offsets[0].Topic) != unsafe.StringData(got[i%2].Offsets[0].Topic) ||
			unsafe.StringData(gc.Offsets[1].Metadata) != unsafe.StringData(got[0].Offsets[0].Metadata) {
			t.Fatalf("commit %d holds its own copy of a topic or metadata the batch repeats", i)
		}
	}
	want := float64(commits + 2 + 3) // group names; the two topics and the metadata; commits and offsets
	if n := testing.AllocsPerRun(50, func() { decodeCommits(body) }); n > want {
		t.Errorf("decoding a batch of %d commits allocated %.0f times, want at most %.0f", commits, n, want)
	}
}

// FuzzDecodeCommits: what the fast path accepts of a batch of commits, the
// strict decoder accepts with the same result.
func FuzzDecodeCommits(f *testing.F) {
	for _, seed := range []string{
		`{"commits":[{"group":"g","generation":-1,"offsets":[{"topic":"t","partition":0,"offset":42,"leaderEpoch":-1,"metadata":""}]}]}`,
		`{"commits":[{"group":"a","offsets":[{"topic":"t","partition":0,"offset":1}]},{"group":"b","generation":3,"offsets":[]}]}`,
		`{"commits":[]}`, `{"commits":null}`, `{}`, `{"commits":[{"offsets":[]}]}`, `{"commits":[{"group":"g"}]}`,
		`{"commits":[{"group":"g","group":"h","offsets":[]}]}`, `{"commits":[],"commits":[]}`, `{"commits":[{"group":"\ud800","offsets":[]}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		commits, ok := decodeCommits(body)
		if !ok {
			return
		}
		var req commitsRequest
		if e := decodeJSON(body, &req); e != nil {
			t.Fatalf("fast path accepted %q, the strict decoder refused it: %v", body, e)
		}
		want, e := req.commits()
		if e != nil {
			t.Fatalf("fast path accepted %q, the strict decoder refused it: %v", body, e)
		}
		if !reflect.DeepEqual(commits, want) {
			t.Fatalf("%q: fast path read %+v, the strict decoder %+v", body, commits, want)
		}
	})
}
