package cache

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

func TestResponsesSetWaitGet(t *testing.T) {
	r, err := NewResponses(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	key := ResponseKey('g', 7, "payments")
	if _, ok := r.Get(key); ok {
		t.Fatal("hit in an empty cache")
	}
	r.Set(key, []byte(`{"version":7}`))
	r.Wait()
	body, ok := r.Get(key)
	if !ok || string(body) != `{"version":7}` {
		t.Fatalf("Get = %q, %v after Set and Wait", body, ok)
	}
	if _, ok := r.Get(ResponseKey('g', 8, "payments")); ok {
		t.Fatal("a newer version hit the older version's bytes")
	}
}

// A hash collision inside ristretto must be a miss, never another key's
// bytes (DESIGN.md §4).
func TestResponsesCollisionIsMiss(t *testing.T) {
	r, err := newResponses(1<<20, func(string) (uint64, uint64) { return 1, 1 })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a, b := ResponseKey('g', 1, "a"), ResponseKey('g', 1, "b")
	r.Set(a, []byte("A"))
	r.Wait()
	if body, ok := r.Get(a); !ok || string(body) != "A" {
		t.Fatalf("Get(a) = %q, %v", body, ok)
	}
	if body, ok := r.Get(b); ok {
		t.Fatalf("Get(b) returned a's bytes %q", body)
	}
}

func TestResponsesBudget(t *testing.T) {
	const budget = 64 << 10
	r, err := NewResponses(budget)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	body := bytes.Repeat([]byte("x"), 4<<10)
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = ResponseKey('g', uint64(i), "group")
		r.Set(keys[i], body)
		r.Wait()
	}
	held := 0
	for _, k := range keys {
		if _, ok := r.Get(k); ok {
			held++
		}
	}
	if most := budget / (len(body) + ResponseEntryOverhead); held > most {
		t.Fatalf("cache holds %d entries of %d bytes, budget allows %d", held, len(body), most)
	}
}

func TestResponseKeyUnambiguous(t *testing.T) {
	seen := map[string]string{}
	cases := []struct {
		version uint64
		parts   []string
	}{
		{1, []string{"ab", "c"}},
		{1, []string{"a", "bc"}},
		{1, []string{"a\x00", "c"}},
		{1, []string{"a", "\x00c"}},
		{12, []string{"a", "b"}},
		{1, []string{"a", "b2"}},
	}
	for _, c := range cases {
		k := ResponseKey('g', c.version, c.parts...)
		desc := fmt.Sprint(c)
		if other, ok := seen[k]; ok {
			t.Fatalf("%s and %s share key %q", desc, other, k)
		}
		seen[k] = desc
	}
}

func TestNilResponses(t *testing.T) {
	var r *Responses
	r.Set("k", []byte("v"))
	r.Wait()
	if _, ok := r.Get("k"); ok {
		t.Fatal("nil cache hit")
	}
	r.Close()
	if _, err := NewResponses(0); err == nil {
		t.Fatal("NewResponses(0) succeeded")
	}
}

// Close may run while other goroutines still Set, Get and Wait (a server
// closed with requests in flight): they must miss or do nothing, never
// panic on ristretto's closed buffer.
func TestResponsesCloseWhileInUse(t *testing.T) {
	for range 20 {
		r, err := NewResponses(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := ResponseKey('g', uint64(i), fmt.Sprint(w))
					r.Set(key, []byte("body"))
					r.Get(key)
				}
			}()
		}
		r.Close()
		r.Set("k", []byte("v"))
		r.Wait()
		if _, ok := r.Get("k"); ok {
			t.Fatal("a closed cache returned a hit")
		}
		close(stop)
		wg.Wait()
	}
}
