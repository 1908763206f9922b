package client

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// FuzzDecodeGroupOffsets: what the fast path reads, encoding/json reads
// the same; the bodies the server writes take the fast path.
func FuzzDecodeGroupOffsets(f *testing.F) {
	typical := `{"group":"g","version":7,"generation":-1,"offsets":[{"topic":"t","partition":0,"offset":1,"leaderEpoch":-1,"metadata":"m","commitTime":1700000000000},{"topic":"t","partition":1,"offset":2,"leaderEpoch":3,"metadata":"m","commitTime":1700000000001}]}` + "\n"
	if _, ok := decodeGroupOffsets([]byte(typical)); !ok {
		f.Fatal("a typical answer does not take the fast path")
	}
	for _, s := range []string{typical, `{"group":"g","version":0,"generation":-1,"offsets":[]}`, `{"group":"\u003c","offsets":[]}`, `{"offsets":null}`, `{"group":"g","extra":1,"offsets":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		g, ok := decodeGroupOffsets(body)
		if !ok {
			return
		}
		var out groupOffsetsJSON
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("fast path read %q, encoding/json refused it: %v", body, err)
		}
		want := GroupOffsets{Group: out.Group, Version: out.Version, Generation: out.Generation, Offsets: []Offset{}}
		for _, o := range out.Offsets {
			want.Offsets = append(want.Offsets, fromWire(o))
		}
		if !reflect.DeepEqual(g, want) {
			t.Fatalf("%q: fast path read %+v, encoding/json %+v", body, g, want)
		}
	})
}

// Reading a group's 128 offsets allocates the slice and each distinct
// name once (8 topics, one metadata, the group), not a string per field.
func TestDecodeGroupOffsetsAllocations(t *testing.T) {
	body := []byte(`{"group":"g","version":9,"generation":3,"offsets":[`)
	for i := range 128 {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `{"topic":"orders-%d","partition":%d,"offset":%d,"leaderEpoch":-1,"metadata":"consumer-1","commitTime":1700000000000}`, i/16, i%16, i)
	}
	body = append(body, "]}\n"...)
	if g, ok := decodeGroupOffsets(body); !ok || len(g.Offsets) != 128 {
		t.Fatalf("decodeGroupOffsets = %d offsets, ok %v", len(g.Offsets), ok)
	}
	if n := testing.AllocsPerRun(50, func() { decodeGroupOffsets(body) }); n > 11 {
		t.Errorf("reading 128 offsets allocated %.0f times, want at most 11", n)
	}
}
