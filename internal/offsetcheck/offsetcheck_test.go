package offsetcheck

import (
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		run  func(h *History)
		ok   bool
	}{
		{"read after an acknowledged commit sees it", func(h *History) {
			h.Commit(0, "g", 1, h.Call(), true)
			h.Read(1, "g", 1, h.Call())
		}, true},
		{"stale read after an acknowledged commit", func(h *History) {
			h.Commit(0, "g", 1, h.Call(), true)
			h.Read(1, "g", -1, h.Call())
		}, false},
		{"a commit of unknown outcome may show later", func(h *History) {
			h.Commit(0, "g", 1, h.Call(), false)
			h.Read(1, "g", -1, h.Call())
			h.Read(1, "g", 1, h.Call())
		}, true},
		{"a value never written", func(h *History) {
			h.Read(1, "g", 7, h.Call())
		}, false},
		{"groups are apart", func(h *History) {
			h.Commit(0, "a", 1, h.Call(), true)
			h.Read(1, "b", -1, h.Call())
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New()
			tt.run(h)
			err := h.Check(t.TempDir(), 10*time.Second)
			if (err == nil) != tt.ok {
				t.Fatalf("Check: %v, want ok %v", err, tt.ok)
			}
		})
	}
}
