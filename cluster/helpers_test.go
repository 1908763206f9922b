package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/cluster/clustertest"
	"github.com/offsetd/offsetd/coordinator"
)

// testCluster is a cluster of nodes in this process, over a
// clustertest.Network.
type testCluster struct {
	t     *testing.T
	nw    *clustertest.Network
	peers []uint64
	dir   string
	parts int
	copts coordinator.Options // of every node; Partitions and Logger are set

	mu     sync.Mutex
	nodes  map[uint64]*cluster.Node // guarded by mu: the running ones
	clocks map[uint64]*testClock    // guarded by mu: the running nodes' clocks
	logs   map[uint64]*testLog      // guarded by mu: each node's log, kept over restarts
	joined map[uint64]bool          // guarded by mu: nodes that joined the running cluster
}

// testClock is a node's Raft clock: a ticker of testTick that a test can
// stop (freeze), so that a leader never notices that it lost its quorum,
// nor a follower that its leader is gone.
type testClock struct {
	frozen atomic.Bool
	ticks  chan time.Time
	done   chan struct{}
	wg     sync.WaitGroup
}

func newTestClock() *testClock {
	c := &testClock{ticks: make(chan time.Time), done: make(chan struct{})}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(testTick)
		defer t.Stop()
		for {
			select {
			case <-c.done:
				return
			case now := <-t.C:
				if c.frozen.Load() {
					continue
				}
				select {
				case c.ticks <- now:
				case <-c.done:
					return
				}
			}
		}
	}()
	return c
}

func (c *testClock) stop() {
	close(c.done)
	c.wg.Wait()
}

// testLog is a node's log in a test cluster: a slog.Handler that drops
// every record at Info level or above unless a test watches them.
type testLog struct {
	root  *testLog // the node's, which holds the watchers; nil for itself
	attrs []slog.Attr

	mu       sync.Mutex
	next     int                       // guarded by mu
	watchers map[int]func(slog.Record) // guarded by mu
}

// watchLog has fn called with every record node id logs from now on, on
// the goroutine that logs it, until the returned function is called.
func (tc *testCluster) watchLog(id uint64, fn func(r slog.Record)) (stop func()) {
	tc.mu.Lock()
	h := tc.logs[id]
	tc.mu.Unlock()
	return h.watch(fn)
}

// watch has fn called with every record logged from now on, until the
// returned function is called.
func (h *testLog) watch(fn func(r slog.Record)) (stop func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watchers == nil {
		h.watchers = make(map[int]func(slog.Record))
	}
	h.next++
	key := h.next
	h.watchers[key] = fn
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.watchers, key)
	}
}

func (h *testLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *testLog) Handle(_ context.Context, r slog.Record) error {
	root := h
	if h.root != nil {
		root = h.root
	}
	root.mu.Lock()
	var fns []func(slog.Record)
	for _, fn := range root.watchers {
		fns = append(fns, fn)
	}
	root.mu.Unlock()
	if len(fns) == 0 {
		return nil
	}
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	for _, fn := range fns {
		fn(r)
	}
	return nil
}

func (h *testLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	root := h
	if h.root != nil {
		root = h.root
	}
	return &testLog{attrs: append(slices.Clone(h.attrs), attrs...), root: root}
}

func (h *testLog) WithGroup(string) slog.Handler { return h }

// attr returns the value of r's attribute key.
func attr(r slog.Record, key string) (v slog.Value, ok bool) {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, ok = a.Value, true
			return false
		}
		return true
	})
	return v, ok
}

// freeze stops node id's clock, or starts it again.
func (tc *testCluster) freeze(id uint64, on bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.clocks[id].frozen.Store(on)
}

// testTick is the Raft tick of test clusters: elections take 10-20 ticks.
const testTick = 5 * time.Millisecond

func newTestCluster(t *testing.T, seed uint64, size, parts int, configure ...func(*coordinator.Options)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, nw: clustertest.NewNetwork(seed), dir: t.TempDir(), parts: parts, nodes: make(map[uint64]*cluster.Node),
		clocks: make(map[uint64]*testClock), logs: make(map[uint64]*testLog), copts: coordinator.Options{Partitions: parts, Logger: quiet}, joined: make(map[uint64]bool)}
	for _, c := range configure {
		c(&tc.copts)
	}
	for id := range uint64(size) {
		tc.peers = append(tc.peers, id+1)
	}
	for _, id := range tc.peers {
		tc.start(id)
	}
	t.Cleanup(func() {
		tc.mu.Lock()
		peers := slices.Clone(tc.peers)
		tc.mu.Unlock()
		for _, id := range peers {
			tc.stop(id)
		}
		tc.nw.Close()
	})
	return tc
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// start opens node id on its data directory.
func (tc *testCluster) start(id uint64) *cluster.Node {
	tc.t.Helper()
	tc.mu.Lock()
	if tc.logs[id] == nil {
		tc.logs[id] = &testLog{}
	}
	opts := cluster.Options{ID: id, Peers: slices.Clone(tc.peers), Join: tc.joined[id], Transport: tc.nw.Transport(id), TickInterval: testTick,
		Logger: slog.New(tc.logs[id])}
	tc.mu.Unlock()
	clock := newTestClock()
	n, err := cluster.Open(filepath.Join(tc.dir, fmt.Sprint(id)), tc.copts, cluster.WithTicks(opts, clock.ticks))
	if err != nil {
		clock.stop()
		tc.t.Fatalf("open node %d: %v", id, err)
	}
	tc.nw.Attach(id, n)
	tc.mu.Lock()
	tc.nodes[id] = n
	tc.clocks[id] = clock
	tc.mu.Unlock()
	return n
}

// stop closes node id, if it runs.
func (tc *testCluster) stop(id uint64) {
	tc.t.Helper()
	tc.mu.Lock()
	n, clock := tc.nodes[id], tc.clocks[id]
	delete(tc.nodes, id)
	delete(tc.clocks, id)
	tc.mu.Unlock()
	if n == nil {
		return
	}
	// Close first: a closing node hands its leads off, and hears its
	// target's answers, as a server closes its node before its listener.
	if err := n.Close(); err != nil {
		tc.t.Errorf("close node %d: %v", id, err)
	}
	tc.nw.Detach(id)
	clock.stop()
}

func (tc *testCluster) node(id uint64) *cluster.Node {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.nodes[id]
}

// anyNode returns a running node other than not, preferring id hint.
func (tc *testCluster) anyNode(hint, not uint64) *cluster.Node {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if n := tc.nodes[hint]; n != nil && hint != not {
		return n
	}
	for _, id := range tc.peers {
		if n := tc.nodes[id]; n != nil && id != not {
			return n
		}
	}
	return nil
}

// nextNode returns the running node that follows id in the order of the
// peers, round and round: asking each in turn reaches one that knows the
// leader, even past nodes that never will (cut off, or removed).
func (tc *testCluster) nextNode(id uint64) *cluster.Node {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	at := slices.Index(tc.peers, id)
	for i := 1; i <= len(tc.peers); i++ {
		if n := tc.nodes[tc.peers[(at+i)%len(tc.peers)]]; n != nil {
			return n
		}
	}
	return nil
}

// join starts node id, new to the cluster, on an empty data directory: it
// waits to be added to the partitions' groups.
func (tc *testCluster) join(id uint64) *cluster.Node {
	tc.t.Helper()
	tc.mu.Lock()
	tc.peers = append(tc.peers, id)
	tc.joined[id] = true
	tc.mu.Unlock()
	return tc.start(id)
}

// changeReplicas runs ChangeReplicas on the leader of partition.
func (tc *testCluster) changeReplicas(ctx context.Context, partition int, ch cluster.ReplicaChange) error {
	return tc.leaderFor(ctx, "", func(n *cluster.Node) error { return n.ChangeReplicas(ctx, partition, ch) })
}

// errNoNode reports that no node runs to send a request to.
var errNoNode = errors.New("no node runs")

// leaderFor runs fn on the node that leads the partition of group,
// following NotLeader answers and waiting out elections, until fn
// succeeds, fails otherwise, or ctx ends. A write whose outcome a failover
// left unknown is sent again: the tests' writes may happen twice.
func (tc *testCluster) leaderFor(ctx context.Context, group string, fn func(n *cluster.Node) error) error {
	var hint, avoid uint64
	var turn uint64 // the last node asked in turn for a leader
	for {
		n := tc.anyNode(hint, avoid)
		if n == nil {
			return errNoNode
		}
		err := fn(n)
		var nle *coordinator.NotLeaderError
		switch {
		case err == nil:
			return nil
		case errors.Is(err, coordinator.ErrNotCommitted):
			hint, avoid = n.ID(), 0
		case errors.As(err, &nle) && nle.Leader != 0 && tc.node(nle.Leader) != nil:
			hint, avoid = nle.Leader, 0
		case errors.As(err, &nle):
			// n knows no leader that runs: ask the next node in turn (not
			// the one after n: a stale answer may have sent us back to n),
			// giving it a few election timeouts to learn of one.
			hint, avoid = 0, n.ID()
			if turn == 0 {
				turn = n.ID()
			}
			if other := tc.nextNode(turn); other != nil {
				hint, turn = other.ID(), other.ID()
				wait, cancel := context.WithTimeout(ctx, 40*testTick)
				leader, err := other.AwaitLeader(wait, nle.Partition, nle.Leader)
				cancel()
				if err == nil {
					hint = leader
				}
			}
		case errors.Is(err, coordinator.ErrLeadershipLost) || errors.Is(err, coordinator.ErrClosed) || errors.Is(err, cluster.ErrStopped):
			hint, avoid = 0, n.ID()
			if other := tc.nextNode(n.ID()); other != nil {
				hint = other.ID()
			}
		default:
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// commit commits offset for group (topic "t", partition 0) on the leader.
func (tc *testCluster) commit(ctx context.Context, group string, offset int64) error {
	return tc.leaderFor(ctx, group, func(n *cluster.Node) error {
		return n.Coordinator().Commit(ctx, group, []coordinator.OffsetCommit{{Topic: "t", Partition: 0, Offset: offset}})
	})
}

// fetch reads group's offset (-1 when absent) linearizably on the leader.
func (tc *testCluster) fetch(ctx context.Context, group string) (int64, error) {
	offset := int64(-1)
	err := tc.leaderFor(ctx, group, func(n *cluster.Node) error {
		c := n.Coordinator()
		if err := c.Barrier(ctx, group); err != nil {
			return err
		}
		o, ok, err := c.Fetch(group, "t", 0)
		if ok {
			offset = o.Offset
		}
		return err
	})
	return offset, err
}

// awaitApplied waits until node n's tables hold offset for group.
func awaitApplied(ctx context.Context, n *cluster.Node, group string, offset int64) error {
	return awaitOffset(ctx, n, group, offset, func(o int64) bool { return o == offset })
}

// awaitAtLeast waits until node n's tables hold offset, or a later one,
// for group: writers may go on committing meanwhile.
func awaitAtLeast(ctx context.Context, n *cluster.Node, group string, offset int64) error {
	return awaitOffset(ctx, n, group, offset, func(o int64) bool { return o >= offset })
}

func awaitOffset(ctx context.Context, n *cluster.Node, group string, offset int64, done func(int64) bool) error {
	c := n.Coordinator()
	for {
		_, changed, stop, err := c.WatchGroup(group)
		if err != nil {
			return err
		}
		o, ok, err := c.Fetch(group, "t", 0)
		if err != nil || ok && done(o.Offset) {
			stop()
			return err
		}
		select {
		case <-changed:
			stop()
		case <-ctx.Done():
			stop()
			return fmt.Errorf("node %d: group %q never showed offset %d: %w", n.ID(), group, offset, ctx.Err())
		}
	}
}
