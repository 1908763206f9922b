package kafka

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// observe tells o, if set, about one request answered.
func observe(o Observer, key int16, resp kmsg.Response, took time.Duration) {
	if o == nil {
		return
	}
	name := "NONE"
	if c := errorCode(resp); c != 0 {
		name = fmt.Sprintf("UNKNOWN_%d", c)
		if e, ok := kerr.ErrorForCode(c).(*kerr.Error); ok {
			name = e.Message
		}
	}
	o.ObserveKafkaRequest(kmsg.NameForKey(key), name, took)
}

// errorCode returns the error code a response carries: its top-level code,
// or else the first non-zero code of a group, topic or partition in it.
func errorCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case *kmsg.OffsetFetchResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case *kmsg.OffsetDeleteResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	case *kmsg.WriteTxnMarkersResponse:
		for _, m := range r.Markers {
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						return p.ErrorCode
					}
				}
			}
		}
	case *kmsg.FindCoordinatorResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, c := range r.Coordinators {
			if c.ErrorCode != 0 {
				return c.ErrorCode
			}
		}
	case *kmsg.ListGroupsResponse:
		return r.ErrorCode
	case *kmsg.DescribeGroupsResponse:
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
	case *kmsg.DeleteGroupsResponse:
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, m := range r.Members {
			if m.ErrorCode != 0 {
				return m.ErrorCode
			}
		}
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.ConsumerGroupDescribeResponse:
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return g.ErrorCode
			}
		}
	case *kmsg.ApiVersionsResponse:
		return r.ErrorCode
	case *kmsg.SASLHandshakeResponse:
		return r.ErrorCode
	case *kmsg.SASLAuthenticateResponse:
		return r.ErrorCode
	case *kmsg.MetadataResponse:
		return r.ErrorCode
	}
	return 0
}
