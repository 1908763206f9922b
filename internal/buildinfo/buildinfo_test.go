package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

// A test binary records no VCS information: Read says so instead of
// leaving the fields empty.
func TestReadInTest(t *testing.T) {
	info := Read()
	if info.GoVersion != runtime.Version() {
		t.Fatalf("GoVersion %q, want %q", info.GoVersion, runtime.Version())
	}
	if info.Version == "" || info.Revision == "" {
		t.Fatalf("empty fields: %+v", info)
	}
}

func TestString(t *testing.T) {
	got := Info{Version: "v1.2.0", Revision: "4f3c2a1", Modified: true, GoVersion: "go1.26.8"}.String()
	if want := "offsetd v1.2.0 (revision 4f3c2a1, modified, go1.26.8)"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if s := (Info{Version: "v1", Revision: Unknown, GoVersion: "go1"}).String(); strings.Contains(s, "modified") {
		t.Fatal(s)
	}
}
