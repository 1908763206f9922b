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
// it outside the group's lock. A rebalance may complete while the commit
// is written: the new generation is stored only once the commit is
// written (storeGeneration), and so lands after it in the log, and a group
// that has commits in flight stores its next generation even before it has
// offsets (nextGeneration). A commit of a topic whose offsets are being
// deleted waits for the deletion.
func (h *Handler) commitInGroup(ctx context.Context, req *kmsg.OffsetCommitRequest, offsets []coordinator.OffsetCommit) int16 {
	if len(offsets) == 0 {
		return 0
	}
	generation := req.Generation
	if req.Version == 0 || generation < 0 {
		generation = coordinator.NoGeneration
	}
	topics := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		topics[i] = t.Topic
	}
	var g *group
	var m *member
	stored := generation // the generation the coordinator fences with
	for {
		var c int16
		var deleted <-chan struct{}
		// A simple commit is counted in the group even when the handler
		// holds nothing of it: a member may join while it is written, and
		// the rebalance must see it (nextGeneration, storeGeneration), as
		// a deletion must (deletions.go).
		found := h.inGroup(req.Group, generation == coordinator.NoGeneration, func(in *group) {
			if in.cg != nil {
				// Member epochs are not generations: they are fenced
				// here, and the coordinator takes a simple commit.
				stored = coordinator.NoGeneration
				c = in.fenceConsumerCommit(req.Version, req.MemberID, generation, offsets, false)
			} else {
				m, c = in.fenceCommit(req.MemberID, req.InstanceID, generation)
			}
			if c != 0 {
				return
			}
			if deleted = in.deletionOf(topics...); deleted == nil {
				g = in
				g.startCommit(topics)
			}
		})
		if !found && generation != coordinator.NoGeneration {
			// No members: only a simple commit, outside any generation.
			return kerr.IllegalGeneration.Code
		}
		if c != 0 {
			return c
		}
		if deleted == nil {
			break
		}
		if c = h.settled(ctx, deleted); c != 0 {
			return c
		}
	}
	if h.commitFenced != nil {
		h.commitFenced()
	}
	_, err := h.c.CommitGeneration(ctx, req.Group, stored, offsets)
	g.mu.Lock()
	g.endCommit(topics)
	if m != nil && err == nil && g.members[m.id] == m {
		g.heartbeat(m)
	}
	blank := g.blank()
	if !blank && g.commits == 0 && err != nil && g.empty() && len(g.members) == 0 {
		g.forgetIfUnused() // a refused commit may leave nothing to keep
	}
	g.mu.Unlock()
	if blank {
		h.forgetBlank(g)
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
			var c int16
			if req.Version >= 9 {
				h.inGroup(rg.Group, false, func(g *group) {
					if g.cg != nil {
						c = g.fenceConsumerFetch(rg.MemberID, rg.MemberEpoch)
					}
				})
			}
			var ts []kmsg.OffsetFetchResponseTopic
			if c == 0 {
				ts, c = h.fetchGroup(ctx, rg.Group, topics, req.RequireStable)
			}
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
	ts, c := h.fetchGroup(ctx, req.Group, topics, req.RequireStable)
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
// applied every commit acknowledged before it. With stable (RequireStable,
// v7+), a partition with offsets pending in a transaction answers
// UNSTABLE_OFFSET_COMMIT and no offset, which the client retries until
// the transaction ends.
func (h *Handler) fetchGroup(ctx context.Context, group string, topics []kmsg.OffsetFetchRequestTopic, stable bool) ([]kmsg.OffsetFetchResponseTopic, int16) {
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
	type key struct {
		topic     string
		partition int32
	}
	var unstable map[key]bool
	if stable {
		pending, err := h.c.PendingOffsets(group)
		if err != nil {
			return nil, code(err)
		}
		unstable = make(map[key]bool, len(pending))
		for _, p := range pending {
			unstable[key{p.Topic, p.Partition}] = true
		}
	}
	fetched := func(topic string, partition int32, o *coordinator.Offset) kmsg.OffsetFetchResponseTopicPartition {
		if unstable[key{topic, partition}] {
			rp := fetchedPartition(partition, nil)
			rp.ErrorCode = kerr.UnstableOffsetCommit.Code
			return rp
		}
		return fetchedPartition(partition, o)
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
			rt.Partitions = append(rt.Partitions, fetched(o.Topic, o.Partition, &o.Offset))
		}
		return out, 0
	}
	byKey := make(map[key]*coordinator.Offset, len(offsets))
	for i := range offsets {
		byKey[key{offsets[i].Topic, offsets[i].Partition}] = &offsets[i].Offset
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, fetched(t.Topic, p, byKey[key{t.Topic, p}]))
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
	if c := h.deleteOffsets(ctx, req, exists, resp); c != 0 {
		resp.ErrorCode = c
	}
	return resp
}

// deleteOffsets deletes the offsets of an OffsetDelete on the topics the
// group's members do not subscribe to, filling resp's topics, or returns
// the code that refuses the request whole. The check of subscriptions and
// the deletions are one step: the group keeps the deletions in flight until
// they are written, and commits of those topics wait for them
// (deletions.go).
func (h *Handler) deleteOffsets(ctx context.Context, req *kmsg.OffsetDeleteRequest, exists bool, resp *kmsg.OffsetDeleteResponse) int16 {
	var g *group
	codes := make([]int16, len(req.Topics))
	for {
		var c int16
		var wait <-chan struct{}
		h.inGroup(req.Group, true, func(in *group) {
			subscribed := func(string) bool { return false }
			if in.cg != nil && len(in.cg.members) > 0 {
				subscribed = in.cg.subscribed
			} else if in.state != stateEmpty {
				if in.protocolType != "consumer" {
					c = kerr.NonEmptyGroup.Code
					return
				}
				subscribed = in.subscribed()
			}
			if in.joins > 0 || in.cg != nil {
				exists = true // membership state only, as Kafka's group is
			}
			if !exists {
				c = kerr.GroupIDNotFound.Code
				in.forgetIfUnused()
				return
			}
			for _, t := range req.Topics {
				if wait = in.deletionOf(t.Topic); wait != nil {
					return
				}
			}
			g = in
			for i, t := range req.Topics {
				switch {
				case subscribed(t.Topic):
					codes[i] = kerr.GroupSubscribedToTopic.Code
				case !validName(t.Topic):
					codes[i] = kerr.InvalidTopicException.Code
				case len(t.Partitions) > 0 && in.deleting[t.Topic] == nil:
					in.startDeletion(t.Topic)
				}
			}
		})
		if c != 0 {
			return c
		}
		if wait == nil {
			break
		}
		if c = h.settled(ctx, wait); c != 0 {
			return c
		}
	}
	for i, t := range req.Topics {
		g.mu.Lock()
		ours := codes[i] == 0 && g.deleting[t.Topic] != nil
		g.mu.Unlock()
		if ours && len(t.Partitions) > 0 {
			parts := make([]int32, len(t.Partitions))
			for j, p := range t.Partitions {
				parts[j] = p.Partition
			}
			err := g.awaitCommits(ctx, "deletion", func() bool { return g.committing[t.Topic] > 0 })
			if err == nil {
				err = h.c.DeleteOffsets(ctx, req.Group, t.Topic, parts...)
			}
			if !errors.Is(err, coordinator.ErrNotFound) { // no offset there: nothing to delete, as in Kafka
				codes[i] = code(err)
			}
			g.mu.Lock()
			g.endDeletion(t.Topic)
			g.mu.Unlock()
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = codes[i]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return 0
}

// validName reports whether a group or topic name is one the coordinator
// takes.
func validName(name string) bool {
	return name != "" && len(name) <= coordinator.MaxNameBytes && utf8.ValidString(name)
}
