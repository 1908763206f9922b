package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/offsetd/offsetd/statictopic"
)

// Route is the logic queues a client of one scope and role sees, with the
// ETag that PollRoute waits to change.
type Route struct {
	statictopic.Route
	// ETag is the route's version, opaque: pass it to PollRoute.
	ETag string `json:"-"`
}

// ScopeInfo describes a scope: its logic broker name, its global-read
// switch, and how many static topics it holds.
type ScopeInfo struct {
	Scope      string `json:"scope"`
	BrokerName string `json:"brokerName"`
	GlobalRead bool   `json:"globalRead"`
	Topics     int    `json:"topics"`
}

// CreateStaticTopic creates topic in scope with totalQueues logic queues
// spread over brokers, or grows it to totalQueues, and returns the stored
// mapping.
func (c *Client) CreateStaticTopic(ctx context.Context, topic, scope string, totalQueues int32, brokers []string) (statictopic.Mapping, error) {
	body := struct {
		Topic       string   `json:"topic"`
		Scope       string   `json:"scope"`
		TotalQueues int32    `json:"totalQueues"`
		Brokers     []string `json:"brokers"`
	}{topic, scope, totalQueues, brokers}
	if body.Brokers == nil {
		body.Brokers = []string{}
	}
	return c.mappingCall(ctx, call{method: "POST", path: segments("v1", "static-topics"), body: body})
}

// RemapStaticTopic moves logic queues of topic in scope to other brokers
// and returns the stored mapping.
func (c *Client) RemapStaticTopic(ctx context.Context, topic, scope string, moves []statictopic.QueueMove) (statictopic.Mapping, error) {
	if moves == nil {
		moves = []statictopic.QueueMove{}
	}
	body := struct {
		Scope string                  `json:"scope"`
		Moves []statictopic.QueueMove `json:"moves"`
	}{scope, moves}
	return c.mappingCall(ctx, call{method: "POST", path: segments("v1", "static-topics", topic, "remap"), body: body})
}

func (c *Client) mappingCall(ctx context.Context, req call) (statictopic.Mapping, error) {
	rep, err := c.do(ctx, req)
	if err != nil {
		return statictopic.Mapping{}, err
	}
	var m statictopic.Mapping
	return m, rep.decode(&m)
}

// PutStaticTopic stores a whole mapping, fenced by its epoch: a lower epoch
// than the stored one, or an equal epoch with other content, fails with
// ErrConflict, and so does (ErrSealedHistory) a mapping that rewrites or
// drops sealed items.
func (c *Client) PutStaticTopic(ctx context.Context, m statictopic.Mapping) error {
	_, err := c.do(ctx, call{method: "PUT", path: segments("v1", "static-topics", m.Topic), body: m})
	return err
}

// ForcePutStaticTopic is PutStaticTopic that may rewrite or drop sealed
// items, sending consumers' committed logic offsets to other messages. The
// server logs and counts it.
func (c *Client) ForcePutStaticTopic(ctx context.Context, m statictopic.Mapping) error {
	body := struct {
		statictopic.Mapping
		Force bool `json:"force"`
	}{m, true}
	_, err := c.do(ctx, call{method: "PUT", path: segments("v1", "static-topics", m.Topic), body: body})
	return err
}

// StaticTopic returns the mapping of topic in scope; ErrNotFound if there
// is none.
func (c *Client) StaticTopic(ctx context.Context, topic, scope string) (statictopic.Mapping, error) {
	m, _, err := c.PollStaticTopic(ctx, topic, scope, 0, -1)
	return m, err
}

// PollStaticTopic waits up to wait (the server caps it) for the mapping's
// epoch to differ from known, and returns the mapping then; changed is
// false when the wait ended first. A negative wait asks without a
// condition.
func (c *Client) PollStaticTopic(ctx context.Context, topic, scope string, known int64, wait time.Duration) (m statictopic.Mapping, changed bool, err error) {
	q := url.Values{"scope": {scope}}
	req := call{method: "GET", path: segments("v1", "static-topics", topic), query: q}
	if wait >= 0 {
		req.ifNone = etag(strconv.FormatInt(known, 10))
		q.Set("wait", wait.String())
	}
	rep, err := c.do(ctx, req)
	if err != nil || rep.status == http.StatusNotModified {
		return statictopic.Mapping{}, false, err
	}
	return m, true, rep.decode(&m)
}

// StaticTopics returns every mapping, or those of scope when scope is not
// empty, sorted by topic and scope.
func (c *Client) StaticTopics(ctx context.Context, scope string) ([]statictopic.Mapping, error) {
	q := url.Values{}
	if scope != "" {
		q.Set("scope", scope)
	}
	rep, err := c.do(ctx, call{method: "GET", path: segments("v1", "static-topics"), query: q})
	if err != nil {
		return nil, err
	}
	var out struct {
		StaticTopics []statictopic.Mapping `json:"staticTopics"`
	}
	return out.StaticTopics, rep.decode(&out)
}

// Route returns the logic queues of topic that a client in scope sees in
// role.
func (c *Client) Route(ctx context.Context, topic, scope string, role statictopic.Role) (Route, error) {
	rt, _, err := c.PollRoute(ctx, topic, scope, role, "", -1)
	return rt, err
}

// PollRoute waits up to wait (the server caps it) for the route's ETag to
// differ from known (a Route's ETag), and returns the route then; changed
// is false when the wait ended first. A negative wait or an empty known
// asks without a condition.
func (c *Client) PollRoute(ctx context.Context, topic, scope string, role statictopic.Role, known string, wait time.Duration) (rt Route, changed bool, err error) {
	q := url.Values{"scope": {scope}, "role": {role.String()}}
	req := call{method: "GET", path: segments("v1", "static-topics", topic, "route"), query: q, etag: true}
	if wait >= 0 && known != "" {
		req.ifNone = known
		q.Set("wait", wait.String())
	}
	rep, err := c.do(ctx, req)
	if err != nil || rep.status == http.StatusNotModified {
		return Route{}, false, err
	}
	if err := rep.decode(&rt.Route); err != nil {
		return Route{}, false, err
	}
	rt.ETag = rep.etag
	return rt, true, nil
}

// Translate returns where logicOffset of logic queue queueID lives: the
// broker, physical queue and physical offset. An offset outside every
// item's range fails with ErrOutOfRange; in a gap between items, or before
// the first, NextLogicOffset of the error is where the next item begins.
func (c *Client) Translate(ctx context.Context, topic, scope string, queueID int32, logicOffset int64) (broker string, physicalQueueID int32, physicalOffset int64, err error) {
	q := url.Values{
		"scope":       {scope},
		"queueId":     {strconv.Itoa(int(queueID))},
		"logicOffset": {strconv.FormatInt(logicOffset, 10)},
	}
	rep, err := c.do(ctx, call{method: "GET", path: segments("v1", "static-topics", topic, "translate"), query: q})
	if err != nil {
		return "", 0, 0, err
	}
	var out struct {
		Broker          string `json:"broker"`
		PhysicalQueueID int32  `json:"physicalQueueId"`
		PhysicalOffset  int64  `json:"physicalOffset"`
	}
	err = rep.decode(&out)
	return out.Broker, out.PhysicalQueueID, out.PhysicalOffset, err
}

// TranslateToLogic is the reverse of Translate: the logic queue and logic
// offset of physicalOffset on broker's physical queue.
func (c *Client) TranslateToLogic(ctx context.Context, topic, scope, broker string, physicalQueueID int32, physicalOffset int64) (queueID int32, logicOffset int64, err error) {
	q := url.Values{
		"scope":           {scope},
		"broker":          {broker},
		"physicalQueueId": {strconv.Itoa(int(physicalQueueID))},
		"physicalOffset":  {strconv.FormatInt(physicalOffset, 10)},
	}
	rep, err := c.do(ctx, call{method: "GET", path: segments("v1", "static-topics", topic, "translate"), query: q})
	if err != nil {
		return 0, 0, err
	}
	var out struct {
		QueueID     int32 `json:"queueId"`
		LogicOffset int64 `json:"logicOffset"`
	}
	err = rep.decode(&out)
	return out.QueueID, out.LogicOffset, err
}

// SetGlobalRead turns scope's disaster switch on or off. A scope that
// holds no static topic, with its switch off, is ErrNotFound.
func (c *Client) SetGlobalRead(ctx context.Context, scope string, enabled bool) error {
	return c.setGlobalRead(ctx, scope, enabled, false)
}

// ForceSetGlobalRead is SetGlobalRead for a scope whose static topics are
// yet to come.
func (c *Client) ForceSetGlobalRead(ctx context.Context, scope string, enabled bool) error {
	return c.setGlobalRead(ctx, scope, enabled, true)
}

func (c *Client) setGlobalRead(ctx context.Context, scope string, enabled, force bool) error {
	body := struct {
		Enabled bool `json:"enabled"`
		Force   bool `json:"force,omitempty"`
	}{enabled, force}
	_, err := c.do(ctx, call{method: "PUT", path: segments("v1", "scopes", scope, "global-read"), body: body})
	return err
}

// Scopes describes every scope that holds a static topic or has its
// global-read switch on.
func (c *Client) Scopes(ctx context.Context) ([]ScopeInfo, error) {
	rep, err := c.do(ctx, call{method: "GET", path: segments("v1", "scopes")})
	if err != nil {
		return nil, err
	}
	var out struct {
		Scopes []ScopeInfo `json:"scopes"`
	}
	return out.Scopes, rep.decode(&out)
}
