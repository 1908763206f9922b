package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// leaderHeader is the header of a 421 answer naming the host:port of the
// node that leads the partition (server.LeaderHeader).
const leaderHeader = "X-Offsetd-Leader"

// maxRedirects bounds the 421 answers one call follows: leadership that
// moves faster than that is better met with an error.
const maxRedirects = 5

// leaderTarget returns the URL a 421 answer sends the request to: target
// with the leader's host:port.
func leaderTarget(r reply, target string) (string, bool) {
	leader := r.leader
	if r.status != http.StatusMisdirectedRequest || leader == "" {
		return "", false
	}
	return withHost(target, leader), true
}

// withHost returns target with host:port host.
func withHost(target, host string) string {
	u, err := url.Parse(target)
	if err != nil {
		return target
	}
	u.Host = host
	return u.String()
}

// CoordinatorInfo says where a group (or a static topic) lives in a
// cluster: its internal partition and the node that leads it.
type CoordinatorInfo struct {
	Group     string `json:"group,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Partition int    `json:"partition"`
	// Leader is the leader's node id; 0 on a single node.
	Leader uint64 `json:"leader"`
	// Address is the host:port where the leader serves clients.
	Address string `json:"address"`
	// Self is true when the node asked is the leader.
	Self bool `json:"self"`
}

// Coordinator asks any node where group lives (GET /v1/coordinator). A
// node that knows no leader answers 503 (ErrUnavailable), retried as
// Options.Retries says.
func (c *Client) Coordinator(ctx context.Context, group string) (CoordinatorInfo, error) {
	rep, err := c.do(ctx, call{method: http.MethodGet, path: segments("v1", "coordinator"), query: url.Values{"group": {group}}})
	if err != nil {
		return CoordinatorInfo{}, err
	}
	var info CoordinatorInfo
	if err := json.Unmarshal(rep.body, &info); err != nil {
		return CoordinatorInfo{}, fmt.Errorf("client: decoding the coordinator of %q: %w", group, err)
	}
	return info, nil
}
