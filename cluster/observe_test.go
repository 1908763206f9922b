package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/server"
)

// serveHTTP serves node id's HTTP API, with the node as the server's
// Cluster, until the test ends, and returns its URL.
func (tc *testCluster) serveHTTP(id uint64) string {
	tc.t.Helper()
	n := tc.node(id)
	s, err := server.New(n.Coordinator(), server.Options{Cluster: n, Logger: quiet})
	if err != nil {
		tc.t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	tc.t.Cleanup(func() { hs.Close(); s.Close() })
	return hs.URL
}

// scrape reads url's /metrics in the text format: series (name and
// labels, as printed) to value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// logRecords collects the records of one message that nodes log.
type logRecords struct {
	mu   sync.Mutex
	recs map[uint64][]slog.Record // guarded by mu: by node
	more chan struct{}            // gets a token with each record
}

// collect starts collecting what the nodes ids log with message msg.
func (tc *testCluster) collect(msg string, ids ...uint64) *logRecords {
	lr := &logRecords{recs: map[uint64][]slog.Record{}, more: make(chan struct{}, 1)}
	for _, id := range ids {
		tc.watchLog(id, func(r slog.Record) {
			if r.Message != msg {
				return
			}
			lr.mu.Lock()
			lr.recs[id] = append(lr.recs[id], r)
			lr.mu.Unlock()
			select {
			case lr.more <- struct{}{}:
			default:
			}
		})
	}
	return lr
}

// of returns the records node id logged so far.
func (lr *logRecords) of(id uint64) []slog.Record {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return append([]slog.Record(nil), lr.recs[id]...)
}

// await waits until node id logged a record that match accepts.
func (lr *logRecords) await(ctx context.Context, id uint64, what string, match func(r slog.Record) bool) error {
	for {
		for _, r := range lr.of(id) {
			if match(r) {
				return nil
			}
		}
		select {
		case <-lr.more:
		case <-ctx.Done():
			return fmt.Errorf("node %d never logged %s: %w", id, what, ctx.Err())
		}
	}
}

func uintAttr(r slog.Record, key string) uint64 {
	v, _ := attr(r, key)
	return v.Uint64()
}

// TestRaftMetricsFromTheStart scrapes a node's /metrics as soon as it
// serves: every offsetd_raft_* series is there, per partition and per
// peer, the counters of what has not happened at zero.
func TestRaftMetricsFromTheStart(t *testing.T) {
	const parts = 4
	tc := newTestCluster(t, 20, 3, parts)
	m := scrape(t, tc.serveHTTP(1))
	want := []string{"offsetd_raft_leader_changes_total", "offsetd_raft_proposals_pending",
		"offsetd_raft_snapshots_sent_total", "offsetd_raft_snapshots_received_total"}
	for p := range parts {
		for _, name := range []string{"offsetd_raft_leader", "offsetd_raft_term", "offsetd_raft_commit_index", "offsetd_raft_applied_index"} {
			want = append(want, fmt.Sprintf(`%s{partition="%d"}`, name, p))
		}
	}
	for _, peer := range []int{2, 3} {
		for _, name := range []string{"offsetd_raft_peer_reachable", "offsetd_raft_messages_sent_total", "offsetd_raft_messages_dropped_total"} {
			want = append(want, fmt.Sprintf(`%s{peer="%d"}`, name, peer))
		}
	}
	for _, series := range want {
		if _, ok := m[series]; !ok {
			t.Errorf("no %s in /metrics", series)
		}
	}
	for _, series := range []string{"offsetd_raft_snapshots_sent_total", "offsetd_raft_snapshots_received_total"} {
		if m[series] != 0 {
			t.Errorf("%s = %v at start, want 0", series, m[series])
		}
	}
	if _, ok := m[`offsetd_raft_peer_reachable{peer="1"}`]; ok {
		t.Error("node 1 reports itself as a peer")
	}
}

// TestLeaderChangeMetricAndLog stops the leader of a partition (it hands
// its lead off): on the new leader offsetd_raft_leader goes from 0 to 1,
// every node that stays logs the change once, naming the partition, the
// term and the old and new leaders, and offsetd_raft_leader_changes_total
// counts each change logged.
func TestLeaderChangeMetricAndLog(t *testing.T) {
	tc := newTestCluster(t, 21, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	old := tc.awaitPreferred(ctx)(0)
	urls := map[uint64]string{}
	before := map[uint64]map[string]float64{}
	var stay []uint64
	for _, id := range tc.peers {
		urls[id] = tc.serveHTTP(id)
		before[id] = scrape(t, urls[id])
		if want := map[bool]float64{true: 1, false: 0}[id == old]; before[id][`offsetd_raft_leader{partition="0"}`] != want {
			t.Fatalf("node %d: offsetd_raft_leader{partition=\"0\"} = %v, want %v (leader %d)", id, before[id][`offsetd_raft_leader{partition="0"}`], want, old)
		}
		if id != old {
			stay = append(stay, id)
		}
	}
	changes := tc.collect("raft leader changed", stay...)
	tc.stop(old)
	next, err := tc.node(stay[0]).AwaitLeader(ctx, 0, old)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range stay {
		if err := changes.await(ctx, id, fmt.Sprintf("the change to leader %d", next), func(r slog.Record) bool {
			return uintAttr(r, "new") == next
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.commit(ctx, "g", 1); err != nil { // the lead settled: no change is under way
		t.Fatal(err)
	}
	after := scrape(t, urls[next])
	if got := after[`offsetd_raft_leader{partition="0"}`]; got != 1 {
		t.Errorf("new leader %d: offsetd_raft_leader{partition=\"0\"} = %v, want 1", next, got)
	}
	// The commit acknowledged by the new leader moved its commit index, and
	// it applied what it acknowledged.
	commit, applied := after[`offsetd_raft_commit_index{partition="0"}`], after[`offsetd_raft_applied_index{partition="0"}`]
	if commit <= before[next][`offsetd_raft_commit_index{partition="0"}`] || applied != commit {
		t.Errorf("new leader %d: commit index %v (was %v), applied index %v; want it moved, and all applied",
			next, commit, before[next][`offsetd_raft_commit_index{partition="0"}`], applied)
	}
	for _, id := range stay {
		m := scrape(t, urls[id])
		recs := changes.of(id)
		seen := map[uint64]bool{}
		var firstOld uint64
		for i, r := range recs {
			if p, _ := attr(r, "partition"); p.Int64() != 0 {
				t.Errorf("node %d logged a change of partition %v", id, p)
			}
			term := uintAttr(r, "term")
			if seen[term] {
				t.Errorf("node %d logged the leader of term %d twice: %v", id, term, recs)
			}
			seen[term] = true
			if i == 0 {
				firstOld = uintAttr(r, "old")
			}
		}
		if firstOld != old {
			t.Errorf("node %d: its first change names old leader %d, want %d", id, firstOld, old)
		}
		last := recs[len(recs)-1]
		if uintAttr(last, "new") != next || float64(uintAttr(last, "term")) != m[`offsetd_raft_term{partition="0"}`] {
			t.Errorf("node %d: last change logged %v; leader %d, offsetd_raft_term %v", id, last, next, m[`offsetd_raft_term{partition="0"}`])
		}
		got := m["offsetd_raft_leader_changes_total"] - before[id]["offsetd_raft_leader_changes_total"]
		if got != float64(len(recs)) {
			t.Errorf("node %d: offsetd_raft_leader_changes_total rose by %v, with %d changes logged", id, got, len(recs))
		}
	}
}

// TestPeerReachability cuts a node off: the others read it unreachable,
// in the metric and in one log line each, count what they fail to send
// it, and read it reachable again, and log so, once it is back.
func TestPeerReachability(t *testing.T) {
	tc := newTestCluster(t, 22, 3, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tc.awaitPreferred(ctx) // node 1 leads partition 0: it sends node 3 heartbeats
	if err := tc.commit(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	url := tc.serveHTTP(1)
	before := scrape(t, url)
	if before[`offsetd_raft_peer_reachable{peer="3"}`] != 1 || before[`offsetd_raft_messages_sent_total{peer="3"}`] == 0 {
		t.Fatalf("before the cut: reachable %v, sent %v; want 1 and some",
			before[`offsetd_raft_peer_reachable{peer="3"}`], before[`offsetd_raft_messages_sent_total{peer="3"}`])
	}
	down := tc.collect("raft peer unreachable", 1, 2)
	tc.nw.Isolate(3)
	for _, id := range []uint64{1, 2} {
		if err := down.await(ctx, id, "node 3 unreachable", func(r slog.Record) bool { return uintAttr(r, "peer") == 3 }); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.commit(ctx, "g", 2); err != nil { // heartbeats to node 3 are lost meanwhile
		t.Fatal(err)
	}
	// Node 1, leading partition 0, stops hearing from node 3 too.
	heard := func(want bool) func(cluster.Stats) bool {
		return func(st cluster.Stats) bool {
			for _, f := range st.Partitions[0].Followers {
				if f.ID == 3 {
					return f.Active == want
				}
			}
			return false
		}
	}
	awaitStats(ctx, t, tc.node(1), tc.node(2), "node 3 inactive as leader of partition 0", heard(false))
	m := scrape(t, url)
	if m[`offsetd_raft_peer_reachable{peer="3"}`] != 0 || m[`offsetd_raft_peer_reachable{peer="2"}`] != 1 {
		t.Errorf("node 3 cut off: reachable{3} %v, reachable{2} %v; want 0 and 1",
			m[`offsetd_raft_peer_reachable{peer="3"}`], m[`offsetd_raft_peer_reachable{peer="2"}`])
	}
	if m[`offsetd_raft_messages_dropped_total{peer="3"}`] <= before[`offsetd_raft_messages_dropped_total{peer="3"}`] {
		t.Errorf("node 3 cut off: messages dropped stayed at %v", m[`offsetd_raft_messages_dropped_total{peer="3"}`])
	}
	up := tc.collect("raft peer reachable again", 1, 2)
	tc.nw.Heal()
	for _, id := range []uint64{1, 2} {
		if err := up.await(ctx, id, "node 3 reachable again", func(r slog.Record) bool { return uintAttr(r, "peer") == 3 }); err != nil {
			t.Fatal(err)
		}
		if n := len(down.of(id)); n != 1 {
			t.Errorf("node %d logged node 3 unreachable %d times, want once", id, n)
		}
	}
	if m := scrape(t, url); m[`offsetd_raft_peer_reachable{peer="3"}`] != 1 {
		t.Errorf("node 3 back: reachable %v, want 1", m[`offsetd_raft_peer_reachable{peer="3"}`])
	}
	awaitStats(ctx, t, tc.node(1), tc.node(2), "node 3 active again as leader of partition 0", heard(true))
}

// TestJoinAndRemovalReadiness follows a node through its life in a
// cluster: started to join, it is not ready and says what to run; added
// to every partition, it is ready; removed from every one, it logs it,
// /readyz fails, and requests are refused with an error naming the
// removal (not sent on to a leader).
func TestJoinAndRemovalReadiness(t *testing.T) {
	const parts = 2
	tc := newTestCluster(t, 23, 3, parts)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := tc.commit(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	n := tc.join(4)
	url := tc.serveHTTP(4)
	if err := n.Ready(); !errors.Is(err, cluster.ErrNotAdded) || !strings.Contains(err.Error(), "offsetd cluster add-node 4") {
		t.Fatalf("a joining node's Ready: %v, want ErrNotAdded naming the command to run", err)
	}
	requireStatus(t, url+"/readyz", http.StatusServiceUnavailable, "not_added")
	if st := n.Stats(); st.Membership != cluster.Joining {
		t.Errorf("a joining node's membership: %v", st.Membership)
	}

	removed := tc.collect("this node was removed from the cluster", 4)
	changes := tc.collect("raft configuration changed", 1)
	for p := range parts {
		if err := tc.changeReplicas(ctx, p, cluster.ReplicaChange{Add: 4}); err != nil {
			t.Fatal(err)
		}
	}
	for p := range parts { // each step of each addition, as node 1 applies it
		for _, step := range []struct {
			what string
			in   string
		}{{"node 4 a learner", "learners"}, {"node 4 a voter", "voters"}} {
			if err := changes.await(ctx, 1, fmt.Sprintf("partition %d making %s", p, step.what), func(r slog.Record) bool {
				part, _ := attr(r, "partition")
				ids, _ := attr(r, step.in)
				return part.Int64() == int64(p) && slices.Contains(ids.Any().([]uint64), 4)
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := n.Ready(); err != nil {
		t.Fatalf("added to every partition: %v", err)
	}
	requireStatus(t, url+"/readyz", http.StatusOK, "")
	for p := range parts {
		if err := tc.changeReplicas(ctx, p, cluster.ReplicaChange{Remove: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if err := removed.await(ctx, 4, "its removal", func(slog.Record) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if err := n.Ready(); !errors.Is(err, cluster.ErrRemoved) {
		t.Fatalf("removed from every partition: Ready %v, want ErrRemoved", err)
	}
	requireStatus(t, url+"/readyz", http.StatusServiceUnavailable, "node_removed")
	requireStatus(t, url+"/v1/groups/g/offsets", http.StatusGone, "node_removed")
	requireStatus(t, url+"/v1/coordinator?group=g", http.StatusGone, "node_removed")
	if got := len(removed.of(4)); got != 1 {
		t.Errorf("node 4 logged its removal %d times, want once: %v", got, removed.of(4))
	}
}

// requireStatus GETs url and fails the test unless it answers status, and
// the error code code (when not empty).
func requireStatus(t *testing.T, url string, status int, code string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
	}
	if resp.StatusCode != status || code != "" && !strings.Contains(b.String(), `"code":"`+code+`"`) {
		t.Fatalf("GET %s: %s %s, want %d %s", url, resp.Status, b.String(), status, code)
	}
}

// TestProposalsPending cuts a leader off, its clock stopped so that it
// keeps believing it leads: what it is asked to commit then waits in its
// log, counted by offsetd_raft_proposals_pending, until the cluster takes
// it back, and the count falls to zero.
func TestProposalsPending(t *testing.T) {
	tc := newTestCluster(t, 24, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := tc.commit(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	leader := tc.awaitPreferred(ctx)(0)
	ln := tc.node(leader)
	url := tc.serveHTTP(leader)
	if m := scrape(t, url); m["offsetd_raft_proposals_pending"] != 0 {
		t.Fatalf("a quiet leader has %v proposals pending", m["offsetd_raft_proposals_pending"])
	}
	tc.freeze(leader, true)
	tc.nw.Isolate(leader)
	done := make(chan error, 1)
	go func() {
		done <- ln.Coordinator().Commit(ctx, "g", []coordinator.OffsetCommit{{Topic: "t", Offset: 2}})
	}()
	other := tc.anyNode(0, leader)
	awaitStats(ctx, t, ln, other, "a proposal pending", func(st cluster.Stats) bool { return st.ProposalsPending > 0 })
	if m := scrape(t, url); m["offsetd_raft_proposals_pending"] == 0 {
		t.Fatal("offsetd_raft_proposals_pending is 0 with a proposal pending")
	}
	tc.nw.Heal()
	tc.freeze(leader, false)
	if err := <-done; err == nil {
		t.Log("the cut-off leader's commit went through once healed")
	}
	awaitStats(ctx, t, ln, other, "no proposal pending", func(st cluster.Stats) bool { return st.ProposalsPending == 0 })
	if m := scrape(t, url); m["offsetd_raft_proposals_pending"] != 0 {
		t.Fatalf("offsetd_raft_proposals_pending is %v once healed", m["offsetd_raft_proposals_pending"])
	}
}

// awaitStats waits until n's Stats satisfy ok, looking again at every
// tick of node clock (n's own may be stopped).
func awaitStats(ctx context.Context, t *testing.T, n, clock *cluster.Node, what string, ok func(cluster.Stats) bool) {
	t.Helper()
	for {
		wake := clock.Progressed()
		if ok(n.Stats()) {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("node %d: never %s: %v", n.ID(), what, ctx.Err())
		}
	}
}

// TestRemovedWhileCutOff removes a node from every partition while it
// receives nothing, so that it never applies its removal: the partitions'
// leaders, hearing from it (its elections, which they ignore), answer that
// it is no member, and it says it was removed and is not ready.
func TestRemovedWhileCutOff(t *testing.T) {
	const parts = 2
	members, _, _ := startHTTPCluster(t, 3, func(_, _ uint64) bool { return true })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	gone := members[3]
	for p := range parts {
		if _, err := gone.node.AwaitLeader(ctx, p, 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := gone.node.Ready(); err != nil {
		t.Fatalf("node 3 before its removal: %v", err)
	}
	removed := make(chan struct{})
	once := sync.OnceFunc(func() { close(removed) })
	defer gone.log.watch(func(r slog.Record) {
		if r.Message == "this node was removed from the cluster" {
			once()
		}
	})()
	gone.closed.Store(true) // from now on node 3 hears nothing

	for p := range parts {
		for {
			leader, err := members[1].node.AwaitLeader(ctx, p, 3)
			if err != nil {
				t.Fatal(err)
			}
			err = members[leader].node.ChangeReplicas(ctx, p, cluster.ReplicaChange{Remove: 3})
			var nle *coordinator.NotLeaderError
			if errors.As(err, &nle) {
				continue // the lead moved meanwhile
			}
			if err != nil {
				t.Fatalf("removing node 3 from partition %d on node %d: %v", p, leader, err)
			}
			break
		}
	}
	select {
	case <-removed:
	case <-ctx.Done():
		t.Fatalf("node 3 never logged its removal: %v", ctx.Err())
	}
	if err := gone.node.Ready(); !errors.Is(err, cluster.ErrRemoved) {
		t.Fatalf("node 3 after its removal: Ready %v, want ErrRemoved", err)
	}
	for p := range parts {
		r, err := gone.node.Replicas(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(r.Voters, 3) {
			t.Fatalf("node 3 applied its removal from partition %d (%+v): it was not cut off", p, r)
		}
	}
}

// TestRestartIsNoRemoval restarts a founding node before any snapshot:
// the node applies its log's configuration changes again from the
// bootstrap's first (a group of node 1 alone, then of nodes 1 and 2),
// and must not judge its membership on those (node 3 is in neither), so
// it logs no removal, nor a return, on its way to the configuration it
// had.
func TestRestartIsNoRemoval(t *testing.T) {
	tc := newTestCluster(t, 29, 3, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := tc.commit(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	tc.stop(3)
	removed := tc.collect("this node was removed from the cluster", 3)
	back := tc.collect("this node is a voter of the cluster", 3)
	n := tc.start(3)
	if err := tc.commit(ctx, "g", 2); err != nil {
		t.Fatal(err)
	}
	if err := awaitApplied(ctx, n, "g", 2); err != nil {
		t.Fatal(err)
	}
	if got := append(removed.of(3), back.of(3)...); len(got) > 0 {
		t.Fatalf("node 3, restarted, logged %q: its membership was judged on a configuration its log had before", got[0].Message)
	}
	if st := n.Stats(); st.Membership != cluster.Member {
		t.Fatalf("node 3's membership after its restart: %v", st.Membership)
	}
}

// TestRestartOfAddedNode restarts a node that joined and was added,
// before its first snapshot: its groups replay configurations without it
// first, and it must not log that it waits to be added (with a command
// to run), which it no longer does.
func TestRestartOfAddedNode(t *testing.T) {
	tc := newTestCluster(t, 31, 3, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := tc.commit(ctx, "g", 1); err != nil {
		t.Fatal(err)
	}
	tc.join(4)
	for p := range 2 {
		if err := tc.changeReplicas(ctx, p, cluster.ReplicaChange{Add: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.commit(ctx, "g", 2); err != nil {
		t.Fatal(err)
	}
	tc.stop(4)
	waits := tc.collect("this node waits to be added to the cluster", 4)
	n := tc.start(4)
	if err := awaitApplied(ctx, n, "g", 2); err != nil {
		t.Fatal(err)
	}
	if len(waits.of(4)) > 0 {
		t.Fatal("node 4, added, then restarted, logged that it waits to be added")
	}
	if st := n.Stats(); st.Membership != cluster.Member {
		t.Fatalf("node 4's membership after its restart: %v", st.Membership)
	}
}
