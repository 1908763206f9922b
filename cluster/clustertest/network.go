// Package clustertest holds what tests of a cluster of offsetd nodes in
// one process need and production code does not: a fault-injecting
// transport between the nodes.
package clustertest

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/offsetd/offsetd/cluster"
)

// Network is an in-process transport between the nodes of one process,
// for tests of a cluster: it drops, duplicates and delays (and so
// reorders) messages, with odds drawn from a seeded source, and cuts nodes
// off from each other. Messages are encoded and decoded on their way, as
// between processes.
type Network struct {
	mu       sync.Mutex
	rand     *rand.Rand                         // guarded by mu
	faults   Faults                             // guarded by mu
	nodes    map[uint64]func([]cluster.Message) // guarded by mu
	isolated map[uint64]bool                    // guarded by mu
	closed   bool                               // guarded by mu
	pending  sync.WaitGroup                     // delayed deliveries
	stats    NetworkStats                       // guarded by mu
	links    map[[2]uint64]bool                 // guarded by mu: cut links, both ways
	counts   map[[2]uint64]*linkCounts          // guarded by mu: by sender and receiver
}

// linkCounts counts the messages of one sender to one receiver.
type linkCounts struct{ sent, dropped uint64 }

// Faults are the odds of each fault, per message.
type Faults struct {
	Drop      float64       // the message is lost
	Duplicate float64       // it arrives twice
	MaxDelay  time.Duration // it arrives after a random delay up to this
}

// NetworkStats counts what a Network did.
type NetworkStats struct {
	Sent, Delivered, Dropped, Duplicated, Delayed int
}

// NewNetwork returns a network whose faults are drawn from seed.
func NewNetwork(seed uint64) *Network {
	return &Network{
		rand:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		nodes:    make(map[uint64]func([]cluster.Message)),
		isolated: make(map[uint64]bool),
		links:    make(map[[2]uint64]bool),
		counts:   make(map[[2]uint64]*linkCounts),
	}
}

// Attach delivers the messages to id to receive (a Node's Receive),
// replacing any earlier receiver of id (a restarted node).
func (nw *Network) Attach(id uint64, receive func([]cluster.Message)) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.nodes[id] = receive
}

// Detach drops every message to id from now on (a stopped node).
func (nw *Network) Detach(id uint64) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	delete(nw.nodes, id)
}

// SetFaults sets the odds of faults from now on.
func (nw *Network) SetFaults(f Faults) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.faults = f
}

// Isolate cuts id off from every other node, both ways.
func (nw *Network) Isolate(id uint64) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.isolated[id] = true
}

// Cut cuts the link between a and b, both ways.
func (nw *Network) Cut(a, b uint64) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.links[[2]uint64{min(a, b), max(a, b)}] = true
}

// Heal restores every link.
func (nw *Network) Heal() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	clear(nw.isolated)
	clear(nw.links)
}

// Stats returns what the network did so far.
func (nw *Network) Stats() NetworkStats {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.stats
}

// Close drops every message from now on and waits for the delayed
// deliveries to be done.
func (nw *Network) Close() {
	nw.mu.Lock()
	nw.closed = true
	nw.mu.Unlock()
	nw.pending.Wait()
}

// Transport returns the transport node from sends through.
func (nw *Network) Transport(from uint64) cluster.Transport { return networkTransport{nw, from} }

type networkTransport struct {
	nw   *Network
	from uint64
}

// Peer says whether messages from the transport's node to id arrive now:
// id is attached and neither node is cut off from the other. Sent counts
// the messages delivered, Dropped those lost.
func (t networkTransport) Peer(id uint64) (cluster.PeerStats, bool) {
	nw := t.nw
	nw.mu.Lock()
	defer nw.mu.Unlock()
	st := cluster.PeerStats{ID: id, Reachable: !nw.closed && nw.nodes[id] != nil && !nw.cutLocked(t.from, id)}
	if c := nw.counts[[2]uint64{t.from, id}]; c != nil {
		st.Sent, st.Dropped = c.sent, c.dropped
	}
	return st, true
}

func (t networkTransport) Send(msgs []cluster.Message) {
	for _, m := range msgs {
		b, err := cluster.AppendMessages(nil, []cluster.Message{m})
		if err != nil {
			panic(err) // a message raft made that does not encode
		}
		t.nw.send(t.from, m.Raft.GetTo(), b)
	}
}

// send delivers one encoded message from one node to another, with the
// faults drawn for it.
func (nw *Network) send(from, to uint64, b []byte) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.stats.Sent++
	c := nw.counts[[2]uint64{from, to}]
	if c == nil {
		c = new(linkCounts)
		nw.counts[[2]uint64{from, to}] = c
	}
	if nw.closed || nw.cutLocked(from, to) {
		nw.stats.Dropped++
		c.dropped++
		return
	}
	f := nw.faults
	if f.Drop > 0 && nw.rand.Float64() < f.Drop {
		nw.stats.Dropped++
		c.dropped++
		return
	}
	copies := 1
	if f.Duplicate > 0 && nw.rand.Float64() < f.Duplicate {
		copies = 2
		nw.stats.Duplicated++
	}
	for range copies {
		var delay time.Duration
		if f.MaxDelay > 0 {
			delay = time.Duration(nw.rand.Int64N(int64(f.MaxDelay) + 1))
		}
		if delay == 0 {
			nw.deliverLocked(from, to, b)
			continue
		}
		nw.stats.Delayed++
		nw.pending.Add(1)
		time.AfterFunc(delay, func() {
			defer nw.pending.Done()
			nw.mu.Lock()
			defer nw.mu.Unlock()
			if !nw.closed && !nw.cutLocked(from, to) {
				nw.deliverLocked(from, to, b)
			} else {
				c.dropped++
			}
		})
	}
}

// cutLocked reports whether messages between a and b are cut.
func (nw *Network) cutLocked(a, b uint64) bool {
	return nw.isolated[a] || nw.isolated[b] || nw.links[[2]uint64{min(a, b), max(a, b)}]
}

// deliverLocked hands a message to its node, if attached. Receive never
// blocks, so it may run under mu.
func (nw *Network) deliverLocked(from, to uint64, b []byte) {
	c := nw.counts[[2]uint64{from, to}]
	receive := nw.nodes[to]
	if receive == nil {
		nw.stats.Dropped++
		c.dropped++
		return
	}
	c.sent++
	msgs, err := cluster.DecodeMessages(b)
	if err != nil {
		panic(err) // what AppendMessages wrote
	}
	nw.stats.Delivered++
	receive(msgs)
}
