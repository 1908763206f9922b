package client

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/valyala/bytebufferpool"

	"github.com/offsetd/offsetd/internal/wire"
)

// OffsetCommit is one offset of a commit.
type OffsetCommit struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the next offset the group will consume; -1 means none.
	Offset int64 `json:"offset"`
	// LeaderEpoch is the partition leader epoch the offset was read at;
	// use -1 for none.
	LeaderEpoch int32  `json:"leaderEpoch"`
	Metadata    string `json:"metadata,omitempty"`
}

// Offset is a group's committed position on one topic partition.
type Offset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	// CommitTime is when the server wrote the commit (millisecond
	// precision).
	CommitTime time.Time
}

// GroupOffsets is a group's offsets at one version.
type GroupOffsets struct {
	Group string
	// Version grows with every change of the group; 0 for a group without
	// offsets. PollGroupOffsets waits for it to move.
	Version uint64
	// Generation is the highest consumer-group generation a commit carried,
	// or -1.
	Generation int32
	Offsets    []Offset
}

// fromWire converts an offset as the server sends it.
func fromWire(o wire.Offset) Offset {
	return Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
		Metadata: o.Metadata, CommitTime: time.UnixMilli(o.CommitTime)}
}

type groupOffsetsJSON struct {
	Group      string        `json:"group"`
	Version    uint64        `json:"version"`
	Generation int32         `json:"generation"`
	Offsets    []wire.Offset `json:"offsets"`
}

// Commit stores the group's offsets in one atomic, durable write and
// returns the group's new version. generation is the consumer-group
// generation, or -1 for none; a generation below one the group has seen
// fails with ErrStaleGeneration.
func (c *Client) Commit(ctx context.Context, group string, generation int32, offsets []OffsetCommit) (uint64, error) {
	if !utf8.ValidString(group) {
		return 0, fmt.Errorf("%w: %q in the request is not valid UTF-8", ErrInvalid, group)
	}
	for _, o := range offsets {
		for _, s := range []string{o.Topic, o.Metadata} {
			if !utf8.ValidString(s) {
				return 0, fmt.Errorf("%w: %q in the request is not valid UTF-8", ErrInvalid, s)
			}
		}
	}
	leader := ""
	if b := c.batch; b != nil && !b.off.Load() {
		if b.claim() {
			defer b.release(c)
			return c.commitAlone(ctx, "", group, generation, offsets)
		}
		o, err := b.commit(ctx, c, group, generation, offsets)
		if !o.alone {
			return o.version, err
		}
		leader = o.leader
	}
	return c.commitAlone(ctx, leader, group, generation, offsets)
}

// commitAlone sends one commit in its own request,
// POST /v1/groups/{group}/offsets, to leader (host:port) if it is not
// empty.
func (c *Client) commitAlone(ctx context.Context, leader, group string, generation int32, offsets []OffsetCommit) (uint64, error) {
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	buf.B = wire.AppendCommitStart(buf.B, generation)
	for i, o := range offsets {
		buf.B = wire.AppendCommitOffset(buf.B, i == 0, o.Topic, o.Partition, o.Offset, o.LeaderEpoch, o.Metadata)
	}
	buf.B = wire.AppendCommitEnd(buf.B)
	rep, err := c.do(ctx, call{method: "POST", path: segments("v1", "groups", group, "offsets"), encoded: buf.B, host: leader, lent: true})
	if err != nil {
		return 0, err
	}
	defer rep.release()
	d := wire.NewDecoder(rep.body)
	var v uint64
	d.Open('{')
	for n := 0; d.Next('}', n); n++ {
		if string(d.Key()) != "version" {
			d.Fail()
		}
		v = d.Uint()
	}
	if d.End() {
		return v, nil
	}
	var out struct {
		Version uint64 `json:"version"`
	}
	return out.Version, rep.decode(&out)
}

// GroupOffsets returns every offset of group, or only those on topic when
// topic is not empty. A group without offsets has none, at version 0.
func (c *Client) GroupOffsets(ctx context.Context, group, topic string) (GroupOffsets, error) {
	g, _, err := c.PollGroupOffsets(ctx, group, topic, 0, -1)
	return g, err
}

// PollGroupOffsets waits up to wait (the server caps it) for group's
// version to differ from known, and returns the offsets then; changed is
// false, with an empty GroupOffsets, when the wait ended first. A
// negative wait asks without a condition.
func (c *Client) PollGroupOffsets(ctx context.Context, group, topic string, known uint64, wait time.Duration) (g GroupOffsets, changed bool, err error) {
	// No ?wait= for a wait of 0: the server answers at once either way.
	var q url.Values
	if topic != "" || wait > 0 {
		q = url.Values{}
	}
	if topic != "" {
		q.Set("topic", topic)
	}
	req := call{method: "GET", path: segments("v1", "groups", group, "offsets"), query: q}
	if wait >= 0 {
		req.ifNone = wire.ETag(known)
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	rep, err := c.do(ctx, req)
	if err != nil || rep.status == http.StatusNotModified {
		rep.release()
		return GroupOffsets{}, false, err
	}
	defer rep.release()
	if g, ok := decodeGroupOffsets(rep.body); ok {
		return g, true, nil
	}
	var out groupOffsetsJSON
	if err := rep.decode(&out); err != nil {
		return GroupOffsets{}, false, err
	}
	g = GroupOffsets{Group: out.Group, Version: out.Version, Generation: out.Generation, Offsets: make([]Offset, len(out.Offsets))}
	for i, o := range out.Offsets {
		g.Offsets[i] = fromWire(o)
	}
	return g, true, nil
}

// offsetsHint guesses how many offsets a group's answer holds, for the
// capacity of their slice: one per '{' but the outer one (a single-byte
// count, several times faster than counting "topic"), no more than the
// shortest encoded offset lets the body hold (braces in names do not
// inflate it).
func offsetsHint(body []byte) int {
	const shortest = len(`{"topic":"","partition":0,"offset":0,"leaderEpoch":0,"metadata":"","commitTime":0}`)
	return min(bytes.Count(body, []byte{'{'}), len(body)/shortest+1)
}

// decodeGroupOffsets reads a group's offsets on the fast path (see package
// wire); ok is false when encoding/json must read them.
func decodeGroupOffsets(body []byte) (g GroupOffsets, ok bool) {
	d := wire.NewDecoder(body)
	d.Open('{')
	for n := 0; d.Next('}', n); n++ {
		switch string(d.Key()) {
		case "group":
			g.Group = string(d.String())
		case "version":
			g.Version = d.Uint()
		case "generation":
			g.Generation = d.Int32()
		case "offsets":
			g.Offsets = make([]Offset, 0, offsetsHint(body))
			var prev wire.Offset
			d.Open('[')
			for i := 0; d.Next(']', i); i++ {
				prev = d.Offset(prev)
				g.Offsets = append(g.Offsets, fromWire(prev))
			}
		default:
			d.Fail()
		}
	}
	return g, d.End() && g.Offsets != nil
}

// Offset returns the group's offset on one topic partition, or an error
// matching ErrNotFound when there is none.
func (c *Client) Offset(ctx context.Context, group, topic string, partition int32) (Offset, error) {
	rep, err := c.do(ctx, call{method: "GET", path: segments("v1", "groups", group, "offsets", topic, strconv.Itoa(int(partition)))})
	if err != nil {
		return Offset{}, err
	}
	defer rep.release()
	d := wire.NewDecoder(rep.body)
	if o := d.Offset(wire.Offset{}); d.End() {
		return fromWire(o), nil
	}
	var out wire.Offset
	if err := rep.decode(&out); err != nil {
		return Offset{}, err
	}
	return fromWire(out), nil
}

// Groups returns the name of every group with offsets, sorted.
func (c *Client) Groups(ctx context.Context) ([]string, error) {
	rep, err := c.do(ctx, call{method: "GET", path: segments("v1", "groups")})
	if err != nil {
		return nil, err
	}
	var out struct {
		Groups []string `json:"groups"`
	}
	return out.Groups, rep.decode(&out)
}

// DeleteGroup removes every offset of group; ErrNotFound if it has none.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	_, err := c.do(ctx, call{method: "DELETE", path: segments("v1", "groups", group)})
	return err
}

// DeleteOffsets removes the group's offsets on topic: on the given
// partitions, or on all when none is given. ErrNotFound if none existed.
func (c *Client) DeleteOffsets(ctx context.Context, group, topic string, partitions ...int32) error {
	q := url.Values{}
	for _, p := range partitions {
		q.Add("partition", strconv.Itoa(int(p)))
	}
	_, err := c.do(ctx, call{method: "DELETE", path: segments("v1", "groups", group, "offsets", topic), query: q})
	return err
}

// Healthy reports whether the server process is up.
func (c *Client) Healthy(ctx context.Context) error {
	_, err := c.do(ctx, call{method: "GET", path: segments("healthz")})
	return err
}

// Ready reports whether every partition of the server has loaded; while
// they load it fails with an error matching ErrUnavailable (after the
// retries).
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, call{method: "GET", path: segments("readyz")})
	return err
}
