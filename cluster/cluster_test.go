package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/offsetd/offsetd/coordinator"
)

// testTimeout bounds each test's waiting; they take well under a second
// when nothing is wrong.
const testTimeout = 30 * time.Second

func TestReplicatedCommit(t *testing.T) {
	tc := newTestCluster(t, 1, 3, 4)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	groups := []string{"g1", "g2", "g3", "g4", "g5", "g6"}
	for i, g := range groups {
		if err := tc.commit(ctx, g, int64(100+i)); err != nil {
			t.Fatalf("commit %s: %v", g, err)
		}
	}
	// Every replica applies every committed record.
	for _, id := range tc.peers {
		for i, g := range groups {
			if err := awaitApplied(ctx, tc.node(id), g, int64(100+i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Writes to a follower are refused with the leader's id.
	n := tc.node(1)
	for _, g := range groups {
		leader, self := n.Coordinator().Leader(g)
		if self {
			continue
		}
		err := n.Coordinator().Commit(ctx, g, []coordinator.OffsetCommit{{Topic: "t", Offset: 1}})
		var nle *coordinator.NotLeaderError
		if !errors.As(err, &nle) || nle.Leader != leader {
			t.Fatalf("commit of %s on follower 1: %v, want NotLeaderError naming %d", g, err, leader)
		}
	}
}

func TestRestartKeepsCommits(t *testing.T) {
	tc := newTestCluster(t, 2, 3, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := range 20 {
		if err := tc.commit(ctx, "g", int64(i)); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	for _, id := range tc.peers {
		tc.stop(id)
	}
	for _, id := range tc.peers {
		tc.start(id)
	}
	got, err := tc.fetch(ctx, "g")
	if err != nil || got != 19 {
		t.Fatalf("fetch after restarting every node: %d, %v; want 19", got, err)
	}
}
