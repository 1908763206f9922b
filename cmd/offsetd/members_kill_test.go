package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/internal/offsetcheck"
	"github.com/offsetd/offsetd/partitioner"
)

var membersKillRounds = flag.Int("members.rounds", 1, "rounds of each case of TestClusterMembersSIGKILL (its long form: 10 or more)")

// memberCluster is a cluster of offsetd serve processes for the tests of
// membership changes under faults: nodes 1-3 found it, node 4 joins it.
// The load goes through the nodes in serving.
type memberCluster struct {
	t          *testing.T
	bin, dir   string
	raft, api  []string // by node id - 1
	partitions int
	timeout    string // the cluster commands' -timeout, 20s if empty

	mu      sync.Mutex
	procs   map[int]*process // running (or paused) nodes
	marks   map[int]int      // where in each node's stderr awaitLog starts
	gone    []int            // nodes the change removes
	serving map[int]bool     // nodes the load's calls go through
	clients map[int]*client.Client
}

func newMemberCluster(t *testing.T, bin string) *memberCluster {
	addrs := freeAddrs(t, 8)
	c := &memberCluster{t: t, bin: bin, dir: t.TempDir(), raft: addrs[:4], api: addrs[4:], partitions: 2,
		procs: map[int]*process{}, marks: map[int]int{}, serving: map[int]bool{}, clients: map[int]*client.Client{}}
	for id := 1; id <= 4; id++ {
		// 400 retries 10ms apart outlast an election after a kill.
		cl, err := client.New("http://"+c.api[id-1], client.Options{Retries: 400, MaxRetryWait: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c.clients[id] = cl
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.mu.Lock()
			for id, p := range c.procs {
				t.Logf("node %d; its stderr:\n%s", id, p.stderr)
			}
			c.mu.Unlock()
		}
		for id := 1; id <= 4; id++ {
			c.kill(id)
		}
	})
	for id := 1; id <= 3; id++ {
		c.start(id)
	}
	return c
}

// start starts node id on its data directory: nodes 1-3 as founders,
// node 4 with -join.
func (c *memberCluster) start(id int) {
	c.t.Helper()
	args := []string{"serve", "-data", filepath.Join(c.dir, fmt.Sprint(id)), "-listen", c.api[id-1],
		"-partitions", fmt.Sprint(c.partitions), "-kafka-listen=", "-node-id", fmt.Sprint(id),
		"-peers", strings.Join(peersOf(c.raft[:max(3, id)]), ","), "-raft-listen", c.raft[id-1]}
	if id == 4 {
		args = append(args, "-join")
	}
	p := startProcess(c.t, c.bin, args...)
	c.mu.Lock()
	c.procs[id] = p
	c.marks[id] = 0
	c.mu.Unlock()
}

// signal sends sig to node id, if it runs.
func (c *memberCluster) signal(id int, sig syscall.Signal) {
	c.t.Helper()
	c.mu.Lock()
	p := c.procs[id]
	c.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Fatal(err)
	}
}

// kill SIGKILLs node id, if it runs, and waits for it to exit.
func (c *memberCluster) kill(id int) {
	c.t.Helper()
	c.mu.Lock()
	p := c.procs[id]
	delete(c.procs, id)
	delete(c.serving, id)
	c.mu.Unlock()
	if p == nil {
		return
	}
	select {
	case <-p.exited:
		c.t.Errorf("node %d exited before it was killed: %v; its stderr:\n%s", id, p.err, p.stderr)
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Fatal(err)
	}
	<-p.exited
	c.checkLog(id, p.stderr.String())
}

// checkLog fails the test if node id logged what no change should make
// it log: a group stopped, a panic, or its removal when it stays.
func (c *memberCluster) checkLog(id int, log string) {
	c.t.Helper()
	bad := []string{`msg="raft group stopped`, "panic:", "fatal error:"}
	c.mu.Lock()
	if !slices.Contains(c.gone, id) {
		bad = append(bad, "this node was removed from the cluster")
	}
	c.mu.Unlock()
	for _, b := range bad {
		if strings.Contains(log, b) {
			c.t.Errorf("node %d logged %q:\n%s", id, b, log)
		}
	}
}

// serve sets whether the load's calls go through node id.
func (c *memberCluster) serve(id int, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.serving[id] = true
	} else {
		delete(c.serving, id)
	}
}

// pick returns the client of a serving node, turning with n.
func (c *memberCluster) pick(n int) *client.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range 4 {
		if id := (n+i)%4 + 1; c.serving[id] {
			return c.clients[id]
		}
	}
	return c.clients[1]
}

// admin runs an offsetd cluster command against node via.
func (c *memberCluster) admin(ctx context.Context, via int, args ...string) (int, string) {
	var out, errs syncBuffer
	env := map[string]string{"OFFSETD_ADDR": c.api[via-1], "OFFSETD_TIMEOUT": cmp.Or(c.timeout, "20s")}
	code := run(ctx, append([]string{"cluster"}, args...), envOf(env), &out, &errs)
	return code, out.String() + errs.String()
}

// replicas returns the partitions' configurations as node id applied
// them, nil if it does not answer.
func (c *memberCluster) replicas(ctx context.Context, id int) []client.Replicas {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl, err := client.New("http://"+c.api[id-1], client.Options{Retries: -1})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	all, err := cl.Replicas(ctx)
	if err != nil {
		return nil
	}
	return all
}

// await polls until cond holds of the configurations node id applied.
func (c *memberCluster) await(ctx context.Context, what string, id int, cond func([]client.Replicas) bool) []client.Replicas {
	c.t.Helper()
	for {
		if all := c.replicas(ctx, id); all != nil && cond(all) {
			return all
		}
		select {
		case <-time.After(5 * time.Millisecond): // another process's state: nothing to wait on
		case <-ctx.Done():
			c.t.Fatalf("waiting for %s on node %d: %v; it has %+v", what, id, ctx.Err(), c.replicas(context.Background(), id))
		}
	}
}

// mark makes awaitLog look only at what the nodes log from now on.
func (c *memberCluster) mark() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, p := range c.procs {
		c.marks[id] = len(p.stderr.String())
	}
}

// awaitLog waits until one of nodes logs a line that matches re, since
// the last mark, and returns the match and its submatches: the nodes' own
// word, the moment they say it, where asking them over HTTP would come
// too late for a step that lasts a round trip.
func (c *memberCluster) awaitLog(ctx context.Context, re string, nodes ...int) []string {
	c.t.Helper()
	pattern := regexp.MustCompile(re)
	for {
		for _, id := range nodes {
			c.mu.Lock()
			p, from := c.procs[id], c.marks[id]
			c.mu.Unlock()
			if p == nil {
				continue
			}
			if m := pattern.FindStringSubmatch(p.stderr.String()[from:]); m != nil {
				return m
			}
		}
		select {
		case <-time.After(time.Millisecond): // another process's log: nothing to wait on
		case <-ctx.Done():
			c.t.Fatalf("waiting for nodes %v to log %q: %v", nodes, re, ctx.Err())
		}
	}
}

// leaderOf returns partition's leader as node id knows it, once it knows one.
func (c *memberCluster) leaderOf(ctx context.Context, id, partition int) int {
	c.t.Helper()
	all := c.await(ctx, fmt.Sprintf("a leader of partition %d", partition), id, func(all []client.Replicas) bool {
		return all[partition].Leader != 0
	})
	return int(all[partition].Leader)
}

// settled reports whether every partition of all that node id is to be
// a voter of has voters want[p] and is changing nothing, with a leader.
// (A node moved off a partition keeps what it last applied of it.)
func settled(all []client.Replicas, want [][]uint64, id int) bool {
	for p, r := range all {
		if !slices.Contains(want[p], uint64(id)) {
			continue
		}
		if !slices.Equal(r.Voters, want[p]) || len(r.Learners) > 0 || len(r.Outgoing) > 0 || r.Leader == 0 {
			return false
		}
	}
	return len(all) == len(want)
}

// memberChange is one change of a case: a cluster command, the faults it
// meets and what the partitions' voters are once it is done.
type memberChange struct {
	name string
	// hold pauses node 4 (SIGSTOP) before the command, so that it stays a
	// learner catching up until fault resumes it.
	hold bool
	// args are the cluster command's (-raft-addr is added for node 4).
	args []string
	// timeout is the command's -timeout during the fault (20s if empty).
	timeout string
	// then is the command run after the fault until it succeeds: args
	// if nil.
	then []string
	// fault waits for the moment to strike while the command runs, then
	// kills (and resumes) nodes; it returns the nodes to start again.
	fault func(ctx context.Context, c *memberCluster) []int
	// gone are the nodes that serve no load from the command on.
	gone []int
	// want are each partition's voters once the change is done.
	want [][]uint64
}

var (
	all4  = []uint64{1, 2, 3, 4}
	all3  = []uint64{1, 2, 3}
	moved = []uint64{2, 3, 4} // partition 0 moved from node 1 to node 4
)

// learnerIn waits until node via sees node 4 as partition p's learner.
func learnerIn(ctx context.Context, c *memberCluster, via, p int) {
	c.await(ctx, fmt.Sprintf("node 4 a learner of partition %d", p), via, func(all []client.Replicas) bool {
		return slices.Contains(all[p].Learners, 4)
	})
}

// Log lines of the nodes that mark a change's steps (see group.handle).
const (
	confLine   = `msg="raft configuration changed" partition=%d index=\d+ `
	leaderLine = `msg="raft leader changed" partition=%d term=\d+ old=%d new=(\d+)`
)

// memberChanges are the cases of TestClusterMembersSIGKILL. With two
// partitions, node 1 leads partition 0 and node 2 partition 1 while
// nothing changes; the command goes to node 2 (killed in some cases: it
// is run again there once node 2 is back).
var memberChanges = []memberChange{{
	name: "add-node, the node added killed as a learner",
	hold: true, args: []string{"add-node", "4"},
	fault: func(ctx context.Context, c *memberCluster) []int {
		learnerIn(ctx, c, 3, 0)
		c.kill(4)
		return []int{4}
	},
	want: [][]uint64{all4, all4},
}, {
	name: "add-node, the node added killed once it votes in one partition of two",
	args: []string{"add-node", "4"},
	fault: func(ctx context.Context, c *memberCluster) []int {
		c.awaitLog(ctx, fmt.Sprintf(confLine, 0)+`voters="\[1 2 3 4\]"`, 4)
		c.kill(4)
		return []int{4}
	},
	want: [][]uint64{all4, all4},
}, {
	name: "add-node abandoned: the node added killed as a learner, never back, and removed",
	hold: true, args: []string{"add-node", "4"}, timeout: "3s", then: []string{"remove-node", "4"}, gone: []int{4},
	fault: func(ctx context.Context, c *memberCluster) []int {
		learnerIn(ctx, c, 3, 0)
		c.kill(4)
		return nil
	},
	want: [][]uint64{all3, all3},
}, {
	name: "add-node, the leader killed while the node added is a learner",
	hold: true, args: []string{"add-node", "4"},
	fault: func(ctx context.Context, c *memberCluster) []int {
		learnerIn(ctx, c, 3, 0)
		leader := c.leaderOf(ctx, 3, 0)
		c.kill(leader)
		c.signal(4, syscall.SIGCONT)
		return []int{leader}
	},
	want: [][]uint64{all4, all4},
}, {
	name: "add-node, the leader killed as it adds the learner",
	args: []string{"add-node", "4"},
	fault: func(ctx context.Context, c *memberCluster) []int {
		c.awaitLog(ctx, fmt.Sprintf(confLine, 1)+`voters="\[1 2 3\]" learners=\[4\]`, 2)
		c.kill(2)
		return []int{2}
	},
	want: [][]uint64{all4, all4},
}, {
	name: "remove-node, the node removed killed half-way",
	args: []string{"remove-node", "3"}, gone: []int{3},
	fault: func(ctx context.Context, c *memberCluster) []int {
		c.awaitLog(ctx, fmt.Sprintf(confLine, 0)+`voters="\[1 2\]"`, 1, 3)
		c.kill(3)
		return []int{3}
	},
	want: [][]uint64{{1, 2}, {1, 2}},
}, {
	name: "remove-node, the node removed killed as it hands its lead off",
	args: []string{"remove-node", "1"}, gone: []int{1},
	fault: func(ctx context.Context, c *memberCluster) []int {
		c.awaitLog(ctx, fmt.Sprintf(leaderLine, 0, 1), 2, 3)
		c.kill(1)
		return []int{1}
	},
	want: [][]uint64{{2, 3}, {2, 3}},
}, {
	name: "remove-node, the leader killed",
	args: []string{"remove-node", "3"}, gone: []int{3},
	fault: func(ctx context.Context, c *memberCluster) []int {
		c.awaitLog(ctx, fmt.Sprintf(confLine, 0)+`voters="\[1 2\]"`, 1)
		c.kill(2)
		return []int{2}
	},
	want: [][]uint64{{1, 2}, {1, 2}},
}, {
	name: "move, the target killed as a learner",
	hold: true, args: []string{"move", "0", "1", "4"},
	fault: func(ctx context.Context, c *memberCluster) []int {
		learnerIn(ctx, c, 2, 0)
		c.kill(4)
		return []int{4}
	},
	want: [][]uint64{moved, all3},
}, {
	name: "move, the source killed while it leads and the target catches up",
	hold: true, args: []string{"move", "0", "1", "4"},
	fault: func(ctx context.Context, c *memberCluster) []int {
		learnerIn(ctx, c, 2, 0)
		c.kill(1)
		c.signal(4, syscall.SIGCONT)
		return []int{1}
	},
	want: [][]uint64{moved, all3},
}, {
	name: "move, the leader the source handed off to killed before the joint configuration",
	args: []string{"move", "0", "1", "4"},
	fault: func(ctx context.Context, c *memberCluster) []int {
		m := c.awaitLog(ctx, fmt.Sprintf(leaderLine, 0, 1), 2, 3)
		leader, _ := strconv.Atoi(m[1])
		c.kill(leader)
		return []int{leader}
	},
	want: [][]uint64{moved, all3},
}, {
	name: "move, the leader killed in the joint configuration",
	args: []string{"move", "1", "3", "4"},
	fault: func(ctx context.Context, c *memberCluster) []int {
		c.awaitLog(ctx, fmt.Sprintf(confLine, 1)+`voters="\[1 2 4\]" learners=\[\] outgoing="\[1 2 3\]"`, 2)
		c.kill(2)
		return []int{2}
	},
	want: [][]uint64{all3, {1, 2, 4}},
}}

// TestClusterMembersSIGKILL changes the replicas of a cluster of real
// offsetd processes with offsetd cluster add-node, remove-node and move,
// and SIGKILLs a node in the middle of each: the node being added,
// removed or moved, or a partition's leader, while writers and readers go
// on through the other nodes. The killed node starts again on its data
// (but in one case, whose addition remove-node then abandons); the
// command, run again where it failed, completes; a removed node started
// again learns its removal, and no node logs one it did not undergo;
// every partition
// then has the configuration asked for, with nothing left in a joint
// configuration or as a learner, as every member and offsetd cluster
// status see it; every acknowledged commit is read back, and the history
// of commits and reads is linearizable. -members.rounds repeats each case.
func TestClusterMembersSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs four processes")
	}
	bin := buildBinary(t, t.TempDir())
	for round := range *membersKillRounds {
		for _, tc := range memberChanges {
			name := tc.name
			if *membersKillRounds > 1 {
				name = fmt.Sprintf("%s/round %d", name, round)
			}
			t.Run(name, func(t *testing.T) { runMemberChange(t, bin, tc) })
		}
	}
}

func runMemberChange(t *testing.T, bin string, tc memberChange) {
	c := newMemberCluster(t, bin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for id := 1; id <= 3; id++ {
		c.serve(id, true)
	}
	// Two groups in each partition.
	part, _ := partitioner.New(c.partitions)
	var groups []string
	count := map[int]int{}
	for i := 0; len(groups) < 2*c.partitions; i++ {
		g := fmt.Sprintf("g%d", i)
		if p := part.Group(g); count[p] < 2 {
			count[p]++
			groups = append(groups, g)
		}
	}
	// Leaders settle on their preferred nodes (sooner without load: a
	// leader hands its lead over to a node that has its whole log).
	for p := range c.partitions {
		c.await(ctx, "the preferred leaders", 1, func(all []client.Replicas) bool { return int(all[p].Leader) == p+1 })
	}
	h := offsetcheck.New()
	stop := h.Load(groups, 2,
		func(n int, g string, v int64) error {
			_, err := c.pick(n).Commit(ctx, g, -1, []client.OffsetCommit{{Topic: "t", Offset: v, LeaderEpoch: -1}})
			return err
		},
		func(n int, g string) (int64, error) {
			o, err := c.pick(n).Offset(ctx, g, "t", 0)
			if errors.Is(err, client.ErrNotFound) {
				return -1, nil
			}
			return o.Offset, err
		})
	defer stop()
	if err := h.AwaitAcks(ctx, 50); err != nil {
		t.Fatal(err)
	}

	args := slices.Clone(tc.args)
	if tc.args[0] != "remove-node" {
		c.start(4)
		if tc.hold {
			c.signal(4, syscall.SIGSTOP)
		}
		args = slices.Insert(args, 1, "-raft-addr", c.raft[3])
	}
	c.mu.Lock()
	c.gone = tc.gone
	c.mu.Unlock()
	for _, id := range tc.gone {
		c.serve(id, false)
	}
	// The command goes to node 2; where the fault kills it, the command
	// fails and is run again once node 2 is back.
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	c.timeout = tc.timeout
	c.mark()
	go func() {
		code, out := c.admin(ctx, 2, args...)
		done <- result{code, out}
	}()
	restart := tc.fault(ctx, c)
	acked := h.Acked()
	for id := 1; id <= 4; id++ {
		if all := c.replicas(ctx, id); all != nil && !slices.Contains(restart, id) {
			t.Logf("after the fault, node %d sees %+v", id, all)
			break
		}
	}
	for _, id := range restart {
		c.start(id)
	}
	c.signal(4, syscall.SIGCONT)
	// The command cut short by the fault fails or finishes; either way,
	// run again it completes.
	first := <-done
	t.Logf("%s during the fault: exit %d\n%s", strings.Join(args, " "), first.code, first.out)
	c.timeout = ""
	if tc.then != nil {
		args = tc.then
	}
	for attempt := 0; ; attempt++ {
		code, out := c.admin(ctx, 2, args...)
		if code == 0 {
			break
		}
		if attempt == 20 || ctx.Err() != nil {
			t.Fatalf("%s run again: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		t.Logf("%s run again: exit %d\n%s", strings.Join(args, " "), code, out)
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	// Every member applies the configuration asked for, and changes
	// nothing more.
	var members []int
	for _, ids := range tc.want {
		for _, id := range ids {
			if !slices.Contains(members, int(id)) {
				members = append(members, int(id))
			}
		}
	}
	// From now on the load goes through the nodes that hold every
	// partition: a node moved off one does not follow its leaders
	// (docs/cluster.md, "Not done yet").
	for id := 1; id <= 4; id++ {
		c.serve(id, false)
	}
	for _, id := range members {
		c.await(ctx, fmt.Sprintf("partitions with voters %v", tc.want), id, func(all []client.Replicas) bool { return settled(all, tc.want, id) })
		holdsAll := true
		for _, voters := range tc.want {
			holdsAll = holdsAll && slices.Contains(voters, uint64(id))
		}
		c.serve(id, holdsAll)
	}
	// A removed node started again, which may have missed its removal,
	// learns it from the leaders: not ready, it names its removal.
	for _, id := range tc.gone {
		c.mu.Lock()
		running := c.procs[id] != nil
		c.mu.Unlock()
		for running {
			code, body, err := get(ctx, "http://"+c.api[id-1]+"/readyz")
			if err == nil && code == http.StatusServiceUnavailable && strings.Contains(body, `"code":"node_removed"`) {
				break
			}
			select {
			case <-time.After(10 * time.Millisecond): // another process's state: nothing to wait on
			case <-ctx.Done():
				t.Fatalf("/readyz of removed node %d: %d %s, %v (%v)", id, code, body, err, ctx.Err())
			}
		}
		c.kill(id)
	}
	status := c.statusOf(ctx, tc.want)
	if err := h.AwaitAcks(ctx, 50); err != nil {
		t.Fatal(err)
	}
	stop()
	for _, g := range groups {
		want, _, _ := h.LastAck(g)
		// Through a voter of the group's partition: a node moved off a
		// partition may know no leader of it (docs/cluster.md).
		via := c.clients[int(tc.want[part.Group(g)][0])]
		o, err := via.Offset(ctx, g, "t", 0)
		if err != nil || o.Offset < want {
			t.Fatalf("group %s: offset %+v, %v; %d was acknowledged", g, o, err, want)
		}
	}
	// Histories here reach 12k operations, with commits of unknown outcome
	// around each fault: under the race detector on two shared cores
	// porcupine has taken over 20 s to decide one (an Unknown answer, no
	// violation). It gets a minute; Unknown still fails the test.
	if err := h.Check(t.TempDir(), time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d commits acknowledged, %d of them during the fault and after; %d operations\n%s", h.Acked(), h.Acked()-acked, h.Len(), status)
}

// statusOf runs offsetd cluster status until every partition shows the
// voters want, no learner, nothing leaving, and a leader, and every voter
// answers.
func (c *memberCluster) statusOf(ctx context.Context, want [][]uint64) string {
	c.t.Helper()
	for {
		code, out := c.admin(ctx, int(want[0][0]), "status")
		ok := code == 0 && !strings.Contains(out, "did not answer")
		for p, voters := range want {
			line := regexp.MustCompile(fmt.Sprintf(`(?m)^%d +[1-4] +\d+ +%s +- +- `, p, ids(voters)))
			ok = ok && line.MatchString(out)
		}
		if ok {
			return out
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			c.t.Fatalf("cluster status never showed voters %v and nothing changing:\n%s", want, out)
		}
	}
}
