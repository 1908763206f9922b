package client

import "context"

// GroupMembers is the live membership of a consumer group, as offsetd's
// Kafka listener holds it.
type GroupMembers struct {
	Group string `json:"group"`
	// State is Kafka's name of the group state (Empty, PreparingRebalance,
	// CompletingRebalance, Stable); "" when the group has no members.
	State        string   `json:"state"`
	ProtocolType string   `json:"protocolType"`
	Protocol     string   `json:"protocol"`
	Generation   int32    `json:"generation"`
	Leader       string   `json:"leader"`
	Members      []Member `json:"members"`
}

// Member is one member of a group.
type Member struct {
	MemberID   string `json:"memberId"`
	InstanceID string `json:"instanceId,omitempty"`
	ClientID   string `json:"clientId"`
	ClientHost string `json:"clientHost"`
}

// Members returns group's live members, sorted by member id; none when no
// Kafka client has joined it.
func (c *Client) Members(ctx context.Context, group string) (GroupMembers, error) {
	rep, err := c.do(ctx, call{method: "GET", path: segments("v1", "groups", group, "members")})
	if err != nil {
		return GroupMembers{}, err
	}
	var out GroupMembers
	return out, rep.decode(&out)
}
