package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// authenticator checks the bearer token of /v1 requests.
type authenticator struct {
	// want is the SHA-256 of the token, nil when auth is off. Comparing
	// digests keeps the comparison constant-time whatever the lengths.
	want []byte
}

func newAuthenticator(token string) authenticator {
	if token == "" {
		return authenticator{}
	}
	sum := sha256.Sum256([]byte(token))
	return authenticator{want: sum[:]}
}

// allowed reports whether r may use the API.
func (a authenticator) allowed(r *http.Request) bool {
	if a.want == nil {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], a.want) == 1
}

func (a authenticator) deny(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="offsetd"`)
	writeError(w, errorf(http.StatusUnauthorized, codeUnauthorized, "missing or wrong bearer token"))
}
