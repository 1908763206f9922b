package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"testing"
)

// FuzzHotRead: the hot reads routed without the mux take exactly the clean
// paths the mux routes to their handlers (but those with an escaped
// segment, left to the mux), with the same path values.
func FuzzHotRead(f *testing.F) {
	for _, p := range []string{"/v1/groups/g/offsets/t/0", "/v1/groups/g/offsets/t", "/v1/groups/g/offsets/t/0/x",
		"/v1/groups/g/offsets", "/v1/groups/g", "/v1/groups/g/offsets/", "/v1/groups//offsets",
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
		var routed string
		var got [3]string
		mux := http.NewServeMux()
		for _, pattern := range []string{groupOffsetsPattern, pointFetchPattern} {
			mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
				routed = pattern
				got = [3]string{r.PathValue("group"), r.PathValue("topic"), r.PathValue("partition")}
			})
		}
		mux.ServeHTTP(httptest.NewRecorder(), &http.Request{Method: "GET", URL: u, Host: "h"})
		pattern, group, topic, partition := hotRead(ep)
		switch {
		case pattern != "" && (pattern != routed || got != [3]string{group, topic, partition}):
			t.Fatalf("%q: routed here to %q as %q %q %q, by the mux to %q as %q", ep, pattern, group, topic, partition, routed, got)
		case pattern == "" && routed != "" && url.PathEscape(got[0]) == got[0] && url.PathEscape(got[1]) == got[1] && url.PathEscape(got[2]) == got[2] &&
			(ep == "/v1/groups/"+got[0]+"/offsets" || ep == "/v1/groups/"+got[0]+"/offsets/"+got[1]+"/"+got[2]):
			t.Fatalf("%q: left to the mux, which routes it to %q as %q", ep, routed, got)
		}
	})
}
