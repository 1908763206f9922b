// Package clustertest holds what tests of a cluster of offsetd nodes in
// one process need and production code does not: a fault-injecting
// transport between the nodes.
package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/offsetd/offsetd/cluster"
)

// Network is an in-process transport between the nodes of one process,
// for tests of a cluster: it drops, duplicates and delays (and so
// reorders) messages, with odds drawn from a seeded source, cuts nodes
// off from each other, and cuts streamed snapshots in the middle. Messages
// are encoded and decoded on their way, as between processes; a snapshot's
// file is streamed to the receiving node as it is read, as over HTTP.
type Network struct {
	mu       sync.Mutex
	rand     *rand.Rand                // guarded by mu
	faults   Faults                    // guarded by mu
	nodes    map[uint64]Receiver       // guarded by mu
	isolated map[uint64]bool           // guarded by mu
	closed   bool                      // guarded by mu
	pending  sync.WaitGroup            // delayed deliveries
	stats    NetworkStats              // guarded by mu
	links    map[[2]uint64]bool        // guarded by mu: cut links, both ways
	counts   map[[2]uint64]*linkCounts // guarded by mu: by sender and receiver
}

// linkCounts counts the messages of one sender to one receiver.
type linkCounts struct{ sent, dropped uint64 }

// Receiver is what a Network delivers a node's messages and snapshots to:
// its *cluster.Node.
type Receiver interface {
	Receive(msgs []cluster.Message)
	ReceiveSnapshot(m cluster.Message, file io.Reader) error
}

// Faults are the odds of each fault, per message.
type Faults struct {
	Drop      float64       // the message is lost (a snapshot is refused before its file)
	Duplicate float64       // it arrives twice (not a snapshot)
	MaxDelay  time.Duration // it arrives after a random delay up to this (not a snapshot)
	// CutSnapshot is the odds that a streamed snapshot is cut in the
	// middle of its file: the receiving node reads half of it, then an
	// error, as from a connection that dropped.
	CutSnapshot float64
}

// NetworkStats counts what a Network did.
type NetworkStats struct {
	Sent, Delivered, Dropped, Duplicated, Delayed int
	// Snapshots counts the snapshots streamed whole, SnapshotsCut those
	// cut in the middle, SnapshotsStreaming those being streamed now.
	Snapshots, SnapshotsCut, SnapshotsStreaming int
	// SnapshotBytes counts the bytes of files the receiving nodes read;
	// LargestSnapshot is the size of the largest file streamed whole.
	SnapshotBytes, LargestSnapshot int64
	// LargestSnapshotMessage is the size of the largest MsgSnap encoded,
	// without its file: a snapshot's Data only refers to the file.
	LargestSnapshotMessage int
	// LargestSnapshotRead is the most of a file one read took.
	LargestSnapshotRead int
}

// errCut is what a receiving node reads from a snapshot that CutSnapshot
// cuts.
var errCut = errors.New("clustertest: snapshot transfer cut")

// NewNetwork returns a network whose faults are drawn from seed.
func NewNetwork(seed uint64) *Network {
	return &Network{
		rand:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		nodes:    make(map[uint64]Receiver),
		isolated: make(map[uint64]bool),
		links:    make(map[[2]uint64]bool),
		counts:   make(map[[2]uint64]*linkCounts),
	}
}

// Attach delivers the messages and snapshots to id to r (the Node),
// replacing any earlier receiver of id (a restarted node).
func (nw *Network) Attach(id uint64, r Receiver) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.nodes[id] = r
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
	receiver := nw.nodes[to]
	if receiver == nil {
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
	receiver.Receive(msgs)
}

// SendSnapshot streams m and file to m's node, in the calling goroutine,
// unless the link is cut or the odds drop it; CutSnapshot's odds cut it
// halfway through the file.
func (t networkTransport) SendSnapshot(ctx context.Context, m cluster.Message, file io.Reader, size int64) error {
	nw, to := t.nw, m.Raft.GetTo()
	b, err := cluster.AppendMessages(nil, []cluster.Message{m})
	if err != nil {
		return err
	}
	nw.mu.Lock()
	nw.stats.Sent++
	nw.stats.LargestSnapshotMessage = max(nw.stats.LargestSnapshotMessage, len(b))
	c := nw.counts[[2]uint64{t.from, to}]
	if c == nil {
		c = new(linkCounts)
		nw.counts[[2]uint64{t.from, to}] = c
	}
	receiver := nw.nodes[to]
	if nw.closed || receiver == nil || nw.cutLocked(t.from, to) || nw.faults.Drop > 0 && nw.rand.Float64() < nw.faults.Drop {
		nw.stats.Dropped++
		c.dropped++
		nw.mu.Unlock()
		return fmt.Errorf("clustertest: snapshot from %d to %d dropped", t.from, to)
	}
	cut := nw.faults.CutSnapshot > 0 && nw.rand.Float64() < nw.faults.CutSnapshot
	nw.stats.SnapshotsStreaming++
	nw.mu.Unlock()

	msgs, err := cluster.DecodeMessages(b)
	if err != nil || len(msgs) != 1 {
		panic(fmt.Sprint(msgs, err)) // what AppendMessages wrote
	}
	r := &streamReader{ctx: ctx, r: io.LimitReader(file, size), cutAt: -1}
	if cut {
		r.cutAt = size / 2
	}
	err = receiver.ReceiveSnapshot(msgs[0], r)
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.stats.SnapshotsStreaming--
	nw.stats.SnapshotBytes += r.n
	nw.stats.LargestSnapshotRead = max(nw.stats.LargestSnapshotRead, r.largest)
	switch {
	case r.cut:
		nw.stats.SnapshotsCut++
		c.dropped++
		if err == nil {
			panic("clustertest: a node took a snapshot that was cut")
		}
	case err != nil:
		c.dropped++
	default:
		nw.stats.Snapshots++
		nw.stats.LargestSnapshot = max(nw.stats.LargestSnapshot, size)
		nw.stats.Delivered++
		c.sent++
	}
	return err
}

// streamReader is a snapshot's file as the receiving node reads it: it
// counts what was read, stops once ctx is done, and fails at cutAt (unless
// negative), as a connection that dropped.
type streamReader struct {
	ctx     context.Context
	r       io.Reader
	n       int64
	largest int // the most one read took
	cutAt   int64
	cut     bool
}

func (s *streamReader) Read(b []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	if s.cutAt >= 0 {
		if s.n >= s.cutAt {
			s.cut = true
			return 0, errCut
		}
		b = b[:min(int64(len(b)), s.cutAt-s.n)]
	}
	n, err := s.r.Read(b)
	s.n += int64(n)
	s.largest = max(s.largest, n)
	return n, err
}
