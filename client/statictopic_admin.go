package client

import (
	"context"
	"net/url"

	"github.com/offsetd/offsetd/statictopic"
)

// ImportStaticTopic stores the mapping that details, RocketMQ's
// TopicQueueMappingDetail of every broker of topic, describe, fenced like
// PutStaticTopic (force overrides the sealed-history check), and returns
// it.
func (c *Client) ImportStaticTopic(ctx context.Context, topic string, details []statictopic.Detail, force bool) (statictopic.Mapping, error) {
	if details == nil {
		details = []statictopic.Detail{}
	}
	body := struct {
		Details []statictopic.Detail `json:"details"`
		Force   bool                 `json:"force"`
	}{details, force}
	return c.mappingCall(ctx, call{method: "POST", path: segments("v1", "static-topics", topic, "import"), body: body})
}

// ExportStaticTopic returns the mapping of topic in scope as RocketMQ's
// brokers hold it: one TopicQueueMappingDetail per broker.
func (c *Client) ExportStaticTopic(ctx context.Context, topic, scope string) ([]statictopic.Detail, error) {
	rep, err := c.do(ctx, call{method: "GET", path: segments("v1", "static-topics", topic, "export"), query: url.Values{"scope": {scope}}})
	if err != nil {
		return nil, err
	}
	var out struct {
		Details []statictopic.Detail `json:"details"`
	}
	return out.Details, rep.decode(&out)
}

// brokerRemapBody is the body of a remap to a broker set.
type brokerRemapBody struct {
	Scope      string          `json:"scope"`
	Brokers    []string        `json:"brokers"`
	MaxOffsets map[int32]int64 `json:"maxOffsets,omitempty"`
	IfEpoch    int64           `json:"ifEpoch,omitempty"`
	DryRun     bool            `json:"dryRun,omitempty"`
}

// PlanRemapToBrokers returns, changing nothing, the fewest moves that
// leave every logic queue of topic on brokers, balanced among them.
func (c *Client) PlanRemapToBrokers(ctx context.Context, topic, scope string, brokers []string) (statictopic.RemapPlan, error) {
	if brokers == nil {
		brokers = []string{}
	}
	rep, err := c.do(ctx, call{method: "POST", path: segments("v1", "static-topics", topic, "remap"),
		body: brokerRemapBody{Scope: scope, Brokers: brokers, DryRun: true}})
	if err != nil {
		return statictopic.RemapPlan{}, err
	}
	var plan statictopic.RemapPlan
	return plan, rep.decode(&plan)
}

// RemapToBrokers plans the remap of topic to brokers on the stored mapping
// and applies it as one change, with maxOffsets giving the open leader's
// max offset of every queue that moves. ifEpoch, when not 0, applies it
// only if the mapping still has that epoch (a plan's Epoch), or fails with
// ErrConflict.
func (c *Client) RemapToBrokers(ctx context.Context, topic, scope string, brokers []string, maxOffsets map[int32]int64, ifEpoch int64) (statictopic.Mapping, error) {
	if brokers == nil {
		brokers = []string{}
	}
	return c.mappingCall(ctx, call{method: "POST", path: segments("v1", "static-topics", topic, "remap"),
		body: brokerRemapBody{Scope: scope, Brokers: brokers, MaxOffsets: maxOffsets, IfEpoch: ifEpoch}})
}

// TrimStaticTopic drops the sealed items of topic in scope whose logic
// range ends at or below below, in queues (nil: every queue), and returns
// the stored mapping. While a consumer group still reads one of them it
// fails with ErrSealedHistory, unless force is set.
func (c *Client) TrimStaticTopic(ctx context.Context, topic, scope string, queues []int32, below int64, force bool) (statictopic.Mapping, error) {
	body := struct {
		Scope  string  `json:"scope"`
		Below  int64   `json:"below"`
		Queues []int32 `json:"queues"`
		Force  bool    `json:"force"`
	}{scope, below, queues, force}
	return c.mappingCall(ctx, call{method: "POST", path: segments("v1", "static-topics", topic, "trim"), body: body})
}

// StaticTopicReaders returns every logic queue of topic in scope with its
// items and the consumer groups that read each.
func (c *Client) StaticTopicReaders(ctx context.Context, topic, scope string) ([]statictopic.QueueReaders, error) {
	rep, err := c.do(ctx, call{method: "GET", path: segments("v1", "static-topics", topic, "readers"), query: url.Values{"scope": {scope}}})
	if err != nil {
		return nil, err
	}
	var out struct {
		Queues []statictopic.QueueReaders `json:"queues"`
	}
	return out.Queues, rep.decode(&out)
}
