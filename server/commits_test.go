package server_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// POST /v1/commits answers each commit alone, as its own request would
// have been answered, and writes exactly the commits it answers with a
// version.
func TestCommitMany(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.must(http.StatusOK, "POST", "/v1/groups/fenced/offsets", `{"generation":5,"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	var out struct {
		Results []struct {
			Version *uint64 `json:"version"`
			Status  int     `json:"status"`
			Code    string  `json:"code"`
			Error   string  `json:"error"`
		} `json:"results"`
	}
	e.must(http.StatusOK, "POST", "/v1/commits", `{"commits":[
		{"group":"a","offsets":[{"topic":"t","partition":0,"offset":10,"leaderEpoch":2,"metadata":"m"}]},
		{"group":"","offsets":[{"topic":"t","partition":0,"offset":11}]},
		{"group":"fenced","generation":4,"offsets":[{"topic":"t","partition":0,"offset":12}]},
		{"group":"b","generation":1,"offsets":[{"topic":"t","partition":3,"offset":13}]},
		{"group":"a","offsets":[{"topic":"t","partition":0,"offset":14}]},
		{"group":"..","offsets":[{"topic":"t","partition":0,"offset":15}]}]}`).decode(t, &out)
	if len(out.Results) != 6 {
		t.Fatalf("%d results, want 6: %+v", len(out.Results), out)
	}
	want := []struct {
		status int
		code   string
	}{{200, ""}, {400, "invalid_argument"}, {409, "stale_generation"}, {200, ""}, {200, ""}, {400, "invalid_argument"}}
	for i, r := range out.Results {
		if w := want[i]; w.status == 200 && (r.Version == nil || r.Status != 0) || w.status != 200 && (r.Version != nil || r.Status != w.status || r.Code != w.code || r.Error == "") {
			t.Errorf("result %d: %+v, want status %d %s", i, r, w.status, w.code)
		}
	}
	if *out.Results[4].Version <= *out.Results[0].Version {
		t.Errorf("a's second commit has version %d, not above its first's %d", *out.Results[4].Version, *out.Results[0].Version)
	}
	a := e.groupOffsets("a")
	if a.Version != *out.Results[4].Version || len(a.Offsets) != 1 || a.Offsets[0].Offset != 14 {
		t.Errorf("group a: %+v", a)
	}
	if b := e.groupOffsets("b"); b.Generation != 1 || len(b.Offsets) != 1 || b.Offsets[0].Offset != 13 {
		t.Errorf("group b: %+v", b)
	}
	if f := e.groupOffsets("fenced"); len(f.Offsets) != 1 || f.Offsets[0].Offset != 1 {
		t.Errorf("the stale commit wrote: %+v", f)
	}
	// ".." has no path of its own, so it is refused in a batch as alone.
	if g := e.c.Groups(); len(g) != 3 {
		t.Errorf("groups %v, want a, b and fenced", g)
	}
	// Counted per commit in the metrics, as commits alone are.
	r := e.must(http.StatusOK, "GET", "/metrics", "")
	for _, line := range []string{`offsetd_commits_total{result="ok"} ` + strconv.Itoa(4), `offsetd_commits_total{result="stale_generation"} 1`} {
		if !strings.Contains(string(r.body), line) {
			t.Errorf("metrics lack %q", line)
		}
	}
}
