package statictopic

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fataler is what mustScope needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustScope(t fataler, s string) Scope {
	t.Helper()
	sc, err := ParseScope(s)
	if err != nil {
		t.Fatalf("ParseScope(%q): %v", s, err)
	}
	return sc
}

func TestParseScope(t *testing.T) {
	tests := []struct {
		in, canonical, broker string
		global                bool
		clusters              []string
	}{
		{"global", "global", "__logic__global", true, nil},
		{"__global__", "global", "__logic__global", true, nil}, // RocketMQ's spelling, as Export writes it
		{"clusterA", "clusterA", "__logic__clusterA", false, []string{"clusterA"}},
		{"a.b-C9", "a.b-C9", "__logic__a.b-C9", false, []string{"a.b-C9"}},
		{"c1,c2", "c1,c2", "__logic__c1_c2", false, []string{"c1", "c2"}},
		{"c2,c1", "c1,c2", "__logic__c1_c2", false, []string{"c1", "c2"}},
		{"c3,c1,c2", "c1,c2,c3", "__logic__c1_c2_c3", false, []string{"c1", "c2", "c3"}},
		{"globals", "globals", "__logic__globals", false, []string{"globals"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s := mustScope(t, tt.in)
			if s.String() != tt.canonical || s.BrokerName() != tt.broker || s.IsGlobal() != tt.global || s.IsZero() {
				t.Errorf("got %q broker %q global %v zero %v", s, s.BrokerName(), s.IsGlobal(), s.IsZero())
			}
			if !slices.Equal(s.Clusters(), tt.clusters) {
				t.Errorf("Clusters = %q, want %q", s.Clusters(), tt.clusters)
			}
			back, err := ParseBrokerName(s.BrokerName())
			if err != nil || back != s {
				t.Errorf("ParseBrokerName(%q) = %q, %v; want %q", s.BrokerName(), back, err, s)
			}
			again := mustScope(t, s.String())
			if again != s {
				t.Errorf("ParseScope(String()) = %q, want %q", again, s)
			}
		})
	}
}

func TestParseScopeRejects(t *testing.T) {
	for _, in := range []string{
		"", "a_b", "a,,b", ",a", "a,", "a,a", "b,a,b", "Global", "GLOBAL", "global,c1",
		"a b", " a", "é", "a/b", strings.Repeat("c", MaxScopeLen+1),
	} {
		if s, err := ParseScope(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseScope(%q) = %q, %v; want ErrInvalid", in, s, err)
		}
	}
}

func TestParseBrokerName(t *testing.T) {
	tests := []struct{ in, scope string }{
		{"__logic__global", "global"},
		{"__logic__clusterA", "clusterA"},
		{"__logic__c1_c2", "c1,c2"},
		{"__logic__a.b_c-d_e", "a.b,c-d,e"},
	}
	for _, tt := range tests {
		s, err := ParseBrokerName(tt.in)
		if err != nil || s.String() != tt.scope {
			t.Errorf("ParseBrokerName(%q) = %q, %v; want %q", tt.in, s, err, tt.scope)
			continue
		}
		if s.BrokerName() != tt.in {
			t.Errorf("BrokerName() = %q, want %q", s.BrokerName(), tt.in)
		}
	}
}

func TestParseBrokerNameRejects(t *testing.T) {
	for _, in := range []string{
		"", "clusterA", "global", "__logic", "__logic__", "logic__c1",
		"__logic__c2_c1",  // unsorted
		"__logic__c1_c1",  // duplicate
		"__logic__c1__c2", // empty part
		"__logic___c1",    // empty part
		"__logic__c1_",    // empty part
		"__logic__c1,c2",  // scope spelling, not broker spelling
		"__logic__Global", // reserved
		"__logic__c1_global",
		"__LOGIC__c1",
	} {
		if s, err := ParseBrokerName(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseBrokerName(%q) = %q, %v; want ErrInvalid", in, s, err)
		}
	}
}

func TestZeroScope(t *testing.T) {
	var z Scope
	if !z.IsZero() || z.IsGlobal() || z.String() != "" || z.BrokerName() != "" || z.Clusters() != nil {
		t.Errorf("zero scope misbehaves: %q %q %q", z, z.BrokerName(), z.Clusters())
	}
	if z.Overlaps(Global()) || Global().Overlaps(z) || z.Contains(Global()) || Global().Contains(z) {
		t.Error("zero scope overlaps or contains")
	}
}

func TestOverlapsAndContains(t *testing.T) {
	tests := []struct {
		a, b               string
		overlaps, contains bool // contains: a.Contains(b)
	}{
		{"global", "global", true, true},
		{"global", "c1", true, true},
		{"c1", "global", true, false},
		{"global", "c1,c2", true, true},
		{"c1", "c1", true, true},
		{"c1", "c2", false, false},
		{"c1,c2", "c1", true, true},
		{"c1", "c1,c2", true, false},
		{"c1,c2", "c2,c3", true, false},
		{"c1,c2", "c3,c4", false, false},
		{"c1,c2,c3", "c3,c1", true, true},
	}
	for _, tt := range tests {
		a, b := mustScope(t, tt.a), mustScope(t, tt.b)
		if got := a.Overlaps(b); got != tt.overlaps {
			t.Errorf("%q.Overlaps(%q) = %v, want %v", a, b, got, tt.overlaps)
		}
		if got := b.Overlaps(a); got != tt.overlaps {
			t.Errorf("%q.Overlaps(%q) = %v, want %v (symmetry)", b, a, got, tt.overlaps)
		}
		if got := a.Contains(b); got != tt.contains {
			t.Errorf("%q.Contains(%q) = %v, want %v", a, b, got, tt.contains)
		}
	}
}

func TestCheckScopeConflict(t *testing.T) {
	in := func(topic, scope string) Mapping {
		s := mustScope(t, scope)
		return Mapping{Topic: topic, Scope: s.String(), Bname: s.BrokerName()}
	}
	existing := []Mapping{in("T", "clusterA"), in("T", "c3,c4"), in("Other", "global")}
	tests := []struct {
		scope string
		want  error
	}{
		{"clusterA", nil}, // same scope: an update, not a conflict
		{"clusterB", nil}, // the same name in another cluster
		{"c3,c4", nil},    // same multi scope
		{"global", ErrScopeConflict},
		{"clusterA,clusterB", ErrScopeConflict},
		{"c4", ErrScopeConflict},
	}
	for _, tt := range tests {
		err := CheckScopeConflict("T", mustScope(t, tt.scope), existing)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("CheckScopeConflict(%q) = %v, want %v", tt.scope, err, tt.want)
		}
	}
	if err := CheckScopeConflict("T", mustScope(t, "clusterA"), []Mapping{in("T", "global")}); !errors.Is(err, ErrScopeConflict) {
		t.Errorf("cluster scope against a global topic: %v, want ErrScopeConflict", err)
	}
	if err := CheckScopeConflict("T", Scope{}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero scope: %v, want ErrInvalid", err)
	}
}

func FuzzParseScope(f *testing.F) {
	for _, s := range []string{"global", "clusterA", "c2,c1", "a,a", "a_b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseScope(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if again, err := ParseScope(s.String()); err != nil || again != s {
			t.Fatalf("canonical %q re-parses as %q, %v", s, again, err)
		}
		if back, err := ParseBrokerName(s.BrokerName()); err != nil || back != s {
			t.Fatalf("broker name %q parses as %q, %v", s.BrokerName(), back, err)
		}
	})
}

func FuzzParseBrokerName(f *testing.F) {
	for _, s := range []string{"__logic__global", "__logic__c1_c2", "__logic__c2_c1", "__logic__", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseBrokerName(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if s.BrokerName() != in {
			t.Fatalf("%q parses as %q whose broker name is %q", in, s, s.BrokerName())
		}
	})
}
