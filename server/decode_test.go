package server

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/offsetd/offsetd/statictopic"
)

// FuzzDecodeJSON: the strict decoder never panics, and whatever it accepts
// is one valid JSON value in valid UTF-8 whose fields all exist.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []string{
		`{"generation":-1,"offsets":[{"topic":"t","partition":0,"offset":42,"leaderEpoch":-1,"metadata":""}]}`,
		`{"offsets":[{"topic":"t","partition":0,"offset":1,"Offset":2}]}`,
		`{"offsets":[]} {}`,
		`{"version":"1","topic":"T","scope":"c1","totalQueues":1,"epoch":1,"bname":"__logic__c1","queues":{"0":[{"gen":0}]}}`,
		"{\"offsets\":[{\"topic\":\"\xff\"}]}",
		`[`, `null`, `{"a":{"b":[1,{"c":2}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req commitRequest
		if e := decodeJSON(body, &req); e == nil {
			if !utf8.Valid(body) || !json.Valid(body) {
				t.Fatalf("accepted %q", body)
			}
			req.offsets()
		} else if e.status != 400 || e.code == "" {
			t.Fatalf("error %+v", e)
		}
		var m statictopic.Mapping
		if e := decodeJSON(body, &m); e == nil && !json.Valid(body) {
			t.Fatalf("accepted mapping %q", body)
		}
	})
}

func TestCheckKeys(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"offsets":[{"topic":"t","partition":0,"offset":1}]}`, true},
		{`{"generation":1,"offsets":[]}`, true},
		{`{"Offsets":[]}`, false},
		{`{"offsets":[{"TOPIC":"t"}]}`, false},
		{`{"offsets":[{"topic":"t","topic":"u"}]}`, false},
		{`{"offsets":[{"topic":"t"},{"topic":"u"}]}`, true}, // same key in two objects
		{`{"offsets":[[{"topic":"t"}]]}`, true},             // checkKeys only judges keys
	} {
		err := checkKeys([]byte(c.body), keysOf(reflect.TypeOf(&commitRequest{})))
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.body, err, c.ok)
		}
	}
	var m statictopic.Mapping
	mk := keysOf(reflect.TypeOf(&m))
	if err := checkKeys([]byte(`{"queues":{"0":[{"gen":1}],"12":[]}}`), mk); err != nil {
		t.Errorf("numeric queue keys: %v", err)
	}
	if err := checkKeys([]byte(`{"queues":{"x":[]}}`), mk); err == nil {
		t.Error("a non-numeric queue key passed")
	}
}

func TestETagMatches(t *testing.T) {
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{`"7"`, true},
		{`W/"7"`, true},
		{`7`, true},
		{`"6", "7"`, true},
		{`"6",W/"7"`, true},
		{`*`, true},
		{`"70"`, false},
		{`"6"`, false},
		{``, false},
	} {
		if got := etagMatches(c.header, `"7"`); got != c.ok {
			t.Errorf("If-None-Match %s: %v, want %v", c.header, got, c.ok)
		}
	}
}
