package client_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/server"
)

// dropping answers every fifth POST's request and then closes the
// connection without an answer (written, the answer lost), and closes
// every seventh's before reading it (never written).
func dropping(n *atomic.Int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k := n.Add(1)
			if r.Method != http.MethodPost || k%5 != 0 && k%7 != 0 {
				next.ServeHTTP(w, r)
				return
			}
			if k%5 == 0 {
				next.ServeHTTP(httptest.NewRecorder(), r)
			}
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		})
	}
}

// Many callers commit through the client's own transport, alone and in
// batches, to a server that loses answers and drops requests, with some
// callers giving up and some commits refused one by one (a group "."
// has no path, a negative partition is invalid) inside batches. Every
// commit goes to a group of its own, so a result handed to the wrong
// commit of a batch shows: an acknowledged commit must read back with
// its own offset at the version it was acknowledged at.
func TestCommitBatchesUnderDrops(t *testing.T) {
	t.Run("lean", func(t *testing.T) { testCommitBatchesUnderDrops(t, false) })
	t.Run("net/http", func(t *testing.T) { testCommitBatchesUnderDrops(t, true) })
}

func testCommitBatchesUnderDrops(t *testing.T, netHTTP bool) {
	var n, batches atomic.Int64
	ts, _ := newServer(t, server.Options{}, false, func(next http.Handler) http.Handler {
		next = dropping(&n)(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/commits" {
				batches.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	opts := client.Options{MaxCommitRequests: 2}
	if netHTTP {
		opts.HTTPClient = ts.Client()
	}
	c, err := client.New(ts.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	const callers, rounds = 16, 25
	type acked struct {
		group   string
		offset  int64
		version uint64
	}
	var mu sync.Mutex
	var got []acked
	var refusedWrong []string
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for i := range rounds {
				ctx, cancel := context.WithCancel(t.Context())
				if rng.IntN(6) == 0 {
					go cancel()
				}
				group, part := fmt.Sprintf("c%d-%d", w, i), int32(w)
				bad := rng.IntN(8)
				switch bad {
				case 0:
					group = "."
				case 1:
					part = -1
				}
				off := int64(w*1000 + i)
				v, err := c.Commit(ctx, group, -1, []client.OffsetCommit{{Topic: "t", Partition: part, Offset: off, LeaderEpoch: -1}})
				cancel()
				mu.Lock()
				switch {
				case err == nil && bad <= 1:
					refusedWrong = append(refusedWrong, fmt.Sprintf("%s partition %d acknowledged at %d", group, part, v))
				case err == nil:
					got = append(got, acked{group, off, v})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(refusedWrong) > 0 {
		t.Fatalf("invalid commits acknowledged: %v", refusedWrong)
	}
	if len(got) == 0 {
		t.Fatal("nothing acknowledged")
	}
	reader, err := client.New(ts.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.CloseIdleConnections)
	for _, a := range got {
		g, err := reader.GroupOffsets(t.Context(), a.group, "") // reads are not dropped
		if err != nil || g.Version != a.version || len(g.Offsets) != 1 || g.Offsets[0].Offset != a.offset {
			t.Errorf("%s acknowledged offset %d at version %d, reads %+v, %v", a.group, a.offset, a.version, g, err)
		}
	}
	if batches.Load() == 0 {
		t.Fatal("no commit went in a batch")
	}
	t.Logf("%d of %d commits acknowledged, %d requests, %d of them batches", len(got), callers*rounds, n.Load(), batches.Load())
}
