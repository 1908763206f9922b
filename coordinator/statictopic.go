package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/offsetd/offsetd/cache"
	"github.com/offsetd/offsetd/statictopic"
)

// Static topics keep a fixed number of logic queues however brokers come and
// go. Their mappings live in the partition their topic name hashes to, one
// mapping per topic and scope, each change a durable record fenced by epoch.

// errNoChange is returned by a request's build when the request is already
// satisfied: it succeeds without writing.
var errNoChange = errors.New("no change")

// ScopeInfo describes a scope known to the coordinator.
type ScopeInfo struct {
	// Scope is the scope's canonical name.
	Scope string `json:"scope"`
	// BrokerName is the scope's logic broker name, "__logic__…".
	BrokerName string `json:"brokerName"`
	// GlobalRead is the scope's disaster switch: while on, consumers in other
	// scopes also see this scope's logic queues.
	GlobalRead bool `json:"globalRead"`
	// Topics counts the static topics in the scope.
	Topics int `json:"topics"`
}

func parseScope(scope string) (statictopic.Scope, error) {
	if err := validName("scope", scope); err != nil {
		return statictopic.Scope{}, err
	}
	s, err := statictopic.ParseScope(scope)
	if err != nil {
		return statictopic.Scope{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return s, nil
}

// CreateStaticTopic creates topic in scope with totalQueues logic queues,
// spread evenly over brokers (least-loaded first), each on a fresh physical
// queue. Called again with a larger totalQueues it grows the topic; with the
// same count and brokers it returns the stored mapping and writes nothing
// (with other brokers it fails with statictopic.ErrTopicExists, see
// statictopic.CheckRecreate); a smaller count is an error.
func (c *Coordinator) CreateStaticTopic(ctx context.Context, topic, scope string, totalQueues int32, brokers []string) (statictopic.Mapping, error) {
	sc, err := c.checkTopicScope(topic, scope)
	if err != nil {
		return statictopic.Mapping{}, err
	}
	brokers = slices.Clone(brokers) // read by the writer, maybe after the caller gave up
	return c.changeMapping(ctx, topic, sc, func(stored *statictopic.Mapping, now int64) (statictopic.Mapping, error) {
		if stored != nil && stored.TotalQueues == totalQueues {
			if err := statictopic.CheckRecreate(*stored, brokers); err != nil {
				return statictopic.Mapping{}, err
			}
			return *stored, errNoChange
		}
		var old int64
		if stored != nil {
			old = stored.Epoch
		}
		return statictopic.Create(topic, sc, totalQueues, brokers, statictopic.NextEpoch(old, now), now, stored)
	})
}

// RemapStaticTopic moves logic queues to other brokers: each move seals the
// queue's current leader item at oldLeaderMaxOffset and appends a new item
// on the target broker, whose logic range starts on the next 10,000 boundary
// that leaves at least half a block after the old range.
func (c *Coordinator) RemapStaticTopic(ctx context.Context, topic, scope string, moves []statictopic.QueueMove) (statictopic.Mapping, error) {
	sc, err := c.checkTopicScope(topic, scope)
	if err != nil {
		return statictopic.Mapping{}, err
	}
	moves = slices.Clone(moves) // read by the writer, maybe after the caller gave up
	var from int64              // the epoch remapped, set by the writer
	m, err := c.changeMapping(ctx, topic, sc, func(stored *statictopic.Mapping, now int64) (statictopic.Mapping, error) {
		if stored == nil {
			return statictopic.Mapping{}, fmt.Errorf("%w: static topic %q in scope %q", ErrNotFound, topic, sc)
		}
		from = stored.Epoch
		return statictopic.Remap(*stored, moves, statictopic.NextEpoch(stored.Epoch, now), now)
	})
	if err == nil {
		c.logRemap(m, from, moves)
	}
	return m, err
}

// logRemap logs a remap that moved queues: an operator reading the log
// after an incident sees which queues went where, and when.
func (c *Coordinator) logRemap(m statictopic.Mapping, from int64, moves []statictopic.QueueMove) {
	if len(moves) == 0 || m.Epoch == from {
		return
	}
	list := make([]string, len(moves))
	for i, mv := range moves {
		list[i] = fmt.Sprintf("%d->%s", mv.QueueID, mv.ToBroker)
	}
	c.opts.Logger.Info("static topic remapped", "topic", m.Topic, "scope", m.Scope, "epoch", m.Epoch, "previous_epoch", from,
		"moves", len(moves), "queues", firstNames(list, maxLoggedNames))
}

// PutStaticTopic stores a whole mapping, as an import or a sync from another
// coordinator. It is validated and fenced by epoch: a lower epoch fails with
// statictopic.ErrStaleEpoch, an equal epoch must carry identical content
// (otherwise statictopic.ErrEpochConflict) and writes nothing, a higher epoch
// replaces the stored mapping. A higher epoch must keep the stored sealed
// items as they are (statictopic.CheckHistory), or the put fails with
// statictopic.ErrHistory and writes nothing.
func (c *Coordinator) PutStaticTopic(ctx context.Context, m statictopic.Mapping) error {
	return c.putStaticTopic(ctx, m, false)
}

// ForcePutStaticTopic is PutStaticTopic without the history check: it may
// rewrite or drop sealed items, sending consumers' committed logic offsets
// to other messages. A put that does so is logged and counted
// (ForcedChanges).
func (c *Coordinator) ForcePutStaticTopic(ctx context.Context, m statictopic.Mapping) error {
	return c.putStaticTopic(ctx, m, true)
}

func (c *Coordinator) putStaticTopic(ctx context.Context, m statictopic.Mapping, force bool) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	sc, err := c.checkTopicScope(m.Topic, m.Scope)
	if err != nil {
		return err
	}
	m = m.Clone()
	_, err = c.changeMapping(ctx, m.Topic, sc, func(stored *statictopic.Mapping, _ int64) (statictopic.Mapping, error) {
		if stored != nil {
			replace, err := statictopic.CheckEpoch(*stored, m)
			if err != nil {
				return statictopic.Mapping{}, err
			}
			if !replace {
				return *stored, errNoChange
			}
			if err := c.checkForced(statictopic.CheckHistory(*stored, m), force, m); err != nil {
				return statictopic.Mapping{}, err
			}
		}
		return m, nil
	})
	return err
}

func (c *Coordinator) checkTopicScope(topic, scope string) (statictopic.Scope, error) {
	if err := validName("topic", topic); err != nil {
		return statictopic.Scope{}, err
	}
	return parseScope(scope)
}

// changeMapping runs change in topic's partition writer against the stored
// mapping (nil when there is none), checks the result against the topic's
// mappings in other scopes, and writes it.
func (c *Coordinator) changeMapping(ctx context.Context, topic string, sc statictopic.Scope,
	change func(stored *statictopic.Mapping, nowMillis int64) (statictopic.Mapping, error)) (statictopic.Mapping, error) {
	res, err := c.submit(ctx, c.topicPartition(topic), &request{
		typ:        recMapping,
		readsState: true,
		build: func(p *partition, dst []byte) ([]byte, any, error) {
			var stored *statictopic.Mapping
			if m, ok := p.mappings.Get(topic, sc.String()); ok {
				stored = &m
			}
			m, err := change(stored, c.opts.Now().UnixMilli())
			if errors.Is(err, errNoChange) {
				return nil, m.Clone(), err
			}
			if err != nil {
				return nil, nil, err
			}
			if err := statictopic.CheckScopeConflict(topic, sc, p.mappings.Topic(topic, nil)); err != nil {
				return nil, nil, err
			}
			if err := m.Validate(); err != nil {
				return nil, nil, err
			}
			b, err := json.Marshal(m)
			if err != nil {
				return nil, nil, err
			}
			return append(dst, b...), m.Clone(), nil
		},
	})
	if errors.Is(err, errNoChange) {
		err = nil
	}
	out, _ := res.out.(statictopic.Mapping)
	return out, err
}

// StaticTopic returns the mapping of topic in scope; ok is false when there
// is none.
func (c *Coordinator) StaticTopic(topic, scope string) (m statictopic.Mapping, ok bool, err error) {
	sc, err := c.checkTopicScope(topic, scope)
	if err != nil {
		return statictopic.Mapping{}, false, err
	}
	p := c.topicPartition(topic)
	if err := c.readable(p); err != nil {
		return statictopic.Mapping{}, false, err
	}
	m, ok = p.mappings.Get(topic, sc.String())
	return m.Clone(), ok, nil
}

// StaticTopics returns every stored mapping, sorted by topic and scope.
func (c *Coordinator) StaticTopics() []statictopic.Mapping {
	var out []statictopic.Mapping
	for _, p := range c.parts {
		if p.state.Load() == stateReady {
			out = p.mappings.All(out)
		}
	}
	slices.SortFunc(out, func(a, b statictopic.Mapping) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Scope, b.Scope))
	})
	for i := range out {
		out[i] = out[i].Clone()
	}
	return out
}

// Route returns the logic queues of topic that a client in clientScope sees
// in role: its own scope's (or the global mapping's), and for a consumer
// also those of every other scope in global read.
func (c *Coordinator) Route(topic, clientScope string, role statictopic.Role) (statictopic.Route, error) {
	sc, err := c.checkTopicScope(topic, clientScope)
	if err != nil {
		return statictopic.Route{}, err
	}
	p := c.topicPartition(topic)
	if err := c.readable(p); err != nil {
		return statictopic.Route{}, err
	}
	return statictopic.BuildRoute(topic, sc, role, p.mappings.Topic(topic, nil), c.globalRead)
}

// checkForced passes a refused check (breach, an error of the history or
// consumer checks) when force is set, and then logs and counts what the
// change overrides. It runs in the partition's writer, as the change is
// accepted for writing.
func (c *Coordinator) checkForced(breach error, force bool, m statictopic.Mapping) error {
	if breach == nil || !force {
		return breach
	}
	c.forced.Add(1)
	c.opts.Logger.Warn("static topic: forced change overrides a check", "topic", m.Topic, "scope", m.Scope, "epoch", m.Epoch, "overridden", breach.Error())
	return nil
}

// ForcedChanges counts, since Open, the static-topic changes (puts,
// imports, trims) whose force overrode the sealed-history or the readers
// check. A change is counted when it is accepted for writing: one whose
// log write then fails is counted too.
func (c *Coordinator) ForcedChanges() uint64 { return c.forced.Load() }

// ImportStaticTopic stores the mapping that details describe, RocketMQ's
// TopicQueueMappingDetail of every broker of one static topic (see
// statictopic.Import), exactly as PutStaticTopic (or ForcePutStaticTopic
// with force) stores a mapping, and returns it.
func (c *Coordinator) ImportStaticTopic(ctx context.Context, details []statictopic.Detail, force bool) (statictopic.Mapping, error) {
	m, err := statictopic.Import(details)
	if err != nil {
		return statictopic.Mapping{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := c.putStaticTopic(ctx, m, force); err != nil {
		return statictopic.Mapping{}, err
	}
	return m, nil
}

// ExportStaticTopic returns the mapping of topic in scope as RocketMQ's
// brokers hold it, one TopicQueueMappingDetail per broker (see
// statictopic.Export); ImportStaticTopic takes it back.
func (c *Coordinator) ExportStaticTopic(topic, scope string) ([]statictopic.Detail, error) {
	m, err := c.mustStaticTopic(topic, scope)
	if err != nil {
		return nil, err
	}
	return statictopic.Export(m.Clone()), nil
}

// PlanStaticTopicRemap returns, without changing anything, the fewest
// moves that leave every logic queue of topic on brokers, balanced among
// them (statictopic.PlanRemap): the dry run of RemapStaticTopicToBrokers.
// The plan's Epoch, passed as ifEpoch, applies exactly this plan.
func (c *Coordinator) PlanStaticTopicRemap(topic, scope string, brokers []string) (statictopic.RemapPlan, error) {
	m, err := c.mustStaticTopic(topic, scope)
	if err != nil {
		return statictopic.RemapPlan{}, err
	}
	moves, err := statictopic.PlanRemap(m, brokers)
	if err != nil {
		return statictopic.RemapPlan{}, err
	}
	if moves == nil {
		moves = []statictopic.QueueMove{}
	}
	return statictopic.RemapPlan{Topic: m.Topic, Scope: m.Scope, Epoch: m.Epoch, Moves: moves}, nil
}

// RemapStaticTopicToBrokers plans the remap of topic to brokers on the
// stored mapping and applies it as one change with a new epoch. maxOffsets
// gives, by logic queue, the max offset of each moving queue's open leader
// on its broker (where its sealed item ends); a moving queue without one,
// or an entry for a queue that does not move, is ErrInvalid. When ifEpoch is
// not 0 the stored mapping must still have that epoch (the one a dry run
// planned on), or the call fails with statictopic.ErrStaleEpoch. A topic
// already balanced on brokers is returned unchanged.
func (c *Coordinator) RemapStaticTopicToBrokers(ctx context.Context, topic, scope string, brokers []string,
	maxOffsets map[int32]int64, ifEpoch int64) (statictopic.Mapping, error) {
	sc, err := c.checkTopicScope(topic, scope)
	if err != nil {
		return statictopic.Mapping{}, err
	}
	brokers, maxOffsets = slices.Clone(brokers), maps.Clone(maxOffsets)
	var from int64                      // the epoch remapped, set by the writer
	var planned []statictopic.QueueMove // set by the writer
	m, err := c.changeMapping(ctx, topic, sc, func(stored *statictopic.Mapping, now int64) (statictopic.Mapping, error) {
		if stored == nil {
			return statictopic.Mapping{}, fmt.Errorf("%w: static topic %q in scope %q", ErrNotFound, topic, sc)
		}
		if ifEpoch != 0 && stored.Epoch != ifEpoch {
			return statictopic.Mapping{}, fmt.Errorf("%w: topic %q scope %q: planned on epoch %d, stored epoch is %d",
				statictopic.ErrStaleEpoch, topic, sc, ifEpoch, stored.Epoch)
		}
		moves, err := statictopic.PlanRemap(*stored, brokers)
		if err != nil {
			return statictopic.Mapping{}, err
		}
		if err := fillMaxOffsets(moves, maxOffsets); err != nil {
			return statictopic.Mapping{}, fmt.Errorf("topic %q scope %q: %w", topic, sc, err)
		}
		if len(moves) == 0 {
			return *stored, errNoChange
		}
		from, planned = stored.Epoch, moves
		return statictopic.Remap(*stored, moves, statictopic.NextEpoch(stored.Epoch, now), now)
	})
	if err == nil {
		c.logRemap(m, from, planned)
	}
	return m, err
}

// fillMaxOffsets sets the OldLeaderMaxOffset of every move that lacks one
// from maxOffsets, which must name the moving queues and only them.
func fillMaxOffsets(moves []statictopic.QueueMove, maxOffsets map[int32]int64) error {
	for i, mv := range moves {
		v, ok := maxOffsets[mv.QueueID]
		switch {
		case ok && mv.OldLeaderMaxOffset >= 0 && v != mv.OldLeaderMaxOffset:
			return fmt.Errorf("%w: queue %d: leader sealed at %d, max offset given %d", ErrInvalid, mv.QueueID, mv.OldLeaderMaxOffset, v)
		case ok:
			moves[i].OldLeaderMaxOffset = v
		case mv.OldLeaderMaxOffset < 0:
			return fmt.Errorf("%w: queue %d moves to %s: its old leader's max offset is needed", ErrInvalid, mv.QueueID, mv.ToBroker)
		}
	}
	for q := range maxOffsets {
		if !slices.ContainsFunc(moves, func(mv statictopic.QueueMove) bool { return mv.QueueID == q }) {
			return fmt.Errorf("%w: max offset given for queue %d, which does not move", ErrInvalid, q)
		}
	}
	return nil
}

// TrimStaticTopic drops the sealed items of topic whose logic range ends at
// or below below (statictopic.Trim), in queues (nil: every queue), as one
// change with a new epoch, and returns the stored mapping. While a consumer
// group's committed offset on a logic queue still reads one of those items
// (statictopic.CheckReaders) the trim fails with statictopic.ErrHistory and
// writes nothing, unless force is set (then logged and counted, see
// ForcedChanges). Nothing to drop
// returns the mapping unchanged.
//
// Committed offsets are read when the call starts: a group that commits an
// offset inside the trimmed range while the trim is under way is not seen.
// Offsets are keyed by topic and logic queue, not scope, so a topic name in
// several scopes is checked against all of its groups.
func (c *Coordinator) TrimStaticTopic(ctx context.Context, topic, scope string, queues []int32, below int64, force bool) (statictopic.Mapping, error) {
	sc, err := c.checkTopicScope(topic, scope)
	if err != nil {
		return statictopic.Mapping{}, err
	}
	committed, err := c.topicGroupOffsets(topic)
	if err != nil {
		return statictopic.Mapping{}, err
	}
	queues = slices.Clone(queues)
	dropped := 0 // items the trim drops, set by the writer
	m, err := c.changeMapping(ctx, topic, sc, func(stored *statictopic.Mapping, now int64) (statictopic.Mapping, error) {
		if stored == nil {
			return statictopic.Mapping{}, fmt.Errorf("%w: static topic %q in scope %q", ErrNotFound, topic, sc)
		}
		out, items, err := statictopic.Trim(*stored, queues, below, statictopic.NextEpoch(stored.Epoch, now))
		if err != nil {
			return statictopic.Mapping{}, err
		}
		if len(items) == 0 {
			return *stored, errNoChange
		}
		if err := c.checkForced(statictopic.CheckReaders(*stored, items, committed), force, out); err != nil {
			return statictopic.Mapping{}, err
		}
		dropped = len(items)
		return out, nil
	})
	if err == nil && dropped > 0 {
		c.opts.Logger.Info("static topic trimmed", "topic", m.Topic, "scope", m.Scope, "epoch", m.Epoch,
			"below", below, "items_dropped", dropped, "forced", force)
	}
	return m, err
}

// topicGroupOffsets returns every group's committed offset on topic, read
// from every partition.
func (c *Coordinator) topicGroupOffsets(topic string) ([]statictopic.GroupOffset, error) {
	var all []cache.GroupOffset
	for _, p := range c.parts {
		if err := c.readable(p); err != nil {
			return nil, err // a partition not loaded may hold a reader
		}
		all = p.offsets.Topic(topic, all)
	}
	out := make([]statictopic.GroupOffset, len(all))
	for i, g := range all {
		out[i] = statictopic.GroupOffset{Group: g.Group, QueueID: g.Partition, Offset: g.Offset}
	}
	return out, nil
}

// StaticTopicReaders returns, for every logic queue of topic in scope, its
// items and the consumer groups that still read each (statictopic.Readers):
// the view an operator checks before a trim.
func (c *Coordinator) StaticTopicReaders(topic, scope string) ([]statictopic.QueueReaders, error) {
	m, err := c.mustStaticTopic(topic, scope)
	if err != nil {
		return nil, err
	}
	committed, err := c.topicGroupOffsets(topic)
	if err != nil {
		return nil, err
	}
	return m.Readers(committed), nil
}

// WatchStaticTopic returns two channels: one closed at the next change of
// topic's mappings (in any scope), one at the next change of any global-read
// switch. A long poll of a mapping or route waits on them, then compares
// versions again. stop ends the watch; call it once done waiting.
func (c *Coordinator) WatchStaticTopic(topic string) (mappings, switches <-chan struct{}, stop func(), err error) {
	if err := validName("topic", topic); err != nil {
		return nil, nil, nil, err
	}
	p := c.topicPartition(topic)
	if err := c.readable(p); err != nil {
		return nil, nil, nil, err
	}
	switches = c.switched.Wait()
	mappings, stop = p.watchers.watchTopic(topic)
	return mappings, switches, stop, nil
}

// SetGlobalRead turns scope's disaster switch on or off. While it is on,
// consumers in every other scope also see this scope's logic queues of the
// same topics, to drain what it left unconsumed; producers still see only
// their own scope. The switch is a durable record, and logged.
//
// A scope that holds no static topic and whose switch is off fails with
// ErrNotFound: a misspelt scope would otherwise be switched on silently
// and stay so, waiting for a topic of that name. ForceSetGlobalRead sets
// it anyway. The check reads every partition's mappings before the switch
// is written, so a topic created meanwhile is not seen.
func (c *Coordinator) SetGlobalRead(ctx context.Context, scope string, enabled bool) error {
	return c.setGlobalRead(ctx, scope, enabled, false)
}

// ForceSetGlobalRead is SetGlobalRead without the check that scope holds a
// static topic: it prepares the switch of a scope whose topics are yet to
// come.
func (c *Coordinator) ForceSetGlobalRead(ctx context.Context, scope string, enabled bool) error {
	return c.setGlobalRead(ctx, scope, enabled, true)
}

func (c *Coordinator) setGlobalRead(ctx context.Context, scope string, enabled, force bool) error {
	sc, err := parseScope(scope)
	if err != nil {
		return err
	}
	if sc.IsGlobal() {
		return fmt.Errorf("%w: the global scope has no global-read switch", ErrInvalid)
	}
	p := c.topicPartition(sc.String())
	if err := c.readable(p); err != nil {
		return err
	}
	if !force && !p.switches.GlobalRead(sc.String()) {
		topics, err := c.scopeTopics(sc.String())
		if err != nil {
			return err
		}
		if topics == 0 {
			return fmt.Errorf("%w: scope %q holds no static topic (force sets its switch anyway)", ErrNotFound, sc)
		}
	}
	_, err = c.submit(ctx, p, &request{
		typ: recGlobalRead,
		build: func(_ *partition, dst []byte) ([]byte, any, error) {
			return encodeGlobalRead(dst, sc.String(), enabled), nil, nil
		},
	})
	if err == nil {
		level := slog.LevelInfo
		if enabled { // consumers of every scope now read this one's queues
			level = slog.LevelWarn
		}
		c.opts.Logger.Log(ctx, level, "static topic global read switched", "scope", sc.String(), "enabled", enabled, "forced", force)
	}
	return err
}

// scopeTopics counts the static topics of scope, reading every partition:
// one still loading may hold one.
func (c *Coordinator) scopeTopics(scope string) (int, error) {
	n := 0
	for _, p := range c.parts {
		if err := c.readable(p); err != nil {
			return 0, err
		}
		for _, m := range p.mappings.All(nil) {
			if m.Scope == scope {
				n++
			}
		}
	}
	return n, nil
}

// globalRead reports whether scope is in global read. Its switch lives in
// the partition its name hashes to.
func (c *Coordinator) globalRead(scope string) bool {
	return c.topicPartition(scope).switches.GlobalRead(scope)
}

// globalReadScopes returns every scope in global read, sorted.
func (c *Coordinator) globalReadScopes() []string {
	var out []string
	for _, p := range c.parts {
		if p.state.Load() == stateReady {
			out = p.switches.Scopes(out)
		}
	}
	slices.Sort(out)
	return out
}

// SwitchesVersion identifies the state of every global-read switch: it is a
// hash of the scopes in global read, so it changes whenever a switch does
// and is the same after a restart. Together with a route's epoch it tells a
// polling client whether its route may have changed.
func (c *Coordinator) SwitchesVersion() uint64 {
	d := xxhash.New()
	for _, s := range c.globalReadScopes() {
		d.WriteString(s)
		d.Write([]byte{0})
	}
	return d.Sum64()
}

// Scopes describes every scope that holds a static topic or has its
// global-read switch on, sorted by name.
func (c *Coordinator) Scopes() []ScopeInfo {
	byName := map[string]*ScopeInfo{}
	get := func(name string) *ScopeInfo {
		if s, ok := byName[name]; ok {
			return s
		}
		s := &ScopeInfo{Scope: name}
		if sc, err := statictopic.ParseScope(name); err == nil {
			s.BrokerName = sc.BrokerName()
		}
		byName[name] = s
		return s
	}
	for _, m := range c.StaticTopics() {
		get(m.Scope).Topics++
	}
	for _, name := range c.globalReadScopes() {
		get(name).GlobalRead = true
	}
	out := make([]ScopeInfo, 0, len(byName))
	for _, s := range byName {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b ScopeInfo) int { return cmp.Compare(a.Scope, b.Scope) })
	return out
}

// Translate returns where logicOffset of logic queue queueID lives: the
// broker, physical queue and physical offset of the mapping item whose logic
// range holds it. An offset outside every item's range fails with
// statictopic.ErrOutOfRange; when a later item exists (the offset lies in a
// gap between items, or before the first) the error is a
// *statictopic.GapError whose Next, read with statictopic.NextLogicOffset,
// is the next valid logic offset: the gap rule.
func (c *Coordinator) Translate(topic, scope string, queueID int32, logicOffset int64) (broker string, physicalQueue int32, physicalOffset int64, err error) {
	m, err := c.mustStaticTopic(topic, scope)
	if err != nil {
		return "", 0, 0, err
	}
	item, phys, err := m.ToPhysical(queueID, logicOffset)
	if err != nil {
		return "", 0, 0, err
	}
	return item.Broker, item.QueueID, phys, nil
}

// TranslateToLogic is the reverse of Translate: it returns the logic queue
// and logic offset of physicalOffset on broker's physical queue.
func (c *Coordinator) TranslateToLogic(topic, scope, broker string, physicalQueue int32, physicalOffset int64) (queueID int32, logicOffset int64, err error) {
	m, err := c.mustStaticTopic(topic, scope)
	if err != nil {
		return 0, 0, err
	}
	return m.ToLogic(broker, physicalQueue, physicalOffset)
}

func (c *Coordinator) mustStaticTopic(topic, scope string) (statictopic.Mapping, error) {
	sc, err := c.checkTopicScope(topic, scope)
	if err != nil {
		return statictopic.Mapping{}, err
	}
	p := c.topicPartition(topic)
	if err := c.readable(p); err != nil {
		return statictopic.Mapping{}, err
	}
	m, ok := p.mappings.Get(topic, sc.String())
	if !ok {
		return statictopic.Mapping{}, fmt.Errorf("%w: static topic %q in scope %q", ErrNotFound, topic, sc)
	}
	return m, nil
}
