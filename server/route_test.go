package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"testing"
)

// FuzzPointFetch: the point fetch routed without the mux takes exactly the
// clean paths the mux routes to getOffset (but those with an escaped
// segment, left to the mux), with the same path values.
func FuzzPointFetch(f *testing.F) {
	for _, p := range []string{"/v1/groups/g/offsets/t/0", "/v1/groups/g/offsets/t", "/v1/groups/g/offsets/t/0/x",
		"/v1/groups/a b/offsets/t/1", "/v1/groups/g/members/t/0", "/v1/groupsg/offsets/t/0", "/v2/groups/g/offsets/t/0",
		"/v1/groups/a%2Fb/offsets/t/0", "/v1/groups//offsets/t/0", "/v1/groups/g/offsets//0"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		u := &url.URL{Path: p}
		ep := u.EscapedPath()
		if len(ep) == 0 || ep[0] != '/' || path.Clean(ep) != ep {
			return // refused before routing
		}
		var got []string
		mux := http.NewServeMux()
		mux.HandleFunc(pointFetchPattern, func(w http.ResponseWriter, r *http.Request) {
			got = []string{r.PathValue("group"), r.PathValue("topic"), r.PathValue("partition")}
		})
		mux.ServeHTTP(httptest.NewRecorder(), &http.Request{Method: "GET", URL: u, Host: "h"})
		group, topic, partition, ok := pointFetch(ep)
		switch {
		case ok && (got == nil || got[0] != group || got[1] != topic || got[2] != partition):
			t.Fatalf("%q: routed here as %q %q %q, by the mux as %q", ep, group, topic, partition, got)
		case !ok && got != nil && url.PathEscape(got[0]) == got[0] && url.PathEscape(got[1]) == got[1] && url.PathEscape(got[2]) == got[2] && ep == "/v1/groups/"+got[0]+"/offsets/"+got[1]+"/"+got[2]:
			t.Fatalf("%q: left to the mux, which routes it as %q", ep, got)
		}
	})
}
