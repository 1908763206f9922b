package server_test

import (
	"net/http"
	"testing"
)

// The point fetch, routed before the mux, answers as the mux's route
// does (an escaped name goes through the mux), and its metrics carry the
// route's pattern.
func TestPointFetchRoute(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":3,"offset":7,"metadata":"m"}]}`)
	e.must(http.StatusOK, "POST", "/v1/groups/a%2Fb/offsets", `{"offsets":[{"topic":"t","partition":3,"offset":8}]}`)
	var o offset
	e.must(http.StatusOK, "GET", "/v1/groups/g/offsets/t/3", "").decode(t, &o)
	if o.Topic != "t" || o.Partition != 3 || o.Offset != 7 || o.Metadata != "m" {
		t.Fatalf("point fetch: %+v", o)
	}
	e.must(http.StatusOK, "GET", "/v1/groups/a%2Fb/offsets/t/3", "").decode(t, &o)
	if o.Offset != 8 {
		t.Fatalf("point fetch of an escaped group: %+v", o)
	}
	e.fail(http.StatusNotFound, "not_found", "GET", "/v1/groups/g/offsets/t/4", "")
	e.fail(http.StatusBadRequest, "invalid_argument", "GET", "/v1/groups/g/offsets/t/x", "")
	e.fail(http.StatusBadRequest, "invalid_argument", "GET", "/v1/groups/g/offsets/t/3?wait=1s", "")
	e.fail(http.StatusMethodNotAllowed, "method_not_allowed", "PUT", "/v1/groups/g/offsets/t/3", "")

	m := scrape(t, e)
	for series, want := range map[string]float64{
		`offsetd_http_requests_total{code="200",route="GET /v1/groups/{group}/offsets/{topic}/{partition}"}`: 2,
		`offsetd_http_requests_total{code="404",route="GET /v1/groups/{group}/offsets/{topic}/{partition}"}`: 1,
		`offsetd_http_requests_total{code="400",route="GET /v1/groups/{group}/offsets/{topic}/{partition}"}`: 2,
	} {
		if got := m[series]; got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}
