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
