package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
)

// offsetsTopic is the topic whose partitions a Kafka transaction
// coordinator names in the markers it sends a group coordinator.
const offsetsTopic = "__consumer_offsets"

// txnOffsetCommit stores a transaction's offsets as pending in the
// coordinator (coordinator.TxnCommit): they become the group's committed
// offsets when a commit marker for the producer arrives (WriteTxnMarkers,
// Handler.WriteTxnMarker), and are dropped by an abort. Like OffsetCommit,
// a request is refused whole.
func (h *Handler) txnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	c := h.txnCommit(ctx, req)
	return refuse(req, c)
}

// txnCommit fences and writes a TxnOffsetCommit, returning its code.
func (h *Handler) txnCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) int16 {
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group = req.Group
	for _, t := range req.Topics {
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = t.Topic
		for _, p := range t.Partitions {
			op := kmsg.NewOffsetCommitRequestTopicPartition()
			op.Partition, op.Offset, op.LeaderEpoch, op.Metadata = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
			ot.Partitions = append(ot.Partitions, op)
		}
		oc.Topics = append(oc.Topics, ot)
	}
	offsets, c := h.commitOffsets(oc)
	if c != 0 || len(offsets) == 0 {
		return c
	}
	if !h.coordinates(req.Group) {
		return kerr.NotCoordinator.Code
	}
	if req.ProducerID < 0 || req.ProducerEpoch < 0 {
		return kerr.InvalidProducerIDMapping.Code
	}
	// Before v3 a request names no member and no generation.
	memberID, instanceID, generation := req.MemberID, req.InstanceID, req.Generation
	if req.Version < 3 {
		memberID, instanceID, generation = "", nil, -1
	}
	// One that names no member, no instance and no generation (every one
	// before v3, and a producer given no group metadata) is taken whatever
	// the group's state.
	if memberID != "" || instanceID != nil || generation >= 0 {
		found := h.inGroup(req.Group, false, func(g *group) {
			if g.cg != nil {
				c = g.fenceConsumerCommit(req.Version, memberID, generation, offsets, true)
				if c == kerr.StaleMemberEpoch.Code {
					c = kerr.IllegalGeneration.Code // before v6 (KIP-1319), which offsetd does not serve
				}
				return
			}
			c = g.fenceTxnCommit(memberID, instanceID, generation)
		})
		if c != 0 {
			return c
		}
		if !found && generation >= 0 {
			return kerr.IllegalGeneration.Code // no group: only a commit outside any generation
		}
	}
	// The generation was checked against the membership; a pending offset
	// is not progress until its marker, which Kafka does not fence by
	// generation either.
	err := h.c.TxnCommit(ctx, req.Group, req.ProducerID, req.ProducerEpoch, coordinator.NoGeneration, offsets)
	if errors.Is(err, coordinator.ErrProducerFenced) {
		return fencedCode(req.Version)
	}
	return code(err)
}

// fencedCode is the code of a request whose producer epoch is older than
// the group's: PRODUCER_FENCED where the client knows it (from v3),
// INVALID_PRODUCER_EPOCH, which older clients take for fencing, before.
func fencedCode(version int16) int16 {
	if version >= 3 {
		return kerr.ProducerFenced.Code
	}
	return kerr.InvalidProducerEpoch.Code
}

// fenceTxnCommit checks a TxnOffsetCommit that names a member, an
// instance or a generation against a classic group's membership, as Kafka
// does: one of generation -1 is taken while the group has no members; any
// other must come from a member at the group's generation. A rebalance in
// progress does not refuse it (KIP-447): the offsets are pending until the
// transaction commits.
func (g *group) fenceTxnCommit(memberID string, instanceID *string, generation int32) int16 {
	if generation < 0 && len(g.members) == 0 {
		return 0
	}
	_, c := g.fenceMember(memberID, instanceID, generation)
	return c
}

// writeTxnMarkers ends transactions as a Kafka transaction coordinator
// asks: each marker ends its producer's transaction in every group this
// node coordinates that holds offsets of it. A marker names partitions of
// __consumer_offsets, which offsetd does not have (its groups are placed
// by its own hash): each named partition is answered with the outcome for
// all of the producer's groups. Partitions of other topics are answered
// UNKNOWN_TOPIC_OR_PARTITION.
func (h *Handler) writeTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		var c int16
		ended := false
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			tc := kerr.UnknownTopicOrPartition.Code
			if t.Topic == offsetsTopic {
				if !ended {
					c, ended = h.endTxn(ctx, m.ProducerID, m.ProducerEpoch, m.Committed), true
				}
				tc = c
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, tc
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// endTxn ends the producer's transaction in every group of this node
// with offsets of it pending, and returns the code of the first failure.
func (h *Handler) endTxn(ctx context.Context, producerID int64, producerEpoch int16, commit bool) int16 {
	if producerID < 0 || producerEpoch < 0 {
		return kerr.InvalidProducerIDMapping.Code
	}
	groups, err := h.c.TxnGroups(producerID)
	if err != nil {
		return code(err)
	}
	var c int16
	for _, g := range groups {
		if !h.coordinates(g) {
			continue // its own coordinator's marker ends it there
		}
		err := h.c.EndTxn(ctx, g, producerID, producerEpoch, commit)
		gc := code(err)
		if errors.Is(err, coordinator.ErrProducerFenced) {
			gc = kerr.InvalidProducerEpoch.Code
		}
		if c == 0 {
			c = gc
		}
	}
	return c
}

// WriteTxnMarker ends a producer's transaction in the groups of this node,
// for a broker that embeds the Handler and coordinates transactions
// itself (it calls this where Kafka's transaction coordinator sends its
// markers to __consumer_offsets): with commit, the offsets the
// producer's TxnOffsetCommit requests left pending become the groups'
// committed offsets; without, they are dropped. A producer with nothing
// pending is no error, so a marker may be retried. It fails with a
// *kerr.Error: INVALID_PRODUCER_EPOCH when a group has seen a newer epoch
// of the producer than producerEpoch (that group is left as it was; the
// others are ended), or the code of a failed write, which leaves that
// group pending and may be retried. In a cluster it ends the groups this
// node coordinates: call it on every node.
func (h *Handler) WriteTxnMarker(ctx context.Context, producerID int64, producerEpoch int16, commit bool) error {
	if h.closed.Load() {
		return kerr.CoordinatorNotAvailable
	}
	return kerr.ErrorForCode(h.endTxn(ctx, producerID, producerEpoch, commit))
}
