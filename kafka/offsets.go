package kafka

import (
	"context"
	"errors"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
)

// offsetCommit stores a commit as one coordinator entry. offsetd's commits
// are atomic where Kafka's are per partition: a refused request is refused
// whole, and every partition carries the refusal's code.
func (h *Handler) offsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	offsets, c := h.commitOffsets(req)
	if c == 0 {
		c = h.commitInGroup(ctx, req, offsets)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = c
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// commitOffsets converts and checks a commit's offsets, returning the
// code Kafka uses for the first bad one.
func (h *Handler) commitOffsets(req *kmsg.OffsetCommitRequest) ([]coordinator.OffsetCommit, int16) {
	if !validName(req.Group) {
		return nil, kerr.InvalidGroupID.Code
	}
	var n int
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n == 0 {
		return nil, 0
	}
	if n > coordinator.MaxOffsetsPerCommit {
		return nil, kerr.InvalidCommitOffsetSize.Code
	}
	maxMeta := h.c.MaxMetadataBytes()
	offsets := make([]coordinator.OffsetCommit, 0, n)
	for _, t := range req.Topics {
		if !validName(t.Topic) {
			return nil, kerr.InvalidTopicException.Code
		}
		for _, p := range t.Partitions {
			var meta string
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			switch {
			case p.Partition < 0:
				return nil, kerr.UnknownTopicOrPartition.Code
			case len(meta) > maxMeta:
				return nil, kerr.OffsetMetadataTooLarge.Code
			case p.Offset < -1, p.LeaderEpoch < -1, !utf8.ValidString(meta):
				return nil, kerr.InvalidRequest.Code
			}
			offsets = append(offsets, coordinator.OffsetCommit{
				Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: meta,
			})
		}
	}
	return offsets, 0
}

// commitInGroup fences the commit by the group's membership, then writes
// it. The group stays locked across the write, so no rebalance can slip in
// between the check and the commit.
func (h *Handler) commitInGroup(ctx context.Context, req *kmsg.OffsetCommitRequest, offsets []coordinator.OffsetCommit) int16 {
	if len(offsets) == 0 {
		return 0
	}
	generation := req.Generation
	if req.Version == 0 || generation < 0 {
		generation = coordinator.NoGeneration
	}
	g := h.lookup(req.Group)
	if g == nil {
		// No members: only a simple commit, outside any generation.
		if generation != coordinator.NoGeneration {
			return kerr.IllegalGeneration.Code
		}
		_, err := h.c.CommitGeneration(ctx, req.Group, generation, offsets)
		return code(err)
	}
	defer g.mu.Unlock()
	m, c := g.fenceCommit(req.MemberID, req.InstanceID, generation)
	if c != 0 {
		return c
	}
	_, err := h.c.CommitGeneration(ctx, req.Group, generation, offsets)
	if m != nil && err == nil {
		g.heartbeat(m)
	}
	return code(err)
}

// offsetFetch answers a fetch of one group (v0-v7) or several (v8+).
func (h *Handler) offsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group = rg.Group
			topics := make([]kmsg.OffsetFetchRequestTopic, 0, len(rg.Topics))
			for _, t := range rg.Topics {
				topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
			if rg.Topics == nil {
				topics = nil
			}
			ts, c := h.fetchGroup(ctx, rg.Group, topics)
			sg.ErrorCode = c
			for _, t := range ts {
				st := kmsg.NewOffsetFetchResponseGroupTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					st.Partitions = append(st.Partitions, sp)
				}
				sg.Topics = append(sg.Topics, st)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}
	topics := req.Topics
	if req.Version < 2 && topics == nil {
		topics = []kmsg.OffsetFetchRequestTopic{} // before v2 there is no "all topics"
	}
	ts, c := h.fetchGroup(ctx, req.Group, topics)
	if c != 0 {
		return refuse(req, c) // before v2, every partition carries the code
	}
	resp.ErrorCode = c
	resp.Topics = ts
	return resp
}

// fetchGroup returns a group's offsets on topics, or on every topic when
// topics is nil. Partitions without an offset answer -1, as Kafka does. In
// a cluster the read is linearizable: it waits for the coordinator to have
// applied every commit acknowledged before it.
func (h *Handler) fetchGroup(ctx context.Context, group string, topics []kmsg.OffsetFetchRequestTopic) ([]kmsg.OffsetFetchResponseTopic, int16) {
	if !validName(group) {
		return nil, kerr.InvalidGroupID.Code
	}
	if !h.coordinates(group) {
		return nil, kerr.NotCoordinator.Code
	}
	if err := h.c.Barrier(ctx, group); err != nil {
		return nil, code(err)
	}
	offsets, err := h.c.FetchGroup(group)
	if err != nil {
		return nil, code(err)
	}
	var out []kmsg.OffsetFetchResponseTopic
	if topics == nil {
		for i, o := range offsets {
			if i == 0 || offsets[i-1].Topic != o.Topic {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = o.Topic
				out = append(out, rt)
			}
			rt := &out[len(out)-1]
			rt.Partitions = append(rt.Partitions, fetchedPartition(o.Partition, &o.Offset))
		}
		return out, 0
	}
	type key struct {
		topic     string
		partition int32
	}
	byKey := make(map[key]*coordinator.Offset, len(offsets))
	for i := range offsets {
		byKey[key{offsets[i].Topic, offsets[i].Partition}] = &offsets[i].Offset
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, fetchedPartition(p, byKey[key{t.Topic, p}]))
		}
		out = append(out, rt)
	}
	return out, 0
}

func fetchedPartition(partition int32, o *coordinator.Offset) kmsg.OffsetFetchResponseTopicPartition {
	rp := kmsg.NewOffsetFetchResponseTopicPartition()
	rp.Partition = partition
	if o == nil {
		rp.Offset, rp.LeaderEpoch = -1, -1
		rp.Metadata = kmsg.StringPtr("")
		return rp
	}
	rp.Offset, rp.LeaderEpoch = o.Offset, o.LeaderEpoch
	rp.Metadata = kmsg.StringPtr(o.Metadata)
	return rp
}

// offsetDelete removes a group's offsets on the topics asked, unless the
// group's members are subscribed to them. Each topic is one coordinator
// entry.
func (h *Handler) offsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if !validName(req.Group) {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	_, exists, err := h.c.Group(req.Group)
	if err != nil {
		resp.ErrorCode = code(err)
		return resp
	}
	subscribed := func(string) bool { return false }
	if g := h.lookup(req.Group); g != nil {
		if g.state != stateEmpty {
			if g.protocolType != "consumer" {
				resp.ErrorCode = kerr.NonEmptyGroup.Code
				g.mu.Unlock()
				return resp
			}
			subscribed = g.subscribed()
		}
		exists = true
		g.mu.Unlock()
	}
	if !exists {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		c := int16(0)
		switch {
		case subscribed(t.Topic):
			c = kerr.GroupSubscribedToTopic.Code
		case !validName(t.Topic):
			c = kerr.InvalidTopicException.Code
		case len(t.Partitions) > 0:
			parts := make([]int32, len(t.Partitions))
			for i, p := range t.Partitions {
				parts[i] = p.Partition
			}
			err := h.c.DeleteOffsets(ctx, req.Group, t.Topic, parts...)
			if !errors.Is(err, coordinator.ErrNotFound) { // no offset there: nothing to delete, as in Kafka
				c = code(err)
			}
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = c
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// validName reports whether a group or topic name is one the coordinator
// takes.
func validName(name string) bool {
	return name != "" && len(name) <= coordinator.MaxNameBytes && utf8.ValidString(name)
}
