package server

import (
	"net/http"

	"github.com/offsetd/offsetd/statictopic"
)

// brokerRemap is the part of a remap request that names the brokers a
// topic should live on instead of explicit moves.
type brokerRemap struct {
	// Brokers is the target broker set.
	Brokers []string `json:"brokers"`
	// MaxOffsets gives, by logic queue id, the max offset of each moving
	// queue's open leader.
	MaxOffsets map[int32]int64 `json:"maxOffsets"`
	// IfEpoch applies the plan only on this stored epoch (0: any).
	IfEpoch int64 `json:"ifEpoch"`
	// DryRun answers the plan and changes nothing.
	DryRun bool `json:"dryRun"`
}

func (b brokerRemap) isSet() bool {
	return b.Brokers != nil || b.MaxOffsets != nil || b.IfEpoch != 0 || b.DryRun
}

// remapToBrokers serves a remap request that names brokers: a dry run
// answers the statictopic.RemapPlan, an apply the stored mapping.
func (s *Server) remapToBrokers(w http.ResponseWriter, r *http.Request, scope string, req brokerRemap) {
	if req.Brokers == nil {
		writeError(w, missing("brokers"))
		return
	}
	topic := r.PathValue("topic")
	if req.DryRun {
		if req.MaxOffsets != nil || req.IfEpoch != 0 {
			writeError(w, errorf(http.StatusBadRequest, codeInvalidArgument, "a dry run takes no maxOffsets or ifEpoch"))
			return
		}
		plan, err := s.c.PlanStaticTopicRemap(topic, scope, req.Brokers)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, plan)
		return
	}
	m, err := s.c.RemapStaticTopicToBrokers(r.Context(), topic, scope, req.Brokers, req.MaxOffsets, req.IfEpoch)
	s.answerMapping(w, r, m, err)
}

// answerMapping answers with the mapping a change stored, or its error.
func (s *Server) answerMapping(w http.ResponseWriter, r *http.Request, m statictopic.Mapping, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeMapping(w, m)
}

// importRequest is the body of POST /v1/static-topics/{topic}/import.
type importRequest struct {
	// Details are RocketMQ's TopicQueueMappingDetail of every broker.
	Details []statictopic.Detail `json:"details"`
	// Force stores the mapping even if it rewrites sealed items.
	Force bool `json:"force"`
}

// importStaticTopic is POST /v1/static-topics/{topic}/import: store the
// mapping RocketMQ-shaped details describe, fenced like a put. Every
// detail's topic must be the path's.
func (s *Server) importStaticTopic(w http.ResponseWriter, r *http.Request) {
	var req importRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Details == nil {
		writeError(w, missing("details"))
		return
	}
	topic := r.PathValue("topic")
	for _, d := range req.Details {
		if d.Topic != topic {
			writeError(w, errorf(http.StatusBadRequest, codeInvalidArgument, "detail of topic %q imported at topic %q", d.Topic, topic))
			return
		}
	}
	m, err := s.c.ImportStaticTopic(r.Context(), req.Details, req.Force)
	s.answerMapping(w, r, m, err)
}

// exportJSON answers an export: one RocketMQ TopicQueueMappingDetail per
// broker.
type exportJSON struct {
	Details []statictopic.Detail `json:"details"`
}

// exportStaticTopic is GET /v1/static-topics/{topic}/export?scope=s.
func (s *Server) exportStaticTopic(w http.ResponseWriter, r *http.Request) {
	scope, e := onlyScope(r)
	if e != nil {
		writeError(w, e)
		return
	}
	details, err := s.c.ExportStaticTopic(r.PathValue("topic"), scope)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, exportJSON{Details: details})
}

// trimRequest is the body of POST /v1/static-topics/{topic}/trim.
type trimRequest struct {
	Scope *string `json:"scope"`
	// Below drops sealed items whose logic range ends at or below it.
	Below *int64 `json:"below"`
	// Queues limits the trim to these logic queues; absent means all.
	Queues []int32 `json:"queues"`
	// Force trims even items a consumer group still reads.
	Force bool `json:"force"`
}

// trimStaticTopic is POST /v1/static-topics/{topic}/trim.
func (s *Server) trimStaticTopic(w http.ResponseWriter, r *http.Request) {
	var req trimRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	switch {
	case req.Scope == nil:
		writeError(w, missing("scope"))
		return
	case req.Below == nil:
		writeError(w, missing("below"))
		return
	}
	m, err := s.c.TrimStaticTopic(r.Context(), r.PathValue("topic"), *req.Scope, req.Queues, *req.Below, req.Force)
	s.answerMapping(w, r, m, err)
}

// readersJSON answers GET /v1/static-topics/{topic}/readers.
type readersJSON struct {
	Topic  string                     `json:"topic"`
	Scope  string                     `json:"scope"`
	Queues []statictopic.QueueReaders `json:"queues"`
}

// staticTopicReaders is GET /v1/static-topics/{topic}/readers?scope=s: every
// logic queue's items and the consumer groups that read each.
func (s *Server) staticTopicReaders(w http.ResponseWriter, r *http.Request) {
	scope, e := onlyScope(r)
	if e != nil {
		writeError(w, e)
		return
	}
	topic := r.PathValue("topic")
	queues, err := s.c.StaticTopicReaders(topic, scope)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sc, _ := statictopic.ParseScope(scope) // StaticTopicReaders parsed it
	writeJSON(w, http.StatusOK, readersJSON{Topic: topic, Scope: sc.String(), Queues: queues})
}

// onlyScope reads the query of a request that takes only ?scope=s.
func onlyScope(r *http.Request) (string, *apiError) {
	q, e := parseQuery(r, "scope")
	if e != nil {
		return "", e
	}
	return q.str("scope")
}
