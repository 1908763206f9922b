package cache

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/dgraph-io/ristretto/v2"
)

// ResponseEntryOverhead is what one cached response is charged on top of
// its key and body: ristretto's own bookkeeping is about 220 bytes per
// entry, so a budget counted in body bytes alone would be overrun by many
// small responses.
const ResponseEntryOverhead = 256

// Responses is a bounded, lossy cache of encoded responses (the JSON of a
// group's offsets, a mapping, a route), so that polling clients do not make
// the server encode the same bytes again and again.
//
// It is never a store of record. A key must name what its bytes were derived
// from and the version they were derived at (ResponseKey), so that the bytes
// under a key never change: a miss, a dropped Set or an eviction costs a
// re-encode, never a wrong answer. Set is asynchronous and may drop the
// entry; Get compares the whole key, so a hash collision inside ristretto
// is a miss, not another key's bytes.
//
// A nil *Responses is a valid cache that holds nothing. It is safe for
// concurrent use, Close included.
type Responses struct {
	c *ristretto.Cache[string, response]
	// mu makes Close wait for the calls in progress: ristretto's Close
	// closes its buffer before it marks itself closed, so a Set running
	// meanwhile would send on a closed channel and panic.
	mu     sync.RWMutex
	closed bool // guarded by mu
}

type response struct {
	key  string
	body []byte
}

// NewResponses returns a cache that holds about maxBytes of keys, bodies
// and per-entry overhead. maxBytes must be positive.
func NewResponses(maxBytes int64) (*Responses, error) {
	return newResponses(maxBytes, nil)
}

// newResponses lets tests choose ristretto's key hash, to force collisions.
func newResponses(maxBytes int64, keyToHash func(string) (uint64, uint64)) (*Responses, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("cache: response cache budget %d bytes, want > 0", maxBytes)
	}
	// ristretto wants about ten counters per entry it may hold; responses
	// are rarely under a few hundred bytes.
	counters := min(max(maxBytes/50, 1<<10), 1<<24)
	c, err := ristretto.NewCache(&ristretto.Config[string, response]{
		NumCounters:        counters,
		MaxCost:            maxBytes,
		BufferItems:        64,
		IgnoreInternalCost: true, // ResponseEntryOverhead stands for it
		KeyToHash:          keyToHash,
	})
	if err != nil {
		return nil, fmt.Errorf("cache: response cache: %w", err)
	}
	return &Responses{c: c}, nil
}

// Get returns the body cached under key. The caller must not modify it.
func (r *Responses) Get(key string) ([]byte, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return nil, false
	}
	v, ok := r.c.Get(key)
	if !ok || v.key != key {
		return nil, false
	}
	return v.body, true
}

// Set offers body to the cache under key; it may be kept, dropped or
// evicted later. The cache keeps body itself: the caller must not modify it
// afterwards. A Get right after Set may still miss.
func (r *Responses) Set(key string, body []byte) {
	if r == nil {
		return
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return
	}
	r.c.Set(key, response{key: key, body: body}, int64(len(key)+len(body)+ResponseEntryOverhead))
}

// Wait blocks until every Set so far has been applied or dropped; tests
// use it to make a following Get deterministic.
func (r *Responses) Wait() {
	if r == nil {
		return
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.closed {
		r.c.Wait()
	}
}

// Close stops the cache's goroutines and frees its memory, once the calls
// in progress have returned. Get and Set afterwards miss and do nothing.
func (r *Responses) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.c.Close()
	}
}

// ResponseKey returns the cache key of a response of kind (one byte naming
// the resource type, chosen by the caller) derived from the resource named
// by parts at version. Each part is length-prefixed, so names holding any
// bytes cannot make two keys equal; a kind should always come with the same
// number of parts.
func ResponseKey(kind byte, version uint64, parts ...string) string {
	n := 1 + binary.MaxVarintLen64
	for _, p := range parts {
		n += binary.MaxVarintLen64 + len(p)
	}
	b := make([]byte, 0, n)
	b = append(b, kind)
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	b = binary.AppendUvarint(b, version)
	return string(b)
}
