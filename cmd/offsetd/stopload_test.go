package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/internal/offsetcheck"
)

// TestStopUnderLoad stops offsetd serve (as SIGTERM does) while clients
// commit and read through one Go client, whose concurrent commits share
// requests, starts it again on the same data and does it again, three
// times. Each stop must be clean, every commit acknowledged before it must
// be read back after the restart, and the history of commits and reads
// must be linearizable: a commit cut off by the stop may land or not, but
// nothing acknowledged rolls back and nothing never sent shows up.
func TestStopUnderLoad(t *testing.T) {
	dir := t.TempDir()
	args := []string{"serve", "-data", dir, "-listen", "127.0.0.1:0", "-partitions", "4", "-kafka-listen="}
	groups := make([]string, 24)
	for i := range groups {
		groups[i] = fmt.Sprintf("group-%02d", i)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h := offsetcheck.New()
	read := func(c *client.Client, g string) (int64, error) {
		o, err := c.Offset(ctx, g, "t", 0)
		if errors.Is(err, client.ErrNotFound) {
			return -1, nil
		}
		return o.Offset, err
	}
	for round := range 3 {
		s := startServe(t, args, nil)
		c, err := client.New(s.url, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// What the last round's clients were told must be there, before
		// any new commit.
		for i, g := range groups {
			call := h.Call()
			got, err := read(c, g)
			if err != nil {
				t.Fatalf("round %d: read %s: %v", round, g, err)
			}
			h.Read(len(groups)+i, g, got, call)
			if want, _, _ := h.LastAck(g); got < want {
				t.Fatalf("round %d: group %s reads %d after the restart, but %d was acknowledged", round, g, got, want)
			}
		}
		// Values grow across rounds, so that a commit of an earlier round
		// that comes back would show.
		// A writer or reader that fails (the server stopped) waits for the
		// round's end, and the load is halted before they go on: each
		// writer leaves at most one commit of unknown outcome, the one the
		// stop cut off.
		halted := make(chan struct{})
		var cut atomic.Int64
		load := h.LoadFrom(int64(round)*1_000_000, groups, 1,
			func(_ int, g string, v int64) error {
				_, err := c.Commit(ctx, g, -1, []client.OffsetCommit{{Topic: "t", Offset: v, LeaderEpoch: -1}})
				if err != nil {
					cut.Add(1)
					<-halted
				}
				return err
			},
			func(_ int, g string) (int64, error) {
				got, err := read(c, g)
				if err != nil {
					<-halted
				}
				return got, err
			})
		if err := h.AwaitAcks(ctx, 200); err != nil {
			t.Fatal(err)
		}
		status := s.stop()
		load.Halt()
		close(halted)
		load.Stop()
		t.Logf("round %d: %d commits acknowledged in all, %d cut off by the stop", round, h.Acked(), cut.Load())
		if status != 0 {
			t.Fatalf("round %d: serve exited with %d after its stop:\n%s", round, status, s.stderr)
		}
		if !strings.Contains(s.stderr.String(), "msg=stopped") {
			t.Fatalf("round %d: no clean stop in the log:\n%s", round, s.stderr)
		}
	}
	if err := h.Check(t.TempDir(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
}
