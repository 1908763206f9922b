package cluster

import (
	"context"
	"flag"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/offsetd/offsetd/internal/signal"
	"github.com/offsetd/offsetd/partitioner"
)

var seedFlag = flag.Uint64("cluster.seed", 0, "run the failover tests with this fault seed only")

// history records operations for porcupine, stamped with a logical clock
// that orders every call and return as they happened.
type history struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   []porcupine.Operation // guarded by mu

	acked   atomic.Int64
	ackSig  *signal.Signal
	lastAck sync.Map // group -> the last offset its writer had acknowledged
}

type opInput struct {
	group string
	write bool
	value int64
}

// record adds an operation; ok false means its outcome is unknown (a
// write that may or may not have happened), so it may take effect at any
// time after its call.
func (h *history) record(client int, in opInput, out int64, call int64, ok bool) {
	ret := h.clock.Add(1)
	if !ok {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
	if ok {
		h.acked.Add(1)
		h.ackSig.Fire()
	}
}

// awaitAcks waits until n more operations have succeeded.
func (h *history) awaitAcks(ctx context.Context, n int64) error {
	target := h.acked.Load() + n
	for {
		ch := h.ackSig.Wait()
		if h.acked.Load() >= target {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d more acknowledged operations: %w", target-h.acked.Load(), ctx.Err())
		}
	}
}

// registerModel is one offset per group: commits set it, fetches read it
// (-1 while the group has none).
var registerModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range ops {
			g := op.Input.(opInput).group
			if _, ok := by[g]; !ok {
				keys = append(keys, g)
			}
			by[g] = append(by[g], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return int64(-1) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(opInput)
		if in.write {
			return true, in.value
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(opInput)
		if in.write {
			return fmt.Sprintf("commit(%s, %d)", in.group, in.value)
		}
		return fmt.Sprintf("fetch(%s) -> %d", in.group, output)
	},
}

// TestFailover runs writers and readers against a 3-node cluster over a
// network that loses, duplicates and reorders messages, while the leader
// of the groups' partition is stopped and restarted, or cut off and let
// back, again and again. After every failover each group must show at
// least its last acknowledged commit, and the whole history of commits
// and fetches must be linearizable.
func TestFailover(t *testing.T) {
	seeds := []uint64{1, 2}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { testFailover(t, seed) })
	}
}

func testFailover(t *testing.T, seed uint64) {
	const parts = 2
	tc := newTestCluster(t, seed, 3, parts)
	tc.nw.SetFaults(Faults{Drop: 0.05, Duplicate: 0.05, MaxDelay: 2 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// Each writer owns a group and commits increasing offsets to it, so a
	// group's acknowledged offsets only grow; readers read every group.
	groups := []string{"a", "b", "c"}
	h := &history{ackSig: signal.New()}
	stop := make(chan struct{})
	var clients sync.WaitGroup
	for i, g := range groups {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for v := int64(0); ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				call := h.clock.Add(1)
				err := tc.commit(ctx, g, v)
				h.record(i, opInput{group: g, write: true, value: v}, 0, call, err == nil)
				if err == nil {
					h.lastAck.Store(g, v)
				}
			}
		}()
	}
	for r := range 2 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				g := groups[(i+r)%len(groups)]
				call := h.clock.Add(1)
				got, err := tc.fetch(ctx, g)
				if err == nil { // a failed fetch has no effect
					h.record(len(groups)+r, opInput{group: g}, got, call, true)
				}
			}
		}()
	}

	part, _ := partitioner.New(parts)
	watched := part.Group(groups[0])
	for round := range 4 {
		if err := h.awaitAcks(ctx, 30); err != nil {
			t.Fatal(err)
		}
		leader, err := tc.anyNode(0, 0).AwaitLeader(ctx, watched, 0)
		if err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 {
			tc.stop(leader)
		} else {
			tc.nw.Isolate(leader)
		}
		// Served again: acknowledged operations after the old leader went.
		if err := h.awaitAcks(ctx, 30); err != nil {
			t.Fatalf("round %d: after losing leader %d: %v", round, leader, err)
		}
		checkAcked(ctx, t, tc, h, groups)
		if round%2 == 0 {
			tc.start(leader)
		} else {
			tc.nw.Heal()
		}
	}
	if err := h.awaitAcks(ctx, 30); err != nil {
		t.Fatal(err)
	}
	close(stop)
	clients.Wait()
	checkAcked(ctx, t, tc, h, groups)

	h.mu.Lock()
	ops := h.ops
	h.mu.Unlock()
	res, info := porcupine.CheckOperationsVerbose(registerModel, ops, 10*time.Second)
	if res != porcupine.Ok {
		path := t.TempDir() + "/history.html"
		if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
			t.Logf("history: %s", path)
		}
		t.Fatalf("history of %d operations is %s", len(ops), res)
	}
	st := tc.nw.Stats()
	t.Logf("%d operations (%d acknowledged); network: %+v", len(ops), h.acked.Load(), st)
	if st.Dropped == 0 || st.Duplicated == 0 || st.Delayed == 0 {
		t.Fatalf("the network injected no faults of some kind: %+v", st)
	}
}

// checkAcked reads every group on its leader: it must show at least the
// last offset its writer had acknowledged before the read.
func checkAcked(ctx context.Context, t *testing.T, tc *testCluster, h *history, groups []string) {
	t.Helper()
	for _, g := range groups {
		want := int64(-1)
		if v, ok := h.lastAck.Load(g); ok {
			want = v.(int64)
		}
		got, err := tc.fetch(ctx, g)
		if err != nil {
			t.Fatalf("fetch %s: %v", g, err)
		}
		if got < want {
			t.Fatalf("group %s: offset %d, but %d was acknowledged", g, got, want)
		}
	}
}
