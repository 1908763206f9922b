package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/coordinator"
)

// Response cache kinds.
const (
	kindGroupOffsets byte = 'g'
	kindMapping      byte = 'm'
	kindRoute        byte = 'r'
)

// commitRequest is the body of POST /v1/groups/{group}/offsets. Pointer
// fields tell an absent field from a zero: a missing offset must not
// become offset 0.
type commitRequest struct {
	// Generation is the consumer-group generation, or -1 (the default)
	// for none.
	Generation *int32         `json:"generation"`
	Offsets    []commitOffset `json:"offsets"`
}

type commitOffset struct {
	Topic       *string `json:"topic"`
	Partition   *int32  `json:"partition"`
	Offset      *int64  `json:"offset"`
	LeaderEpoch *int32  `json:"leaderEpoch"` // default -1
	Metadata    *string `json:"metadata"`    // default ""
}

// commitResponse answers a commit with the group's new version.
type commitResponse struct {
	Version uint64 `json:"version"`
}

// offsetJSON is one committed offset. CommitTime is in Unix milliseconds.
type offsetJSON struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	Metadata    string `json:"metadata"`
	CommitTime  int64  `json:"commitTime"`
}

// groupOffsetsJSON is a group's offsets at one version. Generation is the
// highest generation a commit carried, or -1.
type groupOffsetsJSON struct {
	Group      string       `json:"group"`
	Version    uint64       `json:"version"`
	Generation int32        `json:"generation"`
	Offsets    []offsetJSON `json:"offsets"`
}

type groupsJSON struct {
	Groups []string `json:"groups"`
}

func (req *commitRequest) offsets() (int32, []coordinator.OffsetCommit, *apiError) {
	gen := coordinator.NoGeneration
	if req.Generation != nil {
		gen = *req.Generation
	}
	if req.Offsets == nil {
		return 0, nil, missing("offsets")
	}
	out := make([]coordinator.OffsetCommit, len(req.Offsets))
	for i, o := range req.Offsets {
		switch {
		case o.Topic == nil:
			return 0, nil, missing(fmt.Sprintf("offsets[%d].topic", i))
		case o.Partition == nil:
			return 0, nil, missing(fmt.Sprintf("offsets[%d].partition", i))
		case o.Offset == nil:
			return 0, nil, missing(fmt.Sprintf("offsets[%d].offset", i))
		}
		out[i] = coordinator.OffsetCommit{
			Topic:       *o.Topic,
			Partition:   *o.Partition,
			Offset:      *o.Offset,
			LeaderEpoch: -1,
		}
		if o.LeaderEpoch != nil {
			out[i].LeaderEpoch = *o.LeaderEpoch
		}
		if o.Metadata != nil {
			out[i].Metadata = *o.Metadata
		}
	}
	return gen, out, nil
}

// commitOffsets is POST /v1/groups/{group}/offsets.
func (s *Server) commitOffsets(w http.ResponseWriter, r *http.Request) {
	var req commitRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	gen, offsets, e := req.offsets()
	if e != nil {
		writeError(w, e)
		return
	}
	start := time.Now()
	v, err := s.c.CommitGeneration(r.Context(), r.PathValue("group"), gen, offsets)
	s.metrics.commitDone(time.Since(start), err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, commitResponse{Version: v})
}

// getGroupOffsets is GET /v1/groups/{group}/offsets[?topic=t][&wait=30s].
func (s *Server) getGroupOffsets(w http.ResponseWriter, r *http.Request) {
	q, e := parseQuery(r, "topic", "wait")
	if e != nil {
		writeError(w, e)
		return
	}
	topic := ""
	if q.has("topic") {
		if topic, e = q.str("topic"); e != nil {
			writeError(w, e)
			return
		}
	}
	wait, e := q.wait(s.opts.MaxWait)
	if e != nil {
		writeError(w, e)
		return
	}
	group := r.PathValue("group")
	s.servePolled(w, r, wait, pollable{
		watch: func() (<-chan struct{}, <-chan struct{}, func(), error) {
			_, changed, stop, err := s.c.WatchGroup(group)
			return changed, nil, stop, err
		},
		read: func() (version, error) {
			// Group is cheap; the offsets are copied only to encode them.
			info, _, err := s.c.Group(group)
			if err != nil {
				return version{}, err
			}
			return version{
				etag: strconv.Quote(strconv.FormatUint(info.Version, 10)),
				key:  cache.ResponseKey(kindGroupOffsets, info.Version, group, topic),
				encode: func() ([]byte, bool, error) {
					offsets, now, err := s.c.GroupOffsets(group)
					if err != nil || now.Version != info.Version {
						return nil, false, err
					}
					return encodeGroupOffsets(group, topic, offsets, now)
				},
			}, nil
		},
	})
}

func encodeGroupOffsets(group, topic string, offsets []coordinator.PartitionOffset, info coordinator.GroupInfo) ([]byte, bool, error) {
	out := groupOffsetsJSON{
		Group:      group,
		Version:    info.Version,
		Generation: info.Generation,
		Offsets:    make([]offsetJSON, 0, len(offsets)),
	}
	for _, o := range offsets {
		if topic == "" || o.Topic == topic {
			out.Offsets = append(out.Offsets, toOffsetJSON(o))
		}
	}
	b, err := marshal(out)
	return b, true, err
}

func toOffsetJSON(o coordinator.PartitionOffset) offsetJSON {
	return offsetJSON{
		Topic:       o.Topic,
		Partition:   o.Partition,
		Offset:      o.Offset.Offset,
		LeaderEpoch: o.LeaderEpoch,
		Metadata:    o.Metadata,
		CommitTime:  o.CommitTime.UnixMilli(),
	}
}

// getOffset is GET /v1/groups/{group}/offsets/{topic}/{partition}.
func (s *Server) getOffset(w http.ResponseWriter, r *http.Request) {
	if _, e := parseQuery(r); e != nil {
		writeError(w, e)
		return
	}
	group, topic := r.PathValue("group"), r.PathValue("topic")
	part, e := parsePartition(r.PathValue("partition"))
	if e != nil {
		writeError(w, e)
		return
	}
	o, ok, err := s.c.Fetch(group, topic, part)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		writeError(w, errorf(http.StatusNotFound, codeNotFound, "group %q has no offset on topic %q partition %d", group, topic, part))
		return
	}
	writeJSON(w, http.StatusOK, toOffsetJSON(coordinator.PartitionOffset{Topic: topic, Partition: part, Offset: o}))
}

func parsePartition(s string) (int32, *apiError) {
	v, e := parseInt("partition", s, 0, 1<<31-1)
	return int32(v), e
}

// listGroups is GET /v1/groups.
func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) {
	if _, e := parseQuery(r); e != nil {
		writeError(w, e)
		return
	}
	if e := s.requireReady(); e != nil {
		writeError(w, e)
		return
	}
	groups := s.c.Groups()
	if groups == nil {
		groups = []string{}
	}
	writeJSON(w, http.StatusOK, groupsJSON{Groups: groups})
}

// deleteGroup is DELETE /v1/groups/{group}.
func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request) {
	if _, e := parseQuery(r); e != nil {
		writeError(w, e)
		return
	}
	if err := s.c.DeleteGroup(r.Context(), r.PathValue("group")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteOffsets is DELETE /v1/groups/{group}/offsets/{topic}[?partition=N…].
func (s *Server) deleteOffsets(w http.ResponseWriter, r *http.Request) {
	q, e := parseQuery(r, "partition")
	if e != nil {
		writeError(w, e)
		return
	}
	parts, e := q.int32s("partition")
	if e != nil {
		writeError(w, e)
		return
	}
	if err := s.c.DeleteOffsets(r.Context(), r.PathValue("group"), r.PathValue("topic"), parts...); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// requireReady refuses a request that reads every partition while some are
// still loading: the coordinator would silently leave them out.
func (s *Server) requireReady() *apiError {
	if s.c.Ready() {
		return nil
	}
	for _, st := range s.c.Stats() {
		if st.Err != nil {
			return errorf(http.StatusInternalServerError, codeInternal, "partition %d failed to load: %v", st.Partition, st.Err)
		}
	}
	return errorf(http.StatusServiceUnavailable, codeLoading, "not every partition has loaded yet")
}
