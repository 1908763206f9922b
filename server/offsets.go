package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/bytebufferpool"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/internal/wire"
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

// The answers of the hot paths are encoded by package wire: a commit's is
// {"version":v}, a point fetch's one wire.Offset, a group's
// {"group":…,"version":…,"generation":…,"offsets":[wire.Offset…]}
// (generation is the highest a commit carried, or -1).

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
	body, e := s.readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	defer bytebufferpool.Put(body) // the offsets hold copies of its strings
	gen, offsets, ok := decodeCommit(body.B)
	if !ok {
		var req commitRequest
		if e := decodeJSON(body.B, &req); e != nil {
			writeError(w, e)
			return
		}
		if gen, offsets, e = req.offsets(); e != nil {
			writeError(w, e)
			return
		}
	}
	start := time.Now()
	v, err := s.c.CommitGeneration(r.Context(), r.PathValue("group"), gen, offsets)
	s.metrics.commitDone(time.Since(start), err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := bytebufferpool.Get()
	out.B = wire.AppendVersion(out.B, v)
	writeBody(w, http.StatusOK, out.B)
	bytebufferpool.Put(out)
}

// decodeCommit reads a commit's body on the fast path (see package wire):
// ok is false when the body is anything but the plain JSON clients send,
// and decodeJSON must judge it. What it accepts, decodeJSON accepts with
// the same result (FuzzDecodeCommit). Offsets of one topic share its name.
func decodeCommit(body []byte) (generation int32, offsets []coordinator.OffsetCommit, ok bool) {
	d := wire.NewDecoder(body)
	var names wire.Names
	arena := make([]coordinator.OffsetCommit, 0, min(bytes.Count(body, []byte{'{'}), len(body)/minOffsetBytes+1))
	gc, ok := decodeGroupCommit(&d, false, &names, &arena)
	if !ok || !d.End() {
		return 0, nil, false
	}
	return gc.Generation, gc.Offsets, true
}

// The fewest bytes a commit of a batch, {"group":"","offsets":[]}, and
// an offset, {"topic":"","partition":0,"offset":0}, take in a body: a body
// of braces gets no more room for its commits than one of real commits.
const (
	minCommitBytes = len(`{"group":"","offsets":[]}`)
	minOffsetBytes = len(`{"topic":"","partition":0,"offset":0}`)
)

// decodeGroupCommit reads one commit object on the fast path: a commit's
// body, or with withGroup one commit of a batch, which names its group.
// Its offsets are appended to arena and sliced from it, capped, so that
// the commits of one body share one array; its topic and metadata strings
// come from names.
func decodeGroupCommit(d *wire.Decoder, withGroup bool, names *wire.Names, arena *[]coordinator.OffsetCommit) (gc coordinator.GroupCommit, ok bool) {
	const (
		generation uint8 = 1 << iota
		offsets
		group
	)
	gc.Generation = coordinator.NoGeneration
	var seen, field uint8
	d.Open('{')
	for n := 0; d.Next('}', n); n++ {
		switch string(d.Key()) {
		case "generation":
			field = generation
			gc.Generation = d.Int32()
		case "group":
			if !withGroup {
				return gc, false
			}
			field = group
			gc.Group = string(d.String())
		case "offsets":
			field = offsets
			start := len(*arena)
			d.Open('[')
			for i := 0; d.Next(']', i); i++ {
				o, ok := decodeCommitOffset(d, names)
				if !ok {
					return gc, false
				}
				*arena = append(*arena, o)
			}
			gc.Offsets = (*arena)[start:len(*arena):len(*arena)]
		default:
			return gc, false
		}
		if seen&field != 0 {
			return gc, false // a key given twice
		}
		seen |= field
	}
	if !d.OK() || gc.Offsets == nil || withGroup && seen&group == 0 {
		return gc, false
	}
	return gc, true
}

// decodeCommitOffset reads one offset of a commit's body on the fast path;
// ok is false if a required field is missing or anything else is off. The
// offsets of a body mostly share their topics and metadata: their strings
// come from names.
func decodeCommitOffset(d *wire.Decoder, names *wire.Names) (o coordinator.OffsetCommit, ok bool) {
	const (
		topic uint8 = 1 << iota
		partition
		offset
		leaderEpoch
		metadata
		required = topic | partition | offset
	)
	o.LeaderEpoch = -1
	var seen, field uint8
	d.Open('{')
	for n := 0; d.Next('}', n); n++ {
		switch string(d.Key()) {
		case "topic":
			field = topic
			o.Topic = names.String(d.String())
		case "partition":
			field = partition
			o.Partition = d.Int32()
		case "offset":
			field = offset
			o.Offset = d.Int64()
		case "leaderEpoch":
			field = leaderEpoch
			o.LeaderEpoch = d.Int32()
		case "metadata":
			field = metadata
			o.Metadata = names.String(d.String())
		default:
			d.Fail()
		}
		if seen&field != 0 {
			d.Fail()
		}
		seen |= field
	}
	return o, d.OK() && seen&required == required
}

// getGroupOffsets is GET /v1/groups/{group}/offsets[?topic=t][&wait=30s].
func (s *Server) getGroupOffsets(w http.ResponseWriter, r *http.Request) {
	s.getGroupOffsetsOf(w, r, r.PathValue("group"))
}

// getGroupOffsetsOf answers a read of group's offsets.
func (s *Server) getGroupOffsetsOf(w http.ResponseWriter, r *http.Request, group string) {
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
				etag: wire.ETag(info.Version),
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

// encodeGroupOffsets encodes a group's offsets (those on topic, when it is
// not empty), in a new slice the response cache may keep.
func encodeGroupOffsets(group, topic string, offsets []coordinator.PartitionOffset, info coordinator.GroupInfo) ([]byte, bool, error) {
	buf := groupAnswers.Get()
	defer groupAnswers.Put(buf)
	b := append(buf.B, `{"group":`...)
	b = wire.AppendString(b, group)
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, info.Version, 10)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, int64(info.Generation), 10)
	b = append(b, `,"offsets":[`...)
	first := true
	for _, o := range offsets {
		if topic == "" || o.Topic == topic {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = wire.AppendOffset(b, toWire(o))
		}
	}
	b = append(b, "]}\n"...)
	buf.B = b
	return bytes.Clone(b), true, nil
}

// groupAnswers holds the buffers groups' answers are encoded in, apart
// from the shared pool: a pool learns the sizes it is asked for and drops
// buffers much larger than most, so among the small buffers of commits
// and point fetches every group's answer (13 KiB for 128 offsets) would
// be encoded in a fresh one.
var groupAnswers bytebufferpool.Pool

func toWire(o coordinator.PartitionOffset) wire.Offset {
	return wire.Offset{
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
	s.getOffsetOf(w, r, r.PathValue("group"), r.PathValue("topic"), r.PathValue("partition"))
}

// The patterns of the hot reads, which are also their metrics' routes.
const (
	groupOffsetsPattern = "GET /v1/groups/{group}/offsets"
	pointFetchPattern   = "GET /v1/groups/{group}/offsets/{topic}/{partition}"
)

// hotRead returns the pattern and path values of p, a clean, escaped path,
// if the mux would route it to getGroupOffsets or getOffset and none of
// its segments is escaped: what the mux would give the handler, found
// without the mux, which allocates its matches. pattern is empty for any
// other path.
func hotRead(p string) (pattern, group, topic, partition string) {
	rest, ok := strings.CutPrefix(p, "/v1/groups/")
	if !ok || strings.IndexByte(rest, '%') >= 0 {
		return "", "", "", ""
	}
	group, rest, _ = strings.Cut(rest, "/")
	if group == "" {
		return "", "", "", ""
	}
	if rest == "offsets" {
		return groupOffsetsPattern, group, "", ""
	}
	rest, ok = strings.CutPrefix(rest, "offsets/")
	if !ok {
		return "", "", "", ""
	}
	topic, partition, _ = strings.Cut(rest, "/")
	if topic == "" || partition == "" || strings.IndexByte(partition, '/') >= 0 {
		return "", "", "", ""
	}
	return pointFetchPattern, group, topic, partition
}

// getOffsetOf answers a point fetch of the given path values.
func (s *Server) getOffsetOf(w http.ResponseWriter, r *http.Request, group, topic, partition string) {
	if _, e := parseQuery(r); e != nil {
		writeError(w, e)
		return
	}
	part, e := parsePartition(partition)
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
	out := bytebufferpool.Get()
	out.B = wire.AppendOffset(out.B, toWire(coordinator.PartitionOffset{Topic: topic, Partition: part, Offset: o}))
	writeBody(w, http.StatusOK, out.B)
	bytebufferpool.Put(out)
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
