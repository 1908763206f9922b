package server_test

import (
	"net/http"
	"testing"

	"github.com/offsetd/offsetd/server"
)

func TestAuth(t *testing.T) {
	for _, tls := range []bool{false, true} {
		name := "http"
		if tls {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envConfig{tls: tls, server: func(o *server.Options) { o.AuthToken = "s3cret" }})
			for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret-and-more", "Basic czNjcmV0", "s3cret", "Bearer"} {
				r := e.fail(http.StatusUnauthorized, "unauthorized", "GET", "/v1/groups", "", "Authorization", auth)
				if r.header.Get("WWW-Authenticate") == "" {
					t.Fatalf("401 without WWW-Authenticate for %q", auth)
				}
			}
			// An unknown /v1 route does not tell strangers it is unknown.
			e.fail(http.StatusUnauthorized, "unauthorized", "GET", "/v1/nope", "")
			e.fail(http.StatusUnauthorized, "unauthorized", "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
			e.assertEmpty()

			e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`, "Authorization", "Bearer s3cret")
			e.must(http.StatusOK, "GET", "/v1/groups", "", "Authorization", "bearer s3cret")
			for _, open := range []string{"/healthz", "/readyz", "/metrics"} {
				e.must(http.StatusOK, "GET", open, "")
			}
		})
	}
}

func TestAuthOff(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.must(http.StatusOK, "GET", "/v1/groups", "")
	e.must(http.StatusOK, "GET", "/v1/groups", "", "Authorization", "Bearer anything")
}

// Everything works over TLS (httptest's self-signed certificate).
func TestTLS(t *testing.T) {
	e := newEnv(t, envConfig{tls: true})
	if e.ts.TLS == nil || e.ts.URL[:8] != "https://" {
		t.Fatalf("not a TLS server: %s", e.ts.URL)
	}
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	if g := e.groupOffsets("g"); len(g.Offsets) != 1 {
		t.Fatalf("over TLS: %+v", g)
	}
	// A client that does not trust the certificate gets nowhere.
	if _, err := http.Get(e.ts.URL + "/healthz"); err == nil {
		t.Fatal("an untrusting client talked to the TLS server")
	}
}
