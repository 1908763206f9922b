package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// ErrChangePending matches a 409 with code change_pending: a change of a
// partition's replicas asked while another is under way.
var ErrChangePending = errors.New("client: a change of the partition's replicas is under way")

// ErrNodeRemoved matches a 410 with code node_removed: the node asked was
// removed from its cluster and serves nothing; ask another.
var ErrNodeRemoved = errors.New("client: the node was removed from its cluster")

// Replicas is a partition's configuration in a cluster: its voters, the
// nodes being added (learners) and, during a joint change, the voters of
// the configuration it leaves.
type Replicas struct {
	Partition int      `json:"partition"`
	Voters    []uint64 `json:"voters"`
	Learners  []uint64 `json:"learners,omitempty"`
	Outgoing  []uint64 `json:"outgoing,omitempty"`
	Leader    uint64   `json:"leader"`
}

// ReplicaChange adds a node to a partition, removes one, or both (a move
// of the replica from Remove to Add).
type ReplicaChange struct {
	Add uint64 `json:"add,omitempty"`
	// AddAddress is the host:port of Add's Raft listener, for the nodes
	// that do not know it yet.
	AddAddress string `json:"addAddress,omitempty"`
	Remove     uint64 `json:"remove,omitempty"`
}

// Replicas returns every partition's configuration as the node asked
// knows it (GET /v1/cluster/partitions).
func (c *Client) Replicas(ctx context.Context) ([]Replicas, error) {
	rep, err := c.do(ctx, call{method: http.MethodGet, path: segments("v1", "cluster", "partitions")})
	if err != nil {
		return nil, err
	}
	var out []Replicas
	return out, rep.decode(&out)
}

// ChangeReplicas makes one change of partition's replicas on its leader
// (POST /v1/cluster/partitions/{partition}/replicas, following 421
// answers) and returns the configuration once it is made. A change the
// partition already has returns at once; one interrupted (a timeout, a
// new leader) resumes when asked again.
func (c *Client) ChangeReplicas(ctx context.Context, partition int, ch ReplicaChange) (Replicas, error) {
	rep, err := c.do(ctx, call{method: http.MethodPost, path: segments("v1", "cluster", "partitions", strconv.Itoa(partition), "replicas"), body: ch})
	if err != nil {
		return Replicas{}, err
	}
	var out Replicas
	return out, rep.decode(&out)
}

// AddNode adds node id, whose Raft listener is at raftAddr, to every
// partition, one partition after the other: it joins each as a learner,
// catches up, then votes. Start the node first, with offsetd serve -join.
// It returns each partition's configuration as its leader answered.
func (c *Client) AddNode(ctx context.Context, id uint64, raftAddr string) ([]Replicas, error) {
	return c.eachPartition(ctx, ReplicaChange{Add: id, AddAddress: raftAddr})
}

// RemoveNode removes node id from every partition, one after the other;
// a partition it leads hands its lead to another node first. Stop the
// node afterwards. It returns each partition's configuration as its
// leader answered.
func (c *Client) RemoveNode(ctx context.Context, id uint64) ([]Replicas, error) {
	return c.eachPartition(ctx, ReplicaChange{Remove: id})
}

func (c *Client) eachPartition(ctx context.Context, ch ReplicaChange) ([]Replicas, error) {
	all, err := c.Replicas(ctx)
	if err != nil {
		return nil, err
	}
	for i, r := range all {
		if all[i], err = c.ChangeReplicas(ctx, r.Partition, ch); err != nil {
			return nil, fmt.Errorf("partition %d: %w", r.Partition, err)
		}
	}
	return all, nil
}

// ClusterStatus is one node's view of its cluster (GET
// /v1/cluster/status).
type ClusterStatus struct {
	Node uint64 `json:"node"`
	// Membership is member (a voter of some partition), learner (being
	// added), joining (not added yet) or removed.
	Membership string       `json:"membership"`
	Peers      []PeerStatus `json:"peers"`
	// Partitions holds every partition as the node sees it.
	Partitions []PartitionStatus `json:"partitions"`
}

// PeerStatus is another node as the node asked reaches it.
type PeerStatus struct {
	ID uint64 `json:"id"`
	// Address is where the peer serves clients, if the node asked knows.
	Address string `json:"address,omitempty"`
	// Reachable is true while the node's Raft messages reach the peer.
	Reachable       bool   `json:"reachable"`
	MessagesSent    uint64 `json:"messagesSent"`
	MessagesDropped uint64 `json:"messagesDropped"`
}

// PartitionStatus is a partition as a node sees it: its configuration,
// and the Raft term, commit index and applied index as the node knows
// them.
type PartitionStatus struct {
	Replicas
	Term    uint64 `json:"term"`
	Commit  uint64 `json:"commit"`
	Applied uint64 `json:"applied"`
	// Followers, on the partition's leader, says how each other replica
	// fares: heard from within an election timeout (Active), and the last
	// index it holds (Match).
	Followers []FollowerStatus `json:"followers,omitempty"`
}

// FollowerStatus is a replica as its partition's leader sees it.
type FollowerStatus struct {
	ID     uint64 `json:"id"`
	Active bool   `json:"active"`
	Match  uint64 `json:"match"`
}

// ClusterStatus returns the node's view of its cluster.
func (c *Client) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	rep, err := c.do(ctx, call{method: http.MethodGet, path: segments("v1", "cluster", "status")})
	if err != nil {
		return ClusterStatus{}, err
	}
	var out ClusterStatus
	return out, rep.decode(&out)
}

// At returns a client of another server, at addr (host:port), with this
// client's scheme, token, HTTP client and retries: the way to ask each
// node of a cluster for its own status.
func (c *Client) At(addr string) (*Client, error) {
	return New(c.base.Scheme+"://"+addr, Options{HTTPClient: c.http, Token: c.token, Retries: c.retries, MaxRetryWait: c.maxWait})
}
