package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/server"
)

// replicaAdmin answers for the replicas of a cluster node: each change
// is recorded and answered with the error queued for it.
type replicaAdmin struct {
	changes []cluster.ReplicaChange
	errs    []error // answers to the next changes, in order
}

func (a *replicaAdmin) Replicas(p int) (cluster.Replicas, error) {
	voters := []uint64{1, 2, 3}
	for _, ch := range a.changes {
		if ch.Add != 0 {
			voters = append(voters, ch.Add)
		}
		voters = slices.DeleteFunc(voters, func(id uint64) bool { return id == ch.Remove })
	}
	return cluster.Replicas{Partition: p, Voters: voters, Leader: 1}, nil
}

func (a *replicaAdmin) ChangeReplicas(_ context.Context, _ int, ch cluster.ReplicaChange) error {
	if len(a.errs) > 0 {
		err := a.errs[0]
		a.errs = a.errs[1:]
		if err != nil {
			return err
		}
	}
	a.changes = append(a.changes, ch)
	return nil
}

// addresses says where nodes serve clients.
type addresses map[uint64]string

func (a addresses) Address(id uint64) (string, bool) {
	addr, ok := a[id]
	return addr, ok
}

func TestReplicasAPI(t *testing.T) {
	admin := &replicaAdmin{}
	e := newEnv(t, envConfig{server: func(o *server.Options) {
		o.Replicas = admin
		o.Cluster = addresses{2: "node-2:7070"}
	}})
	var all []struct {
		Partition int      `json:"partition"`
		Voters    []uint64 `json:"voters"`
		Leader    uint64   `json:"leader"`
	}
	e.must(http.StatusOK, "GET", "/v1/cluster/partitions", "").decode(t, &all)
	if len(all) != 4 || all[3].Partition != 3 || !slices.Equal(all[3].Voters, []uint64{1, 2, 3}) || all[3].Leader != 1 {
		t.Fatalf("GET /v1/cluster/partitions: %+v", all)
	}

	const path = "/v1/cluster/partitions/1/replicas"
	r := e.must(http.StatusOK, "POST", path, `{"add":4,"addAddress":"node-4:7104","remove":1}`)
	if want := (cluster.ReplicaChange{Add: 4, AddAddress: "node-4:7104", Remove: 1}); len(admin.changes) != 1 || admin.changes[0] != want {
		t.Fatalf("changes made: %+v, want %+v", admin.changes, want)
	}
	if got := string(r.body); got != `{"partition":1,"voters":[2,3,4],"leader":1}`+"\n" {
		t.Fatalf("answer: %s", got)
	}

	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("partition 1: %w", cluster.ErrChangePending), http.StatusConflict, "change_pending"},
		{fmt.Errorf("node 9 is not a voter: %w", coordinator.ErrInvalid), http.StatusBadRequest, "invalid_argument"},
		{&coordinator.NotLeaderError{Partition: 1, Leader: 2}, http.StatusMisdirectedRequest, "not_leader"},
		{&coordinator.NotLeaderError{Partition: 1}, http.StatusServiceUnavailable, "no_leader"},
		{errors.New("journal gone"), http.StatusInternalServerError, "internal"},
	} {
		admin.errs = []error{tc.err}
		r := e.fail(tc.status, tc.code, "POST", path, `{"remove":2}`)
		if tc.code == "not_leader" && r.header.Get(server.LeaderHeader) != "node-2:7070" {
			t.Fatalf("421 names %q", r.header.Get(server.LeaderHeader))
		}
	}
	e.fail(http.StatusBadRequest, "invalid_argument", "POST", "/v1/cluster/partitions/4/replicas", `{"add":4}`)
	e.fail(http.StatusBadRequest, "invalid_argument", "POST", "/v1/cluster/partitions/x/replicas", `{"add":4}`)
	e.fail(http.StatusBadRequest, "unknown_field", "POST", path, `{"add":4,"move":1}`)
	e.fail(http.StatusMethodNotAllowed, "method_not_allowed", "GET", path, "")
	if len(admin.changes) != 1 {
		t.Fatalf("refused changes were made: %+v", admin.changes)
	}
}

func TestReplicasAPIOffCluster(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fail(http.StatusNotFound, "not_found", "GET", "/v1/cluster/partitions", "")
	e.fail(http.StatusNotFound, "not_found", "POST", "/v1/cluster/partitions/0/replicas", `{"add":4}`)
}

func TestReplicasAPINeedsToken(t *testing.T) {
	e := newEnv(t, envConfig{server: func(o *server.Options) {
		o.Replicas = &replicaAdmin{}
		o.AuthToken = "s3cret"
	}})
	e.fail(http.StatusUnauthorized, "unauthorized", "POST", "/v1/cluster/partitions/0/replicas", `{"add":4}`)
	e.fail(http.StatusUnauthorized, "unauthorized", "GET", "/v1/cluster/partitions", "")
	e.must(http.StatusOK, "GET", "/v1/cluster/partitions", "", "Authorization", "Bearer s3cret")
}
