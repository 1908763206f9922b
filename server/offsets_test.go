package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/offsetd/offsetd/coordinator"
)

func TestCommitAndFetch(t *testing.T) {
	e := newEnv(t, envConfig{})
	before := time.Now().UnixMilli()
	var commit struct {
		Version uint64 `json:"version"`
	}
	e.must(http.StatusOK, "POST", "/v1/groups/payments/offsets",
		`{"generation":-1,"offsets":[{"topic":"orders","partition":0,"offset":42,"leaderEpoch":3,"metadata":"m"},
		{"topic":"orders","partition":1,"offset":7},{"topic":"refunds","partition":0,"offset":1}]}`).decode(t, &commit)
	if commit.Version == 0 {
		t.Fatal("commit answered version 0")
	}

	r := e.must(http.StatusOK, "GET", "/v1/groups/payments/offsets", "")
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if et, want := r.header.Get("ETag"), strconv.Quote(strconv.FormatUint(commit.Version, 10)); et != want {
		t.Fatalf("ETag %s, want %s", et, want)
	}
	var g groupOffsets
	r.decode(t, &g)
	if g.Group != "payments" || g.Version != commit.Version || g.Generation != -1 || len(g.Offsets) != 3 {
		t.Fatalf("group offsets %+v", g)
	}
	o := g.Offsets[0]
	if o.Topic != "orders" || o.Partition != 0 || o.Offset != 42 || o.LeaderEpoch != 3 || o.Metadata != "m" ||
		o.CommitTime < before || o.CommitTime > time.Now().UnixMilli() {
		t.Fatalf("first offset %+v", o)
	}
	if o := g.Offsets[1]; o.LeaderEpoch != -1 || o.Metadata != "" {
		t.Fatalf("omitted leaderEpoch and metadata read back as %+v, want -1 and empty", o)
	}

	// ?topic= filters; the version is still the group's.
	var filtered groupOffsets
	e.must(http.StatusOK, "GET", "/v1/groups/payments/offsets?topic=refunds", "").decode(t, &filtered)
	if len(filtered.Offsets) != 1 || filtered.Offsets[0].Topic != "refunds" || filtered.Version != commit.Version {
		t.Fatalf("filtered %+v", filtered)
	}

	var one offset
	e.must(http.StatusOK, "GET", "/v1/groups/payments/offsets/orders/1", "").decode(t, &one)
	if one.Topic != "orders" || one.Partition != 1 || one.Offset != 7 {
		t.Fatalf("one offset %+v", one)
	}
	e.fail(http.StatusNotFound, "not_found", "GET", "/v1/groups/payments/offsets/orders/9", "")
	e.fail(http.StatusNotFound, "not_found", "GET", "/v1/groups/nobody/offsets/orders/0", "")

	// An unknown group is an empty list at version 0, not a 404.
	empty := e.must(http.StatusOK, "GET", "/v1/groups/nobody/offsets", "")
	var eg groupOffsets
	empty.decode(t, &eg)
	if eg.Group != "nobody" || eg.Version != 0 || eg.Offsets == nil || len(eg.Offsets) != 0 {
		t.Fatalf("unknown group %s", empty)
	}

	// Last write wins, even when it goes back.
	e.must(http.StatusOK, "POST", "/v1/groups/payments/offsets", `{"offsets":[{"topic":"orders","partition":0,"offset":5}]}`)
	if g := e.groupOffsets("payments"); g.Offsets[0].Offset != 5 || g.Version <= commit.Version {
		t.Fatalf("after reset %+v", g)
	}
}

func TestGroupsAndDeletes(t *testing.T) {
	e := newEnv(t, envConfig{})
	var groups struct {
		Groups []string `json:"groups"`
	}
	e.must(http.StatusOK, "GET", "/v1/groups", "").decode(t, &groups)
	if groups.Groups == nil || len(groups.Groups) != 0 {
		t.Fatalf("groups of an empty coordinator: %v", groups.Groups)
	}
	for _, g := range []string{"b", "a", "c"} {
		e.must(http.StatusOK, "POST", "/v1/groups/"+g+"/offsets",
			`{"offsets":[{"topic":"t","partition":0,"offset":1},{"topic":"t","partition":1,"offset":2},{"topic":"u","partition":0,"offset":3}]}`)
	}
	e.must(http.StatusOK, "GET", "/v1/groups", "").decode(t, &groups)
	if !slices.Equal(groups.Groups, []string{"a", "b", "c"}) {
		t.Fatalf("groups %v", groups.Groups)
	}

	e.must(http.StatusNoContent, "DELETE", "/v1/groups/a/offsets/t?partition=1", "")
	if g := e.groupOffsets("a"); len(g.Offsets) != 2 {
		t.Fatalf("after deleting t/1: %+v", g.Offsets)
	}
	e.fail(http.StatusNotFound, "not_found", "DELETE", "/v1/groups/a/offsets/t?partition=1", "")
	e.must(http.StatusNoContent, "DELETE", "/v1/groups/a/offsets/t", "")
	if g := e.groupOffsets("a"); len(g.Offsets) != 1 || g.Offsets[0].Topic != "u" {
		t.Fatalf("after deleting t: %+v", g.Offsets)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/groups/b/offsets/t?partition=0&partition=1", "")
	if g := e.groupOffsets("b"); len(g.Offsets) != 1 {
		t.Fatalf("after deleting t/0 and t/1: %+v", g.Offsets)
	}

	e.must(http.StatusNoContent, "DELETE", "/v1/groups/c", "")
	e.fail(http.StatusNotFound, "not_found", "DELETE", "/v1/groups/c", "")
	e.fail(http.StatusNotFound, "not_found", "DELETE", "/v1/groups/c/offsets/t", "")
	e.must(http.StatusOK, "GET", "/v1/groups", "").decode(t, &groups)
	if !slices.Equal(groups.Groups, []string{"a", "b"}) {
		t.Fatalf("groups after delete %v", groups.Groups)
	}
}

// Names travel in the path: any byte a name may hold must survive
// escaping, and r.PathValue must hand it back whole.
func TestEscapedNames(t *testing.T) {
	e := newEnv(t, envConfig{})
	group, topic := "team/a b?%", "orders/eu #1"
	base := "/v1/groups/" + url.PathEscape(group) + "/offsets"
	e.must(http.StatusOK, "POST", base, fmt.Sprintf(`{"offsets":[{"topic":%q,"partition":3,"offset":9}]}`, topic))
	var one offset
	e.must(http.StatusOK, "GET", base+"/"+url.PathEscape(topic)+"/3", "").decode(t, &one)
	if one.Topic != topic || one.Offset != 9 {
		t.Fatalf("escaped fetch %+v", one)
	}
	if got := e.c.Groups(); !slices.Equal(got, []string{group}) {
		t.Fatalf("stored groups %q", got)
	}
	var g groupOffsets
	e.must(http.StatusOK, "GET", base+"?topic="+url.QueryEscape(topic), "").decode(t, &g)
	if g.Group != group || len(g.Offsets) != 1 {
		t.Fatalf("escaped group offsets %+v", g)
	}
	e.must(http.StatusNoContent, "DELETE", base+"/"+url.PathEscape(topic)+"?partition=3", "")
	// JSON escapes of a surrogate pair and of a backslash are characters,
	// kept as sent (a lone surrogate is refused: see TestBadInput).
	e.must(http.StatusOK, "POST", "/v1/groups/esc/offsets", `{"offsets":[{"topic":"\ud83d\ude00","partition":0,"offset":1},{"topic":"\\ud800","partition":0,"offset":2}]}`)
	for topic, want := range map[string]int64{"\U0001F600": 1, `\ud800`: 2} {
		var o offset
		e.must(http.StatusOK, "GET", "/v1/groups/esc/offsets/"+url.PathEscape(topic)+"/0", "").decode(t, &o)
		if o.Topic != topic || o.Offset != want {
			t.Fatalf("topic %q read back as %+v", topic, o)
		}
	}
}

func TestGenerationFencing(t *testing.T) {
	e := newEnv(t, envConfig{})
	commit := func(gen int, off int64) response {
		return e.do("POST", "/v1/groups/g/offsets", fmt.Sprintf(`{"generation":%d,"offsets":[{"topic":"t","partition":0,"offset":%d}]}`, gen, off))
	}
	if r := commit(5, 100); r.status != http.StatusOK {
		t.Fatalf("generation 5: %d %s", r.status, r.body)
	}
	r := commit(4, 1)
	if r.status != http.StatusConflict || r.errorCode(t) != "stale_generation" {
		t.Fatalf("generation 4 after 5: %d %s", r.status, r.body)
	}
	if g := e.groupOffsets("g"); g.Offsets[0].Offset != 100 || g.Generation != 5 {
		t.Fatalf("a fenced commit changed the group: %+v", g)
	}
	if r := commit(-1, 101); r.status != http.StatusOK {
		t.Fatalf("no generation: %d %s", r.status, r.body)
	}
	if r := commit(6, 102); r.status != http.StatusOK {
		t.Fatalf("generation 6: %d %s", r.status, r.body)
	}

	// The highest generation survives a restart.
	e.c.Close()
	opts := coordinator.DefaultOptions()
	opts.Partitions = 4
	opts.Logger = quiet
	c := e.open(opts)
	defer c.Close()
	_, err := c.CommitGeneration(t.Context(), "g", 5, []coordinator.OffsetCommit{{Topic: "t", Offset: 1, LeaderEpoch: -1}})
	if !errors.Is(err, coordinator.ErrStaleGeneration) {
		t.Fatalf("generation 5 after a restart that saw 6: %v", err)
	}
}
