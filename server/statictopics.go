package server

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/statictopic"
)

// createRequest is the body of POST /v1/static-topics: create a static
// topic, or grow it to more queues.
type createRequest struct {
	Topic       *string  `json:"topic"`
	Scope       *string  `json:"scope"`
	TotalQueues *int32   `json:"totalQueues"`
	Brokers     []string `json:"brokers"`
}

// remapRequest is the body of POST /v1/static-topics/{topic}/remap: either
// explicit moves, or the brokers the topic should live on (see
// brokerRemap).
type remapRequest struct {
	Scope *string     `json:"scope"`
	Moves []remapMove `json:"moves"`
	brokerRemap
}

type remapMove struct {
	QueueID            *int32  `json:"queueId"`
	ToBroker           *string `json:"toBroker"`
	OldLeaderMaxOffset *int64  `json:"oldLeaderMaxOffset"`
}

type globalReadRequest struct {
	Enabled *bool `json:"enabled"`
	// Force sets the switch of a scope that holds no static topic (yet);
	// without it such a scope is 404.
	Force bool `json:"force"`
}

type globalReadJSON struct {
	Scope      string `json:"scope"`
	GlobalRead bool   `json:"globalRead"`
}

type staticTopicsJSON struct {
	StaticTopics []statictopic.Mapping `json:"staticTopics"`
}

type scopesJSON struct {
	Scopes []coordinator.ScopeInfo `json:"scopes"`
}

// toPhysicalJSON answers a translation of a logic offset.
type toPhysicalJSON struct {
	Broker          string `json:"broker"`
	PhysicalQueueID int32  `json:"physicalQueueId"`
	PhysicalOffset  int64  `json:"physicalOffset"`
}

// toLogicJSON answers a translation of a physical offset.
type toLogicJSON struct {
	QueueID     int32 `json:"queueId"`
	LogicOffset int64 `json:"logicOffset"`
}

// createStaticTopic is POST /v1/static-topics.
func (s *Server) createStaticTopic(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	switch {
	case req.Topic == nil:
		writeError(w, missing("topic"))
		return
	case req.Scope == nil:
		writeError(w, missing("scope"))
		return
	case req.TotalQueues == nil:
		writeError(w, missing("totalQueues"))
		return
	case req.Brokers == nil:
		writeError(w, missing("brokers"))
		return
	}
	m, err := s.c.CreateStaticTopic(r.Context(), *req.Topic, *req.Scope, *req.TotalQueues, req.Brokers)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeMapping(w, m)
}

// remapStaticTopic is POST /v1/static-topics/{topic}/remap.
func (s *Server) remapStaticTopic(w http.ResponseWriter, r *http.Request) {
	var req remapRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Scope == nil {
		writeError(w, missing("scope"))
		return
	}
	if req.isSet() {
		if req.Moves != nil {
			writeError(w, errorf(http.StatusBadRequest, codeInvalidArgument, "give moves or brokers, not both"))
			return
		}
		s.remapToBrokers(w, r, *req.Scope, req.brokerRemap)
		return
	}
	if req.Moves == nil {
		writeError(w, missing("moves"))
		return
	}
	moves := make([]statictopic.QueueMove, len(req.Moves))
	for i, mv := range req.Moves {
		switch {
		case mv.QueueID == nil:
			writeError(w, missing(fmt.Sprintf("moves[%d].queueId", i)))
			return
		case mv.ToBroker == nil:
			writeError(w, missing(fmt.Sprintf("moves[%d].toBroker", i)))
			return
		case mv.OldLeaderMaxOffset == nil:
			writeError(w, missing(fmt.Sprintf("moves[%d].oldLeaderMaxOffset", i)))
			return
		}
		moves[i] = statictopic.QueueMove{QueueID: *mv.QueueID, ToBroker: *mv.ToBroker, OldLeaderMaxOffset: *mv.OldLeaderMaxOffset}
	}
	m, err := s.c.RemapStaticTopic(r.Context(), r.PathValue("topic"), *req.Scope, moves)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeMapping(w, m)
}

// putRequest is the body of PUT /v1/static-topics/{topic}: a mapping, and
// force to store it even if it rewrites sealed items.
type putRequest struct {
	statictopic.Mapping
	Force bool `json:"force"`
}

// putStaticTopic is PUT /v1/static-topics/{topic}: store a whole mapping,
// fenced by its epoch and by its sealed items' history (unless "force" is
// true). The body's topic may be left out; if given it must be the path's.
func (s *Server) putStaticTopic(w http.ResponseWriter, r *http.Request) {
	var req putRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	m := req.Mapping
	topic := r.PathValue("topic")
	if m.Topic == "" {
		m.Topic = topic
	}
	if m.Topic != topic {
		writeError(w, errorf(http.StatusBadRequest, codeInvalidArgument, "mapping of topic %q put at topic %q", m.Topic, topic))
		return
	}
	put := s.c.PutStaticTopic
	if req.Force {
		put = s.c.ForcePutStaticTopic
	}
	if err := put(r.Context(), m); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeMapping(w http.ResponseWriter, m statictopic.Mapping) {
	w.Header().Set("ETag", epochETag(m.Epoch))
	writeJSON(w, http.StatusOK, m)
}

func epochETag(epoch int64) string {
	return strconv.Quote(strconv.FormatInt(epoch, 10))
}

// getStaticTopic is GET /v1/static-topics/{topic}?scope=s[&wait=30s]. Its
// version is the mapping's epoch: an epoch never carries two contents.
func (s *Server) getStaticTopic(w http.ResponseWriter, r *http.Request) {
	q, e := parseQuery(r, "scope", "wait")
	if e != nil {
		writeError(w, e)
		return
	}
	scope, e := q.str("scope")
	if e != nil {
		writeError(w, e)
		return
	}
	wait, e := q.wait(s.opts.MaxWait)
	if e != nil {
		writeError(w, e)
		return
	}
	topic := r.PathValue("topic")
	s.servePolled(w, r, wait, pollable{
		watch: func() (<-chan struct{}, <-chan struct{}, func(), error) {
			// A mapping does not depend on the global-read switches.
			mappings, _, stop, err := s.c.WatchStaticTopic(topic)
			return mappings, nil, stop, err
		},
		read: func() (version, error) {
			m, ok, err := s.c.StaticTopic(topic, scope)
			if err != nil {
				return version{}, err
			}
			if !ok {
				return version{}, errorf(http.StatusNotFound, codeNotFound, "no static topic %q in scope %q", topic, scope)
			}
			return version{
				etag: epochETag(m.Epoch),
				key:  cache.ResponseKey(kindMapping, uint64(m.Epoch), m.Topic, m.Scope),
				encode: func() ([]byte, bool, error) {
					b, err := marshal(m)
					return b, true, err
				},
			}, nil
		},
	})
}

// listStaticTopics is GET /v1/static-topics[?scope=s].
func (s *Server) listStaticTopics(w http.ResponseWriter, r *http.Request) {
	q, e := parseQuery(r, "scope")
	if e != nil {
		writeError(w, e)
		return
	}
	var scope string
	if q.has("scope") {
		name, e := q.str("scope")
		if e != nil {
			writeError(w, e)
			return
		}
		sc, err := statictopic.ParseScope(name)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		scope = sc.String()
	}
	if e := s.requireReady(); e != nil {
		writeError(w, e)
		return
	}
	out := staticTopicsJSON{StaticTopics: []statictopic.Mapping{}}
	for _, m := range s.c.StaticTopics() {
		if scope == "" || m.Scope == scope {
			out.StaticTopics = append(out.StaticTopics, m)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// getRoute is GET /v1/static-topics/{topic}/route?scope=s&role=consumer|producer[&wait=30s].
//
// A route's epoch alone is not its version: a global-read switch changes
// routes without changing any epoch, and a mapping imported with a lower
// epoch into another scope can change a consumer's route without raising
// its epoch. So the ETag is the epoch, the switches' version (for a
// consumer; a producer's route ignores the switches) and a hash of the
// route's content.
func (s *Server) getRoute(w http.ResponseWriter, r *http.Request) {
	q, e := parseQuery(r, "scope", "role", "wait")
	if e != nil {
		writeError(w, e)
		return
	}
	scope, e := q.str("scope")
	if e != nil {
		writeError(w, e)
		return
	}
	roleName, e := q.str("role")
	if e != nil {
		writeError(w, e)
		return
	}
	role, err := statictopic.ParseRole(roleName)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	wait, e := q.wait(s.opts.MaxWait)
	if e != nil {
		writeError(w, e)
		return
	}
	topic := r.PathValue("topic")
	s.servePolled(w, r, wait, pollable{
		watch: func() (<-chan struct{}, <-chan struct{}, func(), error) {
			return s.c.WatchStaticTopic(topic)
		},
		read: func() (version, error) {
			var switches uint64 // a producer's route never depends on them
			if role == statictopic.Consumer {
				switches = s.c.SwitchesVersion()
			}
			rt, err := s.c.Route(topic, scope, role)
			if err != nil {
				return version{}, err
			}
			etag := strconv.Quote(fmt.Sprintf("%d.%d.%016x", rt.Epoch, switches, routeHash(rt)))
			return version{
				etag: etag,
				key:  cache.ResponseKey(kindRoute, 0, topic, scope, roleName, etag),
				encode: func() ([]byte, bool, error) {
					b, err := marshal(rt)
					return b, true, err
				},
			}, nil
		},
	})
}

// routeHash digests everything a route's JSON holds.
func routeHash(rt statictopic.Route) uint64 {
	var d xxhash.Digest
	d.Reset()
	var b []byte
	str := func(s string) {
		b = binary.AppendUvarint(b[:0], uint64(len(s)))
		d.Write(b)
		d.WriteString(s)
	}
	num := func(v int64) {
		b = binary.AppendVarint(b[:0], v)
		d.Write(b)
	}
	str(rt.Topic)
	num(rt.Epoch)
	num(int64(len(rt.Queues)))
	for _, q := range rt.Queues {
		str(q.BrokerName)
		num(int64(q.QueueID))
		str(q.Broker)
		num(int64(q.PhysicalQueueID))
	}
	return d.Sum64()
}

// translate is GET /v1/static-topics/{topic}/translate?scope=s and either
// queueId=Q&logicOffset=L (to physical) or
// broker=B&physicalQueueId=P&physicalOffset=O (to logic).
func (s *Server) translate(w http.ResponseWriter, r *http.Request) {
	q, e := parseQuery(r, "scope", "queueId", "logicOffset", "broker", "physicalQueueId", "physicalOffset")
	if e != nil {
		writeError(w, e)
		return
	}
	scope, e := q.str("scope")
	if e != nil {
		writeError(w, e)
		return
	}
	topic := r.PathValue("topic")
	toLogic := q.has("broker") || q.has("physicalQueueId") || q.has("physicalOffset")
	if toLogic && (q.has("queueId") || q.has("logicOffset")) {
		writeError(w, errorf(http.StatusBadRequest, codeInvalidArgument, "give queueId and logicOffset, or broker, physicalQueueId and physicalOffset, not both"))
		return
	}
	if toLogic {
		broker, e := q.str("broker")
		if e != nil {
			writeError(w, e)
			return
		}
		pq, e := q.int32("physicalQueueId")
		if e != nil {
			writeError(w, e)
			return
		}
		po, e := q.int64("physicalOffset")
		if e != nil {
			writeError(w, e)
			return
		}
		queueID, logic, err := s.c.TranslateToLogic(topic, scope, broker, pq, po)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, toLogicJSON{QueueID: queueID, LogicOffset: logic})
		return
	}
	queueID, e := q.int32("queueId")
	if e != nil {
		writeError(w, e)
		return
	}
	logic, e := q.int64("logicOffset")
	if e != nil {
		writeError(w, e)
		return
	}
	broker, pq, po, err := s.c.Translate(topic, scope, queueID, logic)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toPhysicalJSON{Broker: broker, PhysicalQueueID: pq, PhysicalOffset: po})
}

// listScopes is GET /v1/scopes.
func (s *Server) listScopes(w http.ResponseWriter, r *http.Request) {
	if _, e := parseQuery(r); e != nil {
		writeError(w, e)
		return
	}
	if e := s.requireReady(); e != nil {
		writeError(w, e)
		return
	}
	scopes := s.c.Scopes()
	if scopes == nil {
		scopes = []coordinator.ScopeInfo{}
	}
	writeJSON(w, http.StatusOK, scopesJSON{Scopes: scopes})
}

// setGlobalRead is PUT /v1/scopes/{scope}/global-read.
func (s *Server) setGlobalRead(w http.ResponseWriter, r *http.Request) {
	var req globalReadRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Enabled == nil {
		writeError(w, missing("enabled"))
		return
	}
	scope := r.PathValue("scope")
	set := s.c.SetGlobalRead
	if req.Force {
		set = s.c.ForceSetGlobalRead
	}
	if err := set(r.Context(), scope, *req.Enabled); err != nil {
		s.fail(w, r, err)
		return
	}
	sc, _ := statictopic.ParseScope(scope) // SetGlobalRead parsed it
	writeJSON(w, http.StatusOK, globalReadJSON{Scope: sc.String(), GlobalRead: *req.Enabled})
}
