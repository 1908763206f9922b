package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/partitioner"
	"github.com/offsetd/offsetd/server"
)

// TestRouting serves the HTTP API on every node of a 3-node cluster: any
// node says where a group lives, and a client sent to a follower is
// answered 421 with the leader's address, follows it, and commits and
// reads there.
func TestRouting(t *testing.T) {
	tc := newTestCluster(t, 4, 3, 4)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	urls := map[uint64]string{}
	for _, id := range tc.peers {
		n := tc.node(id)
		s, err := server.New(n.Coordinator(), server.Options{Cluster: n, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s)
		t.Cleanup(func() { hs.Close(); s.Close() })
		urls[id] = hs.URL
	}
	for _, id := range tc.peers {
		for _, other := range tc.peers {
			tc.node(id).SetAddress(other, strings.TrimPrefix(urls[other], "http://"))
		}
	}
	// Leaders settle on their preferred nodes; then they stay put.
	preferred := tc.awaitPreferred(ctx)
	part, _ := partitioner.New(tc.parts)
	leader := preferred(part.Group("g"))
	follower := tc.peers[0]
	if follower == leader {
		follower = tc.peers[1]
	}

	c, err := client.New(urls[follower], client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Coordinator(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if info.Leader != leader || info.Self || "http://"+info.Address != urls[leader] {
		t.Fatalf("coordinator of g on follower %d: %+v; want leader %d at %s", follower, info, leader, urls[leader])
	}
	if _, err := c.Commit(ctx, "g", -1, []client.OffsetCommit{{Topic: "t", Partition: 0, Offset: 42}}); err != nil {
		t.Fatalf("commit through follower %d: %v", follower, err)
	}
	o, err := c.Offset(ctx, "g", "t", 0)
	if err != nil || o.Offset != 42 {
		t.Fatalf("offset through follower %d: %+v, %v; want 42", follower, o, err)
	}

	// A static topic lives in its name's partition: created and read
	// through whichever node, on that partition's leader.
	for _, id := range tc.peers {
		sc, err := client.New(urls[id], client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		topic := fmt.Sprint("topic-", id)
		if _, err := sc.CreateStaticTopic(ctx, topic, "clusterA", 4, []string{"b1", "b2"}); err != nil {
			t.Fatalf("create static topic %s through node %d: %v", topic, id, err)
		}
		m, err := sc.StaticTopic(ctx, topic, "clusterA")
		if err != nil || m.TotalQueues != 4 {
			t.Fatalf("static topic %s through node %d: %+v, %v", topic, id, m, err)
		}
	}

	// Without a client to follow it, the answer is a 421 naming the leader.
	resp, err := http.Get(urls[follower] + "/v1/groups/g/offsets")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || "http://"+resp.Header.Get(server.LeaderHeader) != urls[leader] {
		t.Fatalf("read on follower %d: %s, leader header %q; want 421 naming %s", follower, resp.Status, resp.Header.Get(server.LeaderHeader), urls[leader])
	}
}
