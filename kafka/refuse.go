package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// refuse answers req with code everywhere a response of its kind carries
// one: every partition of a commit, every group of a fetch, describe or
// delete, every key of a FindCoordinator.
func refuse(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.OffsetCommitResponse:
		for _, t := range req.(*kmsg.OffsetCommitRequest).Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.OffsetFetchResponse:
		q := req.(*kmsg.OffsetFetchRequest)
		r.ErrorCode = code
		for _, g := range q.Groups {
			r.Groups = append(r.Groups, kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: code})
		}
		if q.Version < 2 { // no top-level code yet: the partitions carry it
			for _, t := range q.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				r.Topics = append(r.Topics, rt)
			}
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range req.(*kmsg.TxnOffsetCommitRequest).Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.WriteTxnMarkersResponse:
		for _, m := range req.(*kmsg.WriteTxnMarkersRequest).Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.WriteTxnMarkersResponseMarkerTopicPartition{Partition: p, ErrorCode: code})
				}
				rm.Topics = append(rm.Topics, rt)
			}
			r.Markers = append(r.Markers, rm)
		}
	case *kmsg.OffsetDeleteResponse:
		r.ErrorCode = code
	case *kmsg.FindCoordinatorResponse:
		r.ErrorCode, r.NodeID, r.Port = code, -1, -1
		for _, key := range req.(*kmsg.FindCoordinatorRequest).CoordinatorKeys {
			r.Coordinators = append(r.Coordinators, kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: -1, Port: -1, ErrorCode: code})
		}
	case *kmsg.ListGroupsResponse:
		r.ErrorCode = code
	case *kmsg.DescribeGroupsResponse:
		for _, g := range req.(*kmsg.DescribeGroupsRequest).Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			r.Groups = append(r.Groups, rg)
		}
	case *kmsg.DeleteGroupsResponse:
		for _, g := range req.(*kmsg.DeleteGroupsRequest).Groups {
			r.Groups = append(r.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: code})
		}
	case *kmsg.JoinGroupResponse:
		r.ErrorCode = code
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.ConsumerGroupDescribeResponse:
		for _, g := range req.(*kmsg.ConsumerGroupDescribeRequest).Groups {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			r.Groups = append(r.Groups, rg)
		}
	}
	return resp
}
