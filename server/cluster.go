package server

import (
	"errors"
	"net/http"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/partitioner"
)

// Cluster, set as Options.Cluster on a node of a cluster (package cluster
// implements it), tells where each node serves clients, so that a request
// sent to a node that does not lead its group's partition is answered 421
// with the leader's address.
type Cluster interface {
	// Address returns the host:port where node id serves clients, if known.
	Address(id uint64) (string, bool)
}

// LeaderHeader names the header of a 421 answer that holds the leader's
// host:port; clients send the request there.
const LeaderHeader = "X-Offsetd-Leader"

// coordinatorInfo is the body of GET /v1/coordinator.
type coordinatorInfo struct {
	Group     string `json:"group,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Partition int    `json:"partition"`
	// Leader is the node id of the partition's leader, 0 on a single node.
	Leader uint64 `json:"leader"`
	// Address is where the leader serves clients.
	Address string `json:"address"`
	// Self is true when the node answering leads the partition.
	Self bool `json:"self"`
}

// getCoordinator is GET /v1/coordinator?group=G (or ?topic=T, for a static
// topic): which partition holds it and where its leader serves. Any node
// answers; a node that knows no leader answers 503 no_leader.
func (s *Server) getCoordinator(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	group, topic := q.Get("group"), q.Get("topic")
	if (group == "") == (topic == "") {
		writeError(w, errorf(http.StatusBadRequest, codeInvalidArgument, "give one of ?group= and ?topic="))
		return
	}
	part, err := partitioner.New(s.c.Partitions())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info := coordinatorInfo{Group: group, Topic: topic}
	if group != "" {
		info.Partition = part.Group(group)
		info.Leader, info.Self = s.c.Leader(group)
	} else {
		info.Partition = part.Topic(topic)
		info.Leader, info.Self = s.c.TopicLeader(topic)
	}
	switch {
	case info.Self:
		info.Address = r.Host
	case info.Leader != 0 && s.opts.Cluster != nil:
		info.Address, _ = s.opts.Cluster.Address(info.Leader)
	}
	if info.Address == "" {
		writeError(w, errorf(http.StatusServiceUnavailable, codeNoLeader, "partition %d has no leader this node knows of", info.Partition))
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// linearizable makes a read of a group linearizable on a node of a
// cluster: it waits until this node, leading the group's partition, has
// applied every write acknowledged before the request (Raft's ReadIndex);
// elsewhere the request is answered 421. On a single node it does nothing.
func (s *Server) linearizable(next http.HandlerFunc) http.HandlerFunc {
	return s.after(next, func(r *http.Request) error { return s.c.Barrier(r.Context(), r.PathValue("group")) })
}

// linearizableTopic is linearizable for the reads of a static topic.
func (s *Server) linearizableTopic(next http.HandlerFunc) http.HandlerFunc {
	return s.after(next, func(r *http.Request) error { return s.c.TopicBarrier(r.Context(), r.PathValue("topic")) })
}

// after runs barrier before next on a node of a cluster.
func (s *Server) after(next http.HandlerFunc, barrier func(r *http.Request) error) http.HandlerFunc {
	if s.opts.Cluster == nil {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if err := barrier(r); err != nil {
			s.fail(w, r, err)
			return
		}
		next(w, r)
	}
}

// notLeader answers a request sent to a node that does not lead its
// partition: 421 with the leader's address, or 503 when no leader is
// known. It reports false for other errors.
func (s *Server) notLeader(w http.ResponseWriter, err error) bool {
	e, addr, ok := s.leaderError(err)
	if !ok {
		return false
	}
	if addr != "" {
		w.Header().Set(LeaderHeader, addr)
	}
	writeError(w, e)
	return true
}

// leaderError is the answer to a write err says this node does not lead
// the partition of: 421 with the leader's address, or 503 when it knows no
// leader. ok is false for other errors.
func (s *Server) leaderError(err error) (e *apiError, addr string, ok bool) {
	var nle *coordinator.NotLeaderError
	if !errors.As(err, &nle) {
		return nil, "", false
	}
	if nle.Leader != 0 && s.opts.Cluster != nil {
		addr, _ = s.opts.Cluster.Address(nle.Leader)
	}
	if addr == "" {
		return errorf(http.StatusServiceUnavailable, codeNoLeader, "partition %d has no leader this node knows of; retry", nle.Partition), "", true
	}
	return errorf(http.StatusMisdirectedRequest, codeNotLeader, "partition %d is led by node %d at %s", nle.Partition, nle.Leader, addr), addr, true
}

// ClusterStats is a Cluster that also reports its Raft state (package
// cluster's Node does): the Server then exports the offsetd_raft_* metrics,
// serves GET /v1/cluster/status, fails /readyz while the node is not a
// voter of the cluster, and refuses requests once it was removed.
type ClusterStats interface {
	Cluster
	// ID returns the node's id.
	ID() uint64
	// Stats returns what the node knows of its groups and peers.
	Stats() cluster.Stats
	// Ready returns nil while the node is a voter of some partition, and
	// otherwise why not: cluster.ErrNotAdded or cluster.ErrRemoved.
	Ready() error
}

// clusterReady refuses a request on a node of a cluster that is no voter
// of it: 410 node_removed once it was removed, 503 not_added while it
// waits to be added. It returns nil elsewhere.
func (s *Server) clusterReady() *apiError {
	cs, ok := s.opts.Cluster.(ClusterStats)
	if !ok {
		return nil
	}
	err := cs.Ready()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cluster.ErrRemoved):
		return errorf(http.StatusGone, codeNodeRemoved, "%v", err)
	}
	return errorf(http.StatusServiceUnavailable, codeNotAdded, "%v", err)
}
