// Package offsetcheck records what clients of a cluster saw, commits and
// reads of one offset per group, and checks it: every acknowledged commit
// is still there, and the whole history is linearizable (porcupine). The
// cluster tests, in process and across processes, share it.
//
//	h := offsetcheck.New()
//	call := h.Call()
//	err := commit(group, v)
//	h.Commit(client, group, v, call, err == nil)   // unknown outcome when false
//	h.Read(client, group, got, call)               // a read that succeeded
//	err = h.Check(10 * time.Second)
package offsetcheck

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/offsetd/offsetd/internal/signal"
)

// History is what the clients saw, stamped with a logical clock that
// orders every call and return as they happened. It is safe for
// concurrent use.
type History struct {
	clock  atomic.Int64
	acked  atomic.Int64
	ackSig *signal.Signal

	mu      sync.Mutex
	ops     []porcupine.Operation // guarded by mu
	lastAck map[string]ack        // guarded by mu: per group, the last commit its writer had acknowledged
}

// ack is a group's last acknowledged commit.
type ack struct {
	value, call int64
	at          time.Time
}

// New returns an empty History.
func New() *History {
	return &History{ackSig: signal.New(), lastAck: map[string]ack{}}
}

type input struct {
	group string
	write bool
	value int64
}

// Call stamps the start of an operation.
func (h *History) Call() int64 { return h.clock.Add(1) }

// Commit records a commit of value to group that began at call. ok false
// means its outcome is unknown (it may or may not have happened), so it
// may take effect at any time after its call. A group's commits must come
// from one writer, in increasing values, for LastAck to mean anything.
func (h *History) Commit(client int, group string, value, call int64, ok bool) {
	h.add(client, input{group: group, write: true, value: value}, 0, call, ok)
	if ok {
		h.mu.Lock()
		h.lastAck[group] = ack{value: value, call: call, at: time.Now()}
		h.mu.Unlock()
		h.acked.Add(1)
		h.ackSig.Fire()
	}
}

// Read records a read of group that began at call and returned got (-1:
// no offset). Failed reads have no effect: leave them out.
func (h *History) Read(client int, group string, got, call int64) {
	h.add(client, input{group: group}, got, call, true)
}

func (h *History) add(client int, in input, out, call int64, ok bool) {
	ret := h.clock.Add(1)
	if !ok {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

// LastAck returns the last offset acknowledged to group's writer (-1 if
// none), the stamp of its call and when it was acknowledged.
func (h *History) LastAck(group string) (value, call int64, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a, ok := h.lastAck[group]; ok {
		return a.value, a.call, a.at
	}
	return -1, 0, time.Time{}
}

// Acked returns how many commits were acknowledged.
func (h *History) Acked() int64 { return h.acked.Load() }

// AwaitAcks waits until n more commits have been acknowledged.
func (h *History) AwaitAcks(ctx context.Context, n int64) error {
	target := h.acked.Load() + n
	for {
		ch := h.ackSig.Wait()
		if h.acked.Load() >= target {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d more acknowledged commits: %w", target-h.acked.Load(), ctx.Err())
		}
	}
}

// Len returns how many operations were recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Check runs porcupine over the history; a violation is an error that
// names a file (in dir) drawing the history.
func (h *History) Check(dir string, timeout time.Duration) error {
	h.mu.Lock()
	ops := h.ops
	h.mu.Unlock()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if res == porcupine.Ok {
		return nil
	}
	path := filepath.Join(dir, "history.html")
	if err := os.MkdirAll(dir, 0o750); err == nil {
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			path = err.Error()
		}
	}
	return fmt.Errorf("history of %d operations is %s (drawn in %s)", len(ops), res, path)
}

// model is one offset per group: commits set it, reads read it (-1 while
// the group has none).
var model = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range ops {
			g := op.Input.(input).group
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
	Step: func(state, in, output any) (bool, any) {
		i := in.(input)
		if i.write {
			return true, i.value
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(in, output any) string {
		i := in.(input)
		if i.write {
			return fmt.Sprintf("commit(%s, %d)", i.group, i.value)
		}
		return fmt.Sprintf("fetch(%s) -> %d", i.group, output)
	},
}

// Load runs a load against the system under test and records it: one
// writer per group, committing 0, 1, 2, ... to it (so a group's
// acknowledged offsets only grow), and readers reading the groups in
// turn. commit and read get the count of calls their goroutine made
// (to spread calls over nodes, say); read returns -1 for a group with no
// offset. The returned stop ends the load and waits for it.
func (h *History) Load(groups []string, readers int, commit func(n int, group string, value int64) error, read func(n int, group string) (int64, error)) (stop func()) {
	return h.LoadFrom(0, groups, readers, commit, read).Stop
}

// A Run is a load under way.
type Run struct {
	done chan struct{}
	halt sync.Once
	wg   sync.WaitGroup
}

// Halt tells the load's goroutines to make no more calls, and returns at
// once: calls under way go on until they return. A test that holds its
// callbacks back while the system is down halts the load before it lets
// them go, so that each goroutine leaves at most one call of unknown
// outcome instead of a run of failures, each open until the end of the
// history (which porcupine must then place).
func (r *Run) Halt() { r.halt.Do(func() { close(r.done) }) }

// Stop halts the load and waits for its calls to return.
func (r *Run) Stop() {
	r.Halt()
	r.wg.Wait()
}

// LoadFrom is Load with the writers committing first, first+1, ...: a
// load that follows another starts above the values the earlier one
// committed, so that its groups' offsets keep growing.
func (h *History) LoadFrom(first int64, groups []string, readers int, commit func(n int, group string, value int64) error, read func(n int, group string) (int64, error)) *Run {
	r := &Run{done: make(chan struct{})}
	loop := func(fn func(n int)) {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-r.done:
					return
				default:
				}
				fn(n)
			}
		}()
	}
	for i, g := range groups {
		loop(func(n int) {
			call := h.Call()
			v := first + int64(n)
			err := commit(n, g, v)
			h.Commit(i, g, v, call, err == nil)
		})
	}
	for k := range readers {
		loop(func(n int) {
			g := groups[(n+k)%len(groups)]
			call := h.Call()
			if got, err := read(n, g); err == nil { // a failed read has no effect
				h.Read(len(groups)+k, g, got, call)
			}
		})
	}
	return r
}
