package client_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/server"
)

// The package's own transport (no HTTPClient) against a real server:
// commits alone and batched, point and group reads, a conditional poll
// answered 304, a long poll woken by a commit, a token, and 503s retried
// after their Retry-After, all over the same few connections.
func TestDefaultTransport(t *testing.T) {
	var refuse, seen atomic.Int32
	ts, coord := newServer(t, server.Options{AuthToken: "s3cret"}, false, refusing(&refuse, &seen))
	c, err := client.New(ts.URL, client.Options{Token: "s3cret", Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	ctx := t.Context()

	v, err := c.Commit(ctx, "g/1", 4, []client.OffsetCommit{{Topic: "t", Partition: 3, Offset: 10, LeaderEpoch: 2, Metadata: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.Offset(ctx, "g/1", "t", 3)
	if err != nil || o.Offset != 10 || o.LeaderEpoch != 2 || o.Metadata != "m" {
		t.Fatalf("Offset: %+v, %v", o, err)
	}
	if _, err := c.Offset(ctx, "g/1", "t", 4); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a missing offset: %v", err)
	}
	if _, changed, err := c.PollGroupOffsets(ctx, "g/1", "", v, 0); err != nil || changed {
		t.Fatalf("poll at the current version: changed %v, %v", changed, err)
	}

	polled := make(chan error, 1)
	go func() {
		g, changed, err := c.PollGroupOffsets(ctx, "g/1", "", v, time.Minute)
		if err == nil && (!changed || len(g.Offsets) != 2) {
			err = errors.New("the long poll did not return the new offsets")
		}
		polled <- err
	}()
	if _, err := c.Commit(ctx, "g/1", 4, []client.OffsetCommit{{Topic: "u", Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	if err := <-polled; err != nil {
		t.Fatal(err)
	}

	refuse.Store(2)
	seen.Store(0)
	if _, err := c.Commit(ctx, "g/2", -1, []client.OffsetCommit{{Topic: "t", Offset: 5, LeaderEpoch: -1}}); err != nil || seen.Load() != 3 {
		t.Fatalf("a commit after two 503s: %v after %d requests", err, seen.Load())
	}
	if o, ok, _ := coord.Fetch("g/2", "t", 0); !ok || o.Offset != 5 {
		t.Fatal("the retried commit is not there")
	}
	refuse.Store(10)
	var apiErr *client.Error
	if _, err := c.Groups(ctx); !errors.As(err, &apiErr) || apiErr.Code != "loading" || !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("after the retries: %v", err)
	}
	refuse.Store(0)

	// A body over the lean transport's limit goes through net/http.
	big := make([]client.OffsetCommit, 2000)
	for i := range big {
		big[i] = client.OffsetCommit{Topic: "big", Partition: int32(i), Offset: int64(i), LeaderEpoch: -1}
	}
	if _, err := c.Commit(ctx, "g/3", -1, big); err != nil {
		t.Fatalf("a commit of %d offsets: %v", len(big), err)
	}
	if o, err := c.Offset(ctx, "g/3", "big", 1999); err != nil || o.Offset != 1999 {
		t.Fatalf("the last offset of a large commit: %+v, %v", o, err)
	}

	anon, err := client.New(ts.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.CloseIdleConnections()
	if _, err := anon.Groups(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("without the token: %v", err)
	}
}
