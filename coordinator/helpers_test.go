package coordinator

import (
	"io"
	"log/slog"
	"testing"
)

// testOptions are the defaults with a quiet logger.
func testOptions() Options {
	o := DefaultOptions()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return o
}

func mustOpen(t testing.TB, dir string, opts Options) *Coordinator {
	t.Helper()
	c, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return c
}
