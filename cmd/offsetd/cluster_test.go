package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/cluster"
)

// freeAddrs returns n loopback addresses whose ports were free a moment
// ago: a cluster's nodes must know each other's addresses before they
// start. The ports are below the kernel's ephemeral range, so that the
// nodes' own outgoing connections cannot take them meanwhile.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(10000))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken
		}
		l.Close()
		if !slices.Contains(out, addr) {
			out = append(out, addr)
		}
	}
	return out
}

// peersOf returns the -peers entries of nodes 1, 2, ... whose Raft
// listeners are at raft.
func peersOf(raft []string) []string {
	var peers []string
	for i, a := range raft {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	return peers
}

// startCluster runs three offsetd serve nodes of one cluster in this
// process, with args added to each command line; it returns them by id,
// and their Raft addresses.
func startCluster(t *testing.T, args ...string) (map[int]served, []string) {
	t.Helper()
	addrs := freeAddrs(t, 6)
	raft, api := addrs[:3], addrs[3:]
	peers := peersOf(raft)
	dir := t.TempDir()
	nodes := map[int]served{}
	for i := range 3 {
		nodes[i+1] = startServe(t, append([]string{"serve", "-data", filepath.Join(dir, fmt.Sprint(i+1)), "-listen", api[i],
			"-node-id", fmt.Sprint(i + 1), "-peers", strings.Join(peers, ","), "-raft-listen", raft[i]}, args...),
			map[string]string{"OFFSETD_KAFKA_LISTEN": ""})
	}
	return nodes, raft
}

// httpGet GETs url and returns the status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	code, body, err := get(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// retryingClient is a client of url that rides out elections: it retries
// 503 answers often and long.
func retryingClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.New(url, client.Options{Retries: 100, MaxRetryWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServeClusterTLS runs a cluster with TLS and a token: clients speak
// HTTPS to any node and are sent on to leaders over HTTPS, and the nodes'
// Raft traffic is HTTPS too, refusing plain HTTP.
func TestServeClusterTLS(t *testing.T) {
	cert, key := selfSigned(t)
	token := writeFile(t, "token", "s3cret", 0o600)
	nodes, raft := startCluster(t, "-tls-cert", cert, "-tls-key", key, "-raft-ca-file", cert, "-auth-token-file", token)
	pool, err := readCertPool(cert)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for id, n := range nodes {
		if !strings.HasPrefix(n.url, "https://") {
			t.Fatalf("node %d serves %s", id, n.url)
		}
		c, err := client.New(n.url, client.Options{Token: "s3cret", HTTPClient: &http.Client{Transport: tr}, Retries: 100, MaxRetryWait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Commit(ctx, "g", -1, []client.OffsetCommit{{Topic: "t", Offset: int64(id)}}); err != nil {
			t.Fatalf("commit through node %d: %v", id, err)
		}
		if o, err := c.Offset(ctx, "g", "t", 0); err != nil || o.Offset != int64(id) {
			t.Fatalf("offset through node %d: %+v, %v", id, o, err)
		}
	}
	// Plain HTTP to a Raft listener is refused.
	resp, err := http.Post("http://"+raft[0]+cluster.RaftPath, "application/octet-stream", nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusNoContent {
			t.Fatal("a Raft listener took a message over plain HTTP")
		}
	}
}

// TestServeClusterListenPortZero runs a cluster whose nodes listen for
// clients on port 0 without -advertise: each tells the others the port it
// picked, so that a node that does not lead a group's partition names a
// leader a client can reach, and a commit sent there is sent on to it.
func TestServeClusterListenPortZero(t *testing.T) {
	raft := freeAddrs(t, 3)
	peers := peersOf(raft)
	dir := t.TempDir()
	nodes := map[uint64]served{}
	for i := range 3 {
		nodes[uint64(i+1)] = startServe(t, []string{"serve", "-data", filepath.Join(dir, fmt.Sprint(i+1)), "-listen", "127.0.0.1:0",
			"-node-id", fmt.Sprint(i + 1), "-peers", strings.Join(peers, ","), "-raft-listen", raft[i]},
			map[string]string{"OFFSETD_KAFKA_LISTEN": ""})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := retryingClient(t, nodes[1].url)
	for g := 0; ; g++ {
		group := fmt.Sprintf("g%d", g)
		info, err := c.Coordinator(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if info.Self {
			continue // led by node 1: ask of another group
		}
		if want := strings.TrimPrefix(nodes[info.Leader].url, "http://"); info.Address != want {
			t.Fatalf("node 1 sends clients of %s to node %d at %s; it serves at %s", group, info.Leader, info.Address, want)
		}
		if _, err := c.Commit(ctx, group, -1, []client.OffsetCommit{{Topic: "t", Offset: 7}}); err != nil {
			t.Fatalf("commit of %s through node 1: %v", group, err)
		}
		break
	}
}

// TestServeCluster runs three offsetd serve nodes of one cluster in this
// process: a client sent to any node commits and reads through the
// partition's leader, and once the leader's node stops, the others serve
// the group again with its acknowledged offset.
func TestServeCluster(t *testing.T) {
	nodes, _ := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clientOf := func(id int) *client.Client { return retryingClient(t, nodes[id].url) }
	commit := []client.OffsetCommit{{Topic: "t", Partition: 0, Offset: 7}}
	if _, err := clientOf(2).Commit(ctx, "g", -1, commit); err != nil {
		t.Fatalf("commit through node 2: %v", err)
	}
	info, err := clientOf(3).Coordinator(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, err := clientOf(3).Offset(ctx, "g", "t", 0); err != nil || o.Offset != 7 {
		t.Fatalf("offset through node 3: %+v, %v; want 7", o, err)
	}

	leader := nodes[int(info.Leader)]
	if code := leader.stop(); code != 0 {
		t.Fatalf("leader %d exited with %d", info.Leader, code)
	}
	delete(nodes, int(info.Leader))
	stopped := time.Now()
	// The stopped node's journal holds Raft records, which verify checks
	// and dump decodes, with the commit each entry carries.
	out := mustRun(t, 0, nil, "verify", leader.dir)
	for _, want := range []string{"raft_entry", "raft_hard_state", "verify: ok"} {
		if !strings.Contains(out, want) {
			t.Fatalf("verify of a cluster node lacks %q:\n%s", want, out)
		}
	}
	if out := mustRun(t, 0, nil, "dump", leader.dir); !strings.Contains(out, `"kind":"normal","record":{"type":"commit","group":"g"`) {
		t.Fatalf("dump of a cluster node shows no commit of g in a raft entry:\n%s", out)
	}
	for id := range nodes {
		if o, err := clientOf(id).Offset(ctx, "g", "t", 0); err != nil || o.Offset != commit[0].Offset {
			t.Fatalf("offset through node %d after leader %d stopped: %+v, %v; want %d", id, info.Leader, o, err, commit[0].Offset)
		}
		commit[0].Offset++
		if _, err := clientOf(id).Commit(ctx, "g", -1, commit); err != nil {
			t.Fatalf("commit through node %d after leader %d stopped: %v", id, info.Leader, err)
		}
		t.Logf("node %d served again %v after the leader stopped", id, time.Since(stopped).Round(time.Millisecond))
	}
}

// TestServeClusterMembers adds a fourth node to a running cluster with
// offsetd cluster add-node (the node started with -join on an empty data
// directory, the others learning its Raft address from the change), after
// moving a partition's replica to it with offsetd cluster move; then it
// removes a founding node with offsetd cluster remove-node, and stops it:
// the acknowledged offsets are still served, through the new node too,
// also once a node restarted with the founding list of peers.
func TestServeClusterMembers(t *testing.T) {
	addrs := freeAddrs(t, 8)
	raft, api := addrs[:4], addrs[4:]
	peers := peersOf(raft[:3])
	dir := t.TempDir()
	env := map[string]string{"OFFSETD_KAFKA_LISTEN": ""}
	nodeArgs := func(id int, peers []string) []string {
		return []string{"serve", "-data", filepath.Join(dir, fmt.Sprint(id)), "-listen", api[id-1], "-partitions", "2",
			"-node-id", fmt.Sprint(id), "-peers", strings.Join(peers, ","), "-raft-listen", raft[id-1]}
	}
	nodes := map[int]served{}
	for id := 1; id <= 3; id++ {
		nodes[id] = startServe(t, nodeArgs(id, peers), env)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clientOf := func(id int) *client.Client { return retryingClient(t, nodes[id].url) }
	commit := func(via, offset int) {
		t.Helper()
		if _, err := clientOf(via).Commit(ctx, "g", -1, []client.OffsetCommit{{Topic: "t", Offset: int64(offset)}}); err != nil {
			t.Fatalf("commit %d through node %d: %v", offset, via, err)
		}
	}
	check := func(via, offset int) {
		t.Helper()
		if o, err := clientOf(via).Offset(ctx, "g", "t", 0); err != nil || o.Offset != int64(offset) {
			t.Fatalf("offset through node %d: %+v, %v; want %d", via, o, err, offset)
		}
	}
	commit(1, 1)

	nodes[4] = startServe(t, append(nodeArgs(4, append(slices.Clone(peers), "4="+raft[3])), "-join"), env)
	// Until it is added, node 4 is not ready, and says what to run.
	if code, body := httpGet(t, nodes[4].url+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"not_added"`) {
		t.Fatalf("/readyz of a node waiting to be added: %d %s", code, body)
	}
	if want := "offsetd cluster add-node -raft-addr " + raft[3] + " 4"; !strings.Contains(nodes[4].stderr.String(), want) {
		t.Fatalf("node 4, waiting to be added, does not say to run %q:\n%s", want, nodes[4].stderr)
	}
	if !strings.Contains(nodes[4].stderr.String(), "Kafka listener off") {
		t.Errorf("node 4 runs without -kafka-peers and does not say its Kafka listener is off:\n%s", nodes[4].stderr)
	}
	admin := func(via int, args ...string) string {
		return mustRun(t, 0, map[string]string{"OFFSETD_ADDR": nodes[via].url}, append([]string{"cluster"}, args...)...)
	}
	if code, _, errs := runCmd(t, map[string]string{"OFFSETD_ADDR": nodes[1].url}, "cluster", "move", "1", "2", "2"); code != 2 {
		t.Fatalf("a move from a node to itself: exit %d, %s", code, errs)
	}
	// Partition 1's replica moves from node 1 to node 4, then node 4 joins
	// partition 0 too, and node 1 leaves it.
	// What each command prints is the configuration as the leader of each
	// partition answered it, once the change was made.
	if out := admin(2, "move", "-raft-addr", raft[3], "1", "1", "4"); !strings.Contains(out, "2,3,4 ") {
		t.Fatalf("cluster move of partition 1 to node 4:\n%s", out)
	}
	if out := admin(3, "add-node", "-raft-addr", raft[3], "4"); strings.Count(out, ",4 ") != 2 {
		t.Fatalf("cluster add-node 4:\n%s", out)
	}
	commit(4, 2)
	check(4, 2)
	if code, body := httpGet(t, nodes[4].url+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz of node 4 once added: %d %s", code, body)
	}
	if out := admin(3, "remove-node", "1"); strings.Count(out, "2,3,4 ") != 2 {
		t.Fatalf("cluster remove-node 1:\n%s", out)
	}
	// Node 1 learns of its removal as it applies it, a moment later: it
	// says so, is not ready, and refuses requests naming its removal.
	for {
		code, body := httpGet(t, nodes[1].url+"/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, `"code":"node_removed"`) {
			break
		}
		if code != http.StatusOK || ctx.Err() != nil {
			t.Fatalf("/readyz of node 1 after its removal: %d %s (%v)", code, body, ctx.Err())
		}
		select {
		case <-time.After(10 * time.Millisecond): // the node's state, seen from outside: nothing to wait on
		case <-ctx.Done():
		}
	}
	if _, err := clientOf(1).Offset(ctx, "g", "t", 0); !errors.Is(err, client.ErrNodeRemoved) || !strings.Contains(err.Error(), "removed from the cluster") {
		t.Fatalf("a read through removed node 1: %v, want ErrNodeRemoved naming the removal", err)
	}
	if !strings.Contains(nodes[1].stderr.String(), "this node was removed from the cluster") {
		t.Fatalf("node 1 does not log its removal:\n%s", nodes[1].stderr)
	}
	if code := nodes[1].stop(); code != 0 {
		t.Fatalf("node 1 exited with %d", code)
	}
	delete(nodes, 1)
	check(4, 2)
	commit(2, 3)
	check(3, 3)
	status := admin(4, "status")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^node 4 \(asked\): member$`),
		regexp.MustCompile(`(?m)^2 +\S+ +yes +(active|-) +member$`),
		regexp.MustCompile(`(?m)^3 +\S+ +yes +(active|-) +member$`),
		regexp.MustCompile(`(?m)^4 +\(asked\) +- +(active|-) +member$`),
		// A partition may be electing a leader: its lag is then unknown.
		regexp.MustCompile(`(?m)^0 +([234] +\d+ +2,3,4 +- +- +2:\d+ 3:\d+ 4:\d+|none .*2:\? 3:\? 4:\?)$`),
		regexp.MustCompile(`(?m)^1 +([234] +\d+ +2,3,4 +- +- +2:\d+ 3:\d+ 4:\d+|none .*2:\? 3:\? 4:\?)$`),
	} {
		if !want.MatchString(status) {
			t.Fatalf("cluster status lacks %v:\n%s", want, status)
		}
	}
	if strings.Contains(status, "did not answer") {
		t.Fatalf("cluster status with every voter up:\n%s", status)
	}

	// Node 2 restarts with the -peers it was first given, which lack node
	// 4: it learns node 4's Raft address from node 4's messages, and the
	// two of them serve once node 3 stops.
	if code := nodes[2].stop(); code != 0 {
		t.Fatalf("node 2 exited with %d", code)
	}
	nodes[2] = startServe(t, nodeArgs(2, peers), env)
	commit(2, 4)
	if code := nodes[3].stop(); code != 0 {
		t.Fatalf("node 3 exited with %d", code)
	}
	delete(nodes, 3)
	commit(4, 5)
	check(2, 5)
}
