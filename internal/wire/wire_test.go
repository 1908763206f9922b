package wire

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"unsafe"
)

type commitOffset struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	Metadata    string `json:"metadata,omitempty"`
}

// FuzzEncodeLikeEncodingJSON: the encoders write what encoding/json writes
// for the same values, whatever the strings hold.
func FuzzEncodeLikeEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "orders", `a"b\c`, "<&>", "\x00\x1f\t\n\r\b\f", "\u2028\u2029", "\xff\xfe", "é日本\U0001F600", "\xed\xa0\x80"} {
		f.Add(s, s+"m", int64(-1), int32(7))
	}
	f.Fuzz(func(t *testing.T, topic, metadata string, offset int64, partition int32) {
		want, _ := json.Marshal(topic)
		if got := AppendString(nil, topic); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", topic, got, want)
		}
		o := Offset{Topic: topic, Partition: partition, Offset: offset, LeaderEpoch: -partition, Metadata: metadata, CommitTime: offset / 3}
		want, _ = json.Marshal(o)
		if got := AppendOffset(nil, o); string(got) != string(want) {
			t.Fatalf("AppendOffset = %s, want %s", got, want)
		}
		body := struct {
			Generation int32          `json:"generation"`
			Offsets    []commitOffset `json:"offsets"`
		}{partition, []commitOffset{{topic, partition, offset, -1, metadata}, {metadata, 0, 1, 2, ""}}}
		want, _ = json.Marshal(body)
		got := AppendCommitStart(nil, partition)
		for i, c := range body.Offsets {
			got = AppendCommitOffset(got, i == 0, c.Topic, c.Partition, c.Offset, c.LeaderEpoch, c.Metadata)
		}
		if got = AppendCommitEnd(got); string(got) != string(want) {
			t.Fatalf("commit body %s, want %s", got, want)
		}
		want, _ = json.Marshal(struct {
			Version uint64 `json:"version"`
		}{uint64(offset)})
		if got := AppendVersion(nil, uint64(offset)); string(got) != string(want) {
			t.Fatalf("AppendVersion = %s, want %s", got, want)
		}
	})
}

// decodeOffset reads a point fetch's answer as the client does.
func decodeOffset(body []byte) (Offset, bool) {
	d := NewDecoder(body)
	o := d.Offset(Offset{})
	return o, d.End()
}

// FuzzDecoderAgreesWithEncodingJSON: what the Decoder accepts,
// encoding/json accepts too, with the same values.
func FuzzDecoderAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"topic":"t","partition":0,"offset":42,"leaderEpoch":-1,"metadata":"","commitTime":1700000000000}`,
		` { "topic" : "é" , "offset" : -9223372036854775808 } `,
		`{"partition":2147483648}`, `{"offset":1.5}`, `{"offset":1e3}`, `{"offset":01}`, `{"offset":-0}`,
		`{"topic":"a\"b"}`, `{"topic":null}`, `{}`, `{,}`, `{"topic":"t",}`, `{"topic":"t"} x`, "{\"topic\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		o, ok := decodeOffset(body)
		if !ok {
			return
		}
		var want Offset
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("Decoder accepted %q, encoding/json did not: %v", body, err)
		}
		if o != want {
			t.Fatalf("%q: Decoder read %+v, encoding/json %+v", body, o, want)
		}
	})
}

func TestDecoderIntegers(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"0", true}, {"-0", true}, {"7", true}, {"-2147483648", true}, {"2147483647", true},
		{"2147483648", false}, {"-2147483649", false}, {"01", false}, {"1.0", false}, {"1e2", false},
		{"-", false}, {"", false}, {"+1", false}, {`"1"`, false},
	} {
		d := NewDecoder([]byte(c.in))
		v := d.Int32()
		if d.End() != c.ok {
			t.Errorf("Int32(%q): ok=%v, want %v", c.in, d.OK(), c.ok)
			continue
		}
		if c.ok {
			if want, _ := strconv.ParseInt(c.in, 10, 32); int64(v) != want {
				t.Errorf("Int32(%q) = %d", c.in, v)
			}
		}
	}
	for _, in := range []string{"-9223372036854775808", "9223372036854775807"} {
		d := NewDecoder([]byte(in))
		if v, want := d.Int64(), int64(math.MinInt64); !d.End() || in[0] == '-' && v != want || in[0] != '-' && v != math.MaxInt64 {
			t.Errorf("Int64(%s) = %d", in, v)
		}
	}
	for _, in := range []string{"9223372036854775808", "-9223372036854775809", "18446744073709551616"} {
		d := NewDecoder([]byte(in))
		if d.Int64(); d.End() {
			t.Errorf("Int64(%s) passed", in)
		}
	}
	d := NewDecoder([]byte("18446744073709551615"))
	if v := d.Uint(); !d.End() || v != math.MaxUint64 {
		t.Errorf("Uint(max) = %d", v)
	}
}

// A name read again is the string made the first time, while no other
// name took its slot; strings are equal to their bytes either way. Names
// that differ only in their last byte (the topics of one application)
// keep their own slots.
func TestNames(t *testing.T) {
	var n Names
	orders := n.String([]byte("orders"))
	if orders != "orders" {
		t.Fatalf("String = %q", orders)
	}
	if again := n.String([]byte("orders")); unsafe.StringData(again) != unsafe.StringData(orders) {
		t.Fatal("a name read twice made two strings")
	}
	if n := testing.AllocsPerRun(100, func() { n.String([]byte("orders")) }); n != 0 {
		t.Fatalf("a name read again allocated %.0f times", n)
	}
	names := []string{"consumer-07-host"}
	for i := range 8 {
		names = append(names, "orders-"+strconv.Itoa(i))
	}
	for range 2 {
		for _, name := range names {
			n.String([]byte(name))
		}
	}
	if allocs := testing.AllocsPerRun(100, func() {
		for _, name := range names {
			if s := n.String([]byte(name)); s != name {
				t.Fatalf("String = %q, want %q", s, name)
			}
		}
	}); allocs != 0 {
		t.Fatalf("nine names read again allocated %.0f times", allocs)
	}
	// Many more names than slots: each still reads back equal.
	for i := range 4 * namesKept {
		if s := n.String([]byte("topic-" + strconv.Itoa(i))); s != "topic-"+strconv.Itoa(i) {
			t.Fatalf("String = %q", s)
		}
	}
	if s := n.String(nil); s != "" {
		t.Fatalf("String(nil) = %q", s)
	}
}
