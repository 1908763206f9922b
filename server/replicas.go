package server

import (
	"context"
	"net/http"
	"strconv"

	"github.com/offsetd/offsetd/cluster"
)

// ReplicaAdmin, set as Options.Replicas on a node of a cluster, shows and
// changes the replicas of each partition (package cluster's Node does it,
// through Raft configuration changes).
type ReplicaAdmin interface {
	// Replicas returns partition's configuration as this node knows it.
	Replicas(partition int) (cluster.Replicas, error)
	// ChangeReplicas makes the change on the partition's leader; elsewhere
	// it fails with a *coordinator.NotLeaderError. A change under way
	// makes it fail with cluster.ErrChangePending.
	ChangeReplicas(ctx context.Context, partition int, ch cluster.ReplicaChange) error
}

// replicasJSON is the JSON of a partition's configuration.
type replicasJSON struct {
	Partition int      `json:"partition"`
	Voters    []uint64 `json:"voters"`
	Learners  []uint64 `json:"learners,omitempty"`
	Outgoing  []uint64 `json:"outgoing,omitempty"`
	Leader    uint64   `json:"leader"`
}

// replicaChangeJSON is the body of POST
// /v1/cluster/partitions/{partition}/replicas: add a node, remove one, or
// both (a move).
type replicaChangeJSON struct {
	Add        uint64 `json:"add,omitempty"`
	AddAddress string `json:"addAddress,omitempty"`
	Remove     uint64 `json:"remove,omitempty"`
}

// replicaAdmin returns the node's ReplicaAdmin, or answers 404 on a node
// that is not in a cluster.
func (s *Server) replicaAdmin(w http.ResponseWriter) (ReplicaAdmin, bool) {
	if s.opts.Replicas == nil {
		writeError(w, errorf(http.StatusNotFound, codeNotFound, "this node is not in a cluster"))
		return nil, false
	}
	return s.opts.Replicas, true
}

// listReplicas is GET /v1/cluster/partitions: every partition's
// configuration as this node knows it.
func (s *Server) listReplicas(w http.ResponseWriter, r *http.Request) {
	admin, ok := s.replicaAdmin(w)
	if !ok {
		return
	}
	out := make([]replicasJSON, s.c.Partitions())
	for p := range out {
		rep, err := admin.Replicas(p)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out[p] = replicasJSON(rep)
	}
	writeJSON(w, http.StatusOK, out)
}

// changeReplicas is POST /v1/cluster/partitions/{partition}/replicas: it
// returns the configuration once the change is made, on the partition's
// leader (421 elsewhere). A change under way is answered 409
// change_pending.
func (s *Server) changeReplicas(w http.ResponseWriter, r *http.Request) {
	admin, ok := s.replicaAdmin(w)
	if !ok {
		return
	}
	p, err := strconv.Atoi(r.PathValue("partition"))
	if err != nil || p < 0 || p >= s.c.Partitions() {
		writeError(w, errorf(http.StatusBadRequest, codeInvalidArgument, "partition %q: want 0 to %d", r.PathValue("partition"), s.c.Partitions()-1))
		return
	}
	var ch replicaChangeJSON
	if e := s.decodeBody(w, r, &ch); e != nil {
		writeError(w, e)
		return
	}
	if err := admin.ChangeReplicas(r.Context(), p, cluster.ReplicaChange(ch)); err != nil {
		s.fail(w, r, err)
		return
	}
	rep, err := admin.Replicas(p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, replicasJSON(rep))
}

// clusterStatusJSON is the body of GET /v1/cluster/status: the node's own
// view of the cluster.
type clusterStatusJSON struct {
	Node uint64 `json:"node"`
	// Membership is member, learner, joining or removed.
	Membership string                `json:"membership"`
	Peers      []peerStatusJSON      `json:"peers"`
	Partitions []partitionStatusJSON `json:"partitions"`
}

// peerStatusJSON is another node as this one's transport sees it.
type peerStatusJSON struct {
	ID uint64 `json:"id"`
	// Address is where the peer serves clients, if this node knows it.
	Address   string `json:"address,omitempty"`
	Reachable bool   `json:"reachable"`
	Sent      uint64 `json:"messagesSent"`
	Dropped   uint64 `json:"messagesDropped"`
}

// partitionStatusJSON is a partition's group as this node sees it.
type partitionStatusJSON struct {
	replicasJSON
	Term    uint64 `json:"term"`
	Commit  uint64 `json:"commit"`
	Applied uint64 `json:"applied"`
	// Followers, where this node leads, says how each replica fares.
	Followers []followerJSON `json:"followers,omitempty"`
}

type followerJSON struct {
	ID     uint64 `json:"id"`
	Active bool   `json:"active"`
	Match  uint64 `json:"match"`
}

// clusterStatus is GET /v1/cluster/status: this node's membership, how
// its transport reaches every other node, and every partition's
// configuration, leader, term, commit and applied index as it sees them,
// with each follower's progress where it leads. The status of a cluster is
// every node's answer together (offsetd cluster status asks each).
func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request) {
	admin, ok := s.replicaAdmin(w)
	if !ok {
		return
	}
	cs, ok := s.opts.Cluster.(ClusterStats)
	if !ok {
		writeError(w, errorf(http.StatusNotFound, codeNotFound, "this node reports no cluster status"))
		return
	}
	st := cs.Stats()
	out := clusterStatusJSON{Node: cs.ID(), Membership: st.Membership.String(), Peers: []peerStatusJSON{}, Partitions: []partitionStatusJSON{}}
	for _, p := range st.Peers {
		addr, _ := cs.Address(p.ID)
		out.Peers = append(out.Peers, peerStatusJSON{ID: p.ID, Address: addr, Reachable: p.Reachable, Sent: p.Sent, Dropped: p.Dropped})
	}
	for _, p := range st.Partitions {
		rep, err := admin.Replicas(p.Partition)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		ps := partitionStatusJSON{replicasJSON: replicasJSON(rep), Term: p.Term, Commit: p.Commit, Applied: p.Applied}
		for _, f := range p.Followers {
			ps.Followers = append(ps.Followers, followerJSON(f))
		}
		out.Partitions = append(out.Partitions, ps)
	}
	writeJSON(w, http.StatusOK, out)
}
