package client

import (
	"encoding/json"
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
