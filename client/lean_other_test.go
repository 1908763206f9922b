//go:build !unix

package client

import "testing"

// Where an idle connection cannot be checked before it is reused, no
// Client sends through the lean transport: a POST written on a
// connection the server closed would fail without being sent again.
func TestNoLeanTransportHere(t *testing.T) {
	for _, base := range []string{"http://127.0.0.1:1", "127.0.0.1:1"} {
		c, err := New(base, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c.lean != nil {
			t.Errorf("New(%q) uses the lean transport on a system without its check of idle connections", base)
		}
	}
}
