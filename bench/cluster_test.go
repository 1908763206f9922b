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
	"slices"
	"testing"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/partitioner"
)

// BenchmarkClusterCommit measures durable commits on a 3-node cluster
// (every partition a Raft group replicated on three nodes in this process,
// talking HTTP over loopback, each with its own journal on the same disk)
// beside offsetd on one node, in the same run: a commit is acknowledged
// once two of the three nodes have fsynced it and the leader applied it.
// Commits go to the leader of their partition through its embedded API;
// leaders are spread over the nodes. Rates and latencies as in
// BenchmarkCommit.
func BenchmarkClusterCommit(b *testing.B) {
	for _, writers := range []int{1, 64} {
		for _, sys := range []system{offsetdSystem, offsetdRaftSystem, floorRaftSystem} {
			b.Run(fmt.Sprintf("sys=%s/writers=%d/parts=1", sys.name, writers), func(b *testing.B) {
				benchCommit(b, sys, writers, 1)
			})
		}
	}
}

// offsetdRaftSystem is offsetd on three nodes of a cluster in this process.
var offsetdRaftSystem = system{
	name:    "offsetd-raft3",
	durable: true,
	open: func(dir string, _ int) (committer, error) {
		return openCluster(dir, 3)
	},
}

// floorRaftSystem is the replication floor: what this disk allows three
// replicas' logs at all. Each commit is appended to three group-commit
// floors (floor-group, three files in three directories of the same disk)
// at once, as a leader writes its entry while its followers write theirs,
// and is acknowledged once the first file (the leader's) and one other
// have synced it. No network, no consensus, no state: offsetd-raft3 beside
// it shows what those cost.
var floorRaftSystem = system{
	name:    "floor-raft3",
	durable: true,
	open: func(dir string, _ int) (committer, error) {
		var s raftFloor
		for i := range s.files {
			d := filepath.Join(dir, fmt.Sprint(i+1))
			g, err := func() (*groupFile, error) {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return nil, err
				}
				return openGroupFile(filepath.Join(d, "floor.log"), 0)
			}()
			if err != nil {
				return nil, errors.Join(err, s.Close())
			}
			s.files[i] = g
		}
		return &s, nil
	},
}

// raftFloor is the floor-raft3 store.
type raftFloor struct{ files [3]*groupFile }

func (s *raftFloor) Commit(ctx context.Context, group string, offsets []coordinator.OffsetCommit) error {
	followers := make(chan error, 2)
	sent := slices.Clone(offsets) // the caller reuses offsets once answered
	for _, f := range s.files[1:] {
		go func() { followers <- f.Commit(ctx, group, sent) }()
	}
	if err := s.files[0].Commit(ctx, group, offsets); err != nil {
		return err
	}
	err := <-followers
	if err != nil {
		err = <-followers // a quorum needs one follower
	}
	return err
}

// Close closes the three files.
func (s *raftFloor) Close() error {
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
	journal    *journalStats // every node's journal
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
	quiet := slog.New(slog.DiscardHandler)
	for _, id := range peers {
		others := map[uint64]string{}
		for p, l := range listeners {
			if p != id {
				others[p] = l.Addr().String()
			}
		}
		tr := cluster.NewHTTPTransport(cluster.HTTPOptions{ID: id, Peers: others, Logger: quiet})
		s.transports = append(s.transports, tr)
		n, err := cluster.Open(filepath.Join(dir, fmt.Sprint(id)), opts, cluster.Options{ID: id, Peers: peers, Transport: tr, Logger: quiet})
		if err != nil {
			return nil, errors.Join(err, s.Close())
		}
		s.nodes[id] = n
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
	for _, n := range s.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}
