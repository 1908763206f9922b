package cache

import (
	"testing"

	"github.com/offsetd/offsetd/statictopic"
)

func TestMappingsAndSwitches(t *testing.T) {
	tab := NewMappings()
	tab.Put(statictopic.Mapping{Topic: "t", Scope: "a", Epoch: 1})
	tab.Put(statictopic.Mapping{Topic: "t", Scope: "b", Epoch: 1})
	tab.Put(statictopic.Mapping{Topic: "t", Scope: "a", Epoch: 2})
	if m, ok := tab.Get("t", "a"); !ok || m.Epoch != 2 {
		t.Fatalf("Get = %+v %v", m, ok)
	}
	if n := len(tab.Topic("t", nil)); n != 2 || tab.Len() != 2 || len(tab.All(nil)) != 2 {
		t.Fatalf("Topic has %d, Len %d", n, tab.Len())
	}

	s := NewSwitches()
	s.SetGlobalRead("a", true)
	if !s.GlobalRead("a") || s.GlobalRead("b") || len(s.Scopes(nil)) != 1 {
		t.Fatal("switch a not on")
	}
	s.SetGlobalRead("a", false)
	if s.GlobalRead("a") || len(s.Scopes(nil)) != 0 {
		t.Fatal("switch a not off")
	}
}
