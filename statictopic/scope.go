package statictopic

import (
	"fmt"
	"slices"
	"strings"
)

// GlobalScope is the spelling of the global scope.
const GlobalScope = "global"

// LogicBrokerPrefix starts every logic broker name (Scope.BrokerName). No
// physical broker may use it.
const LogicBrokerPrefix = "__logic__"

// MaxScopeLen is the longest canonical scope spelling, in bytes.
const MaxScopeLen = 255

// Scope says where a static topic may drift: within one cluster, within a set
// of clusters, or anywhere (global). The zero Scope is no scope at all; every
// function given one reports ErrInvalid. Scopes are comparable with ==, which
// compares their canonical spellings.
type Scope struct {
	// name is the canonical spelling: "global", "clusterA", or sorted
	// distinct cluster names joined by ",".
	name string
}

// Global returns the global scope.
func Global() Scope { return Scope{name: GlobalScope} }

// ParseScope parses "global", a cluster name ("clusterA") or a comma list of at
// least two distinct cluster names ("c2,c1", spelled canonically "c1,c2").
// Cluster names are non-empty and use only ASCII letters, digits, '-' and '.'
// ('_' separates names in broker names, ',' in scopes); "global" in any case
// is reserved. RocketMQ's spelling of the global scope, "__global__", which
// Export writes, is the global scope too.
func ParseScope(s string) (Scope, error) {
	if s == "" {
		return Scope{}, fmt.Errorf("%w: empty scope", ErrInvalid)
	}
	if len(s) > MaxScopeLen {
		return Scope{}, fmt.Errorf("%w: scope of %d bytes, limit %d", ErrInvalid, len(s), MaxScopeLen)
	}
	if s == GlobalScope || s == RocketMQGlobalScope {
		return Global(), nil
	}
	names := strings.Split(s, ",")
	for _, n := range names {
		if err := checkClusterName(n); err != nil {
			return Scope{}, fmt.Errorf("scope %q: %w", s, err)
		}
	}
	slices.Sort(names)
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			return Scope{}, fmt.Errorf("%w: scope %q: cluster %q listed twice", ErrInvalid, s, names[i])
		}
	}
	return Scope{name: strings.Join(names, ",")}, nil
}

// ParseBrokerName parses a logic broker name, the inverse of Scope.BrokerName:
// "__logic__global", "__logic__clusterA" or "__logic__c1_c2". Only the
// canonical spelling is accepted: multi-cluster names must be sorted and
// distinct, so one scope has exactly one broker name.
func ParseBrokerName(name string) (Scope, error) {
	rest, ok := strings.CutPrefix(name, LogicBrokerPrefix)
	if !ok {
		return Scope{}, fmt.Errorf("%w: broker name %q lacks prefix %q", ErrInvalid, name, LogicBrokerPrefix)
	}
	if rest == GlobalScope {
		return Global(), nil
	}
	if len(rest) > MaxScopeLen {
		return Scope{}, fmt.Errorf("%w: broker name %q: scope of %d bytes, limit %d", ErrInvalid, name, len(rest), MaxScopeLen)
	}
	names := strings.Split(rest, "_")
	for i, n := range names {
		if err := checkClusterName(n); err != nil {
			return Scope{}, fmt.Errorf("broker name %q: %w", name, err)
		}
		if i > 0 && names[i-1] >= n {
			return Scope{}, fmt.Errorf("%w: broker name %q: clusters not sorted and distinct (%q before %q)", ErrInvalid, name, names[i-1], n)
		}
	}
	return Scope{name: strings.Join(names, ",")}, nil
}

func checkClusterName(n string) error {
	if n == "" {
		return fmt.Errorf("%w: empty cluster name", ErrInvalid)
	}
	if strings.EqualFold(n, GlobalScope) {
		return fmt.Errorf("%w: cluster name %q is reserved", ErrInvalid, n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '-' || c == '.' {
			continue
		}
		return fmt.Errorf("%w: cluster name %q: byte %q not allowed (only letters, digits, '-', '.')", ErrInvalid, n, c)
	}
	return nil
}

// String returns the canonical spelling of s, "" for the zero Scope.
func (s Scope) String() string { return s.name }

// IsZero reports whether s is the zero Scope.
func (s Scope) IsZero() bool { return s.name == "" }

// IsGlobal reports whether s is the global scope.
func (s Scope) IsGlobal() bool { return s.name == GlobalScope }

// Clusters returns the sorted cluster names of s, nil for the global and the
// zero scope. The slice is the caller's.
func (s Scope) Clusters() []string {
	if s.IsZero() || s.IsGlobal() {
		return nil
	}
	return strings.Split(s.name, ",")
}

// BrokerName returns the logic broker name that stands for s in routes:
// "__logic__global", "__logic__clusterA", "__logic__c1_c2"; "" for the zero
// Scope.
func (s Scope) BrokerName() string {
	if s.IsZero() {
		return ""
	}
	return LogicBrokerPrefix + strings.ReplaceAll(s.name, ",", "_")
}

// Overlaps reports whether a topic in s and a topic of the same name in other
// could collide: the global scope overlaps every scope, cluster scopes overlap
// when they share a cluster. The zero Scope overlaps nothing.
func (s Scope) Overlaps(other Scope) bool {
	if s.IsZero() || other.IsZero() {
		return false
	}
	if s.IsGlobal() || other.IsGlobal() {
		return true
	}
	theirs := other.Clusters()
	for _, c := range s.Clusters() {
		if slices.Contains(theirs, c) {
			return true
		}
	}
	return false
}

// Contains reports whether a client in scope client belongs to s: the global
// scope contains every scope, and a cluster scope contains a cluster scope
// whose clusters it all lists. No cluster scope contains the global scope.
func (s Scope) Contains(client Scope) bool {
	if s.IsZero() || client.IsZero() {
		return false
	}
	if s.IsGlobal() {
		return true
	}
	if client.IsGlobal() {
		return false
	}
	mine := s.Clusters()
	for _, c := range client.Clusters() {
		if !slices.Contains(mine, c) {
			return false
		}
	}
	return true
}

// CheckScopeConflict reports ErrScopeConflict when a mapping of topic in
// existing has a scope other than scope that overlaps it: one topic name
// lives in one scope of any overlapping set (the global scope excludes every
// cluster scope and the reverse). A mapping in scope itself is no conflict;
// replacing it is a matter of epochs (CheckEpoch). Mappings of other topics
// are ignored.
func CheckScopeConflict(topic string, scope Scope, existing []Mapping) error {
	if scope.IsZero() {
		return fmt.Errorf("%w: topic %q: zero scope", ErrInvalid, topic)
	}
	for _, m := range existing {
		if m.Topic != topic {
			continue
		}
		s, err := ParseScope(m.Scope)
		if err != nil {
			return fmt.Errorf("topic %q: existing mapping: %w", topic, err)
		}
		if s != scope && s.Overlaps(scope) {
			return fmt.Errorf("%w: topic %q exists in scope %q, which overlaps %q", ErrScopeConflict, topic, s, scope)
		}
	}
	return nil
}
