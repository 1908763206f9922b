package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/cluster/clustertest"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/partitioner"
)

// BenchmarkClusterCommit measures durable commits on a 3-node cluster
// (every partition a Raft group replicated on three nodes in this process,
// talking HTTP over loopback, each with its own journal on the same disk)
// beside offsetd on one node, in the same run: a commit is acknowledged
// once two of the three nodes have fsynced it and the leader applied it.
// Commits go to the leader of their partition through its embedded API;
// leaders are spread over the nodes. Beside them, the same as an operator
// runs it: offsetd-serve3, three offsetd serve processes of a cluster on
// loopback, and offsetd-serve1, one offsetd serve process, both driven
// through client/ over HTTP, their server CPU the processes' own. Rates
// and latencies as in BenchmarkCommit.
func BenchmarkClusterCommit(b *testing.B) {
	for _, writers := range []int{1, 64} {
		for _, sys := range []system{offsetdSystem, offsetdRaftSystem, offsetdServe1System, offsetdServe3System, floorRaftSystem} {
			b.Run(fmt.Sprintf("sys=%s/writers=%d/parts=1", sys.name, writers), func(b *testing.B) {
				benchCommit(b, sys, writers, 1)
			})
		}
	}
}

// offsetdRaftSystem is offsetd on three nodes of a cluster in this process.
//
// Two switches in the environment make diagnostic builds of the row, to
// tell what each part of the path costs, never for reported figures:
// BENCH_CLUSTER_TRANSPORT=memory carries the Raft messages in process
// (clustertest.Network) instead of over HTTP, BENCH_CLUSTER_NOSYNC=1 runs
// the nodes' journals with UnsafeNoSync.
var offsetdRaftSystem = system{
	name:    "offsetd-raft3",
	durable: true,
	open: func(dir string, _ int) (committer, error) {
		return openCluster(dir, 3)
	},
}

// floorRaftSystem is the replication floor: what this disk allows three
// replicas' logs at all. One flusher takes every commit waiting, writes the
// batch to three preallocated files of the same disk (written in place, as
// offsetd's sync ring is, in three directories), fdatasyncs the three at
// once, as a leader syncs its entries while its followers sync theirs, and
// acknowledges the batch once the first file (the leader's) and one other
// have synced it; the next batch starts once the third has too. No network,
// no consensus, no state: offsetd-raft3 beside it shows what those cost.
var floorRaftSystem = system{
	name:    "floor-raft3",
	durable: true,
	open: func(dir string, _ int) (committer, error) {
		s := &raftFloor{wake: make(chan struct{}, 1), stopped: make(chan struct{})}
		for i := range s.files {
			d := filepath.Join(dir, fmt.Sprint(i+1))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, errors.Join(err, s.closeFiles())
			}
			f, err := os.OpenFile(filepath.Join(d, "floor.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return nil, errors.Join(err, s.closeFiles())
			}
			s.files[i] = f
			if err := preallocate(f, floorRingSize); err != nil {
				return nil, errors.Join(err, s.closeFiles())
			}
		}
		go s.flusher()
		return s, nil
	},
}

// raftFloor is the floor-raft3 store.
type raftFloor struct {
	files [3]*os.File

	mu     sync.Mutex
	queue  []*floorWaiter // guarded by mu
	closed bool           // guarded by mu

	wake    chan struct{}
	stopped chan struct{}

	// Owned by the flusher.
	pos int64
	buf []byte
}

func (s *raftFloor) Commit(_ context.Context, group string, offsets []coordinator.OffsetCommit) error {
	w := &floorWaiter{record: appendRecord(nil, group, offsets, time.Now().UnixMilli()), done: make(chan error, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errFloorClosed
	}
	s.queue = append(s.queue, w)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return <-w.done
}

// flusher writes and syncs what is queued, batch after batch, until Close
// and the queue is empty.
func (s *raftFloor) flusher() {
	defer close(s.stopped)
	for range s.wake {
		s.mu.Lock()
		batch, closed := s.queue, s.closed
		s.queue = nil
		s.mu.Unlock()
		if len(batch) > 0 {
			s.flush(batch)
		}
		if closed {
			return
		}
	}
}

// flush writes batch to the three files at once and answers it once the
// first and one other have synced it.
func (s *raftFloor) flush(batch []*floorWaiter) {
	s.buf = s.buf[:0]
	for _, w := range batch {
		s.buf = append(s.buf, w.record...)
	}
	if s.pos+int64(len(s.buf)) > floorRingSize {
		s.pos = 0
	}
	type fileSynced struct {
		file int
		err  error
	}
	synced := make(chan fileSynced, len(s.files))
	for i, f := range s.files {
		go func() {
			_, err := f.WriteAt(s.buf, s.pos)
			if err == nil {
				err = fdatasync(f)
			}
			synced <- fileSynced{i, err}
		}()
	}
	// The syncs answer in any order: the batch is acknowledged once two
	// have, the leader's (file 0) among them; the flusher waits for the
	// third before the next batch, which reuses buf.
	leader, others, answered := false, 0, false
	var err error
	for range s.files {
		r := <-synced
		err = errors.Join(err, r.err)
		if r.file == 0 {
			leader = true
		} else {
			others++
		}
		if !answered && leader && others > 0 {
			answered = true
			for _, w := range batch {
				w.done <- err
			}
		}
	}
	s.pos += int64(len(s.buf))
}

// Close flushes what is queued and closes the files.
func (s *raftFloor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errFloorClosed
	}
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.stopped
	return s.closeFiles()
}

func (s *raftFloor) closeFiles() error {
	var errs []error
	for _, f := range s.files {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// clusterStore commits to the leader of each group's partition.
type clusterStore struct {
	nodes      map[uint64]*cluster.Node
	transports []*cluster.HTTPTransport
	servers    []*http.Server
	part       partitioner.Partitioner
	journal    *journalStats        // every node's journal
	network    *clustertest.Network // in place of the transports, in a diagnostic build
}

func (s *clusterStore) syncStats() *syncStats { return &s.journal.syncStats }

func openCluster(dir string, size int) (*clusterStore, error) {
	s := &clusterStore{nodes: map[uint64]*cluster.Node{}, journal: &journalStats{}}
	listeners := map[uint64]net.Listener{}
	var peers []uint64
	for id := range uint64(size) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(err, s.Close())
		}
		listeners[id+1] = l
		peers = append(peers, id+1)
	}
	opts := offsetdOptions()
	opts.Observer = s.journal
	opts.UnsafeNoSync = os.Getenv("BENCH_CLUSTER_NOSYNC") == "1"
	var memory *clustertest.Network
	if os.Getenv("BENCH_CLUSTER_TRANSPORT") == "memory" {
		memory = clustertest.NewNetwork(1)
		s.network = memory
	}
	quiet := slog.New(slog.DiscardHandler)
	for _, id := range peers {
		others := map[uint64]string{}
		for p, l := range listeners {
			if p != id {
				others[p] = l.Addr().String()
			}
		}
		var tr cluster.Transport
		if memory != nil {
			tr = memory.Transport(id)
		} else {
			ht := cluster.NewHTTPTransport(cluster.HTTPOptions{ID: id, Peers: others, Logger: quiet})
			s.transports = append(s.transports, ht)
			tr = ht
		}
		n, err := cluster.Open(filepath.Join(dir, fmt.Sprint(id)), opts, cluster.Options{ID: id, Peers: peers, Transport: tr, Logger: quiet})
		if err != nil {
			return nil, errors.Join(err, s.Close())
		}
		s.nodes[id] = n
		if memory != nil {
			memory.Attach(id, n)
		}
		srv := &http.Server{Handler: cluster.Handler(n, "")}
		s.servers = append(s.servers, srv)
		go srv.Serve(listeners[id])
	}
	s.part, _ = partitioner.New(s.nodes[1].Coordinator().Partitions())
	// Wait until every partition is led by its preferred node, where the
	// lead stays.
	ctx := context.Background()
	for p := range s.part.N() {
		preferred := peers[p%len(peers)]
		for {
			leader, err := s.nodes[1].AwaitLeader(ctx, p, 0)
			if err != nil {
				return nil, errors.Join(err, s.Close())
			}
			if leader == preferred {
				break
			}
			if _, err := s.nodes[1].AwaitLeader(ctx, p, leader); err != nil {
				return nil, errors.Join(err, s.Close())
			}
		}
	}
	return s, nil
}

// Commit sends the commit to the leader of its partition, following a
// change of leader.
func (s *clusterStore) Commit(ctx context.Context, group string, offsets []coordinator.OffsetCommit) error {
	p := s.part.Group(group)
	for {
		leader := s.nodes[1].Leader(p)
		n := s.nodes[leader]
		if n == nil {
			if _, err := s.nodes[1].AwaitLeader(ctx, p, 0); err != nil {
				return err
			}
			continue
		}
		err := n.Coordinator().Commit(ctx, group, offsets)
		if err == nil || !(errors.Is(err, coordinator.ErrNotLeader) || errors.Is(err, coordinator.ErrNotCommitted) || errors.Is(err, coordinator.ErrLeadershipLost)) {
			return err
		}
	}
}

// Close stops the nodes.
func (s *clusterStore) Close() error {
	var errs []error
	for _, srv := range s.servers {
		srv.Close()
	}
	for _, tr := range s.transports {
		tr.Close()
	}
	if s.network != nil {
		s.network.Close()
	}
	for _, n := range s.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}
