package kafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupState is a classic group's state, named as Kafka names it.
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s groupState) String() string {
	switch s {
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	case stateDead:
		return "Dead"
	}
	return "Empty"
}

// group is the membership of one classic consumer group. Its generation
// is made durable when a rebalance starts it (for a group with offsets) and
// by the commits that carry it; everything else is rebuilt by the members
// rejoining.
type group struct {
	h    *Handler
	name string

	mu           sync.Mutex
	state        groupState         // guarded by mu
	generation   int32              // guarded by mu
	protocolType string             // guarded by mu
	protocol     string             // guarded by mu
	leader       string             // guarded by mu
	members      map[string]*member // guarded by mu
	static       map[string]string  // guarded by mu; instance id → member id
	pending      map[string]*timer  // guarded by mu; member ids handed out, awaiting the join that uses them
	pendingSync  map[string]bool    // guarded by mu; members yet to sync this generation
	joining      int                // guarded by mu; members waiting in JoinGroup
	rebalance    *timer             // guarded by mu
	syncDeadline *timer             // guarded by mu
	joins        uint64             // guarded by mu; orders members by first join

	// Writes in flight, started under mu and finished outside it.
	storing    bool                     // guarded by mu; the next generation is being stored
	commits    int                      // guarded by mu; commits fenced and being written
	committing map[string]int           // guarded by mu; the same, counted by topic
	ended      chan struct{}            // guarded by mu; closed when one of them ends, for awaitCommits
	deleting   map[string]chan struct{} // guarded by mu; see deletions.go

	// cg is the group's state on the consumer protocol (KIP-848),
	// consumer.go; nil for a classic group.
	cg *consumerGroup // guarded by mu
}

// msgSessionExpired is logged, with the group and member, when a member's
// session times out, after it has been removed.
const msgSessionExpired = "kafka group member session expired"

// msgWaitsForCommits is logged at debug level, with the group and the
// write ("generation" or "deletion"), when a write the group decided waits
// for the commits it fenced before.
const msgWaitsForCommits = "kafka group write waits for commits in flight"

// storeGenerationTimeout bounds the write of a new generation.
const storeGenerationTimeout = 10 * time.Second

// member is one member of a group.
type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocols        []kmsg.JoinGroupRequestProtocol
	assignment       []byte
	joinedAt         uint64

	join    *kmsg.JoinGroupRequest // the JoinGroup waiting for the rebalance, or nil
	joinCh  chan kmsg.Response
	sync    *kmsg.SyncGroupRequest // the SyncGroup waiting for the leader, or nil
	syncCh  chan kmsg.Response
	session *timer
}

// newGroup makes a group with no members. Its members' maps are made by
// its first JoinGroup (join): most groups the handler makes are only
// those of simple commits, forgotten once written, which need none.
func newGroup(h *Handler, name string) *group {
	return &group{h: h, name: name}
}

func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// joinGroup adds or updates a member and waits for the rebalance.
func (h *Handler) joinGroup(ctx context.Context, req *kmsg.JoinGroupRequest, from Client) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.MemberID = req.MemberID
	fail := func(c int16) (kmsg.Response, error) {
		resp.ErrorCode = c
		return resp, nil
	}
	if !validName(req.Group) {
		return fail(kerr.InvalidGroupID.Code)
	}
	if _, _, err := h.c.Group(req.Group); err != nil {
		return fail(code(err))
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < h.opts.MinSessionTimeout || session > h.opts.MaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if h.opts.Brokers != nil {
		// A node that has just taken the lead may not have applied
		// everything committed before: the generations another node
		// stored must be seen before this one hands out the next.
		if err := h.c.Barrier(ctx, req.Group); err != nil {
			return fail(code(err))
		}
	}
	for {
		var ch chan kmsg.Response
		var deleted <-chan struct{}
		h.inGroup(req.Group, true, func(g *group) {
			if deleted = g.deletionOf(); deleted == nil {
				ch = g.join(req, resp, from, session)
			}
		})
		if deleted != nil {
			if c := h.settled(ctx, deleted); c != 0 {
				return fail(c)
			}
			continue
		}
		if ch == nil {
			return resp, nil
		}
		return h.wait(ctx, req, ch)
	}
}

// join runs a JoinGroup under g.mu. It either fills resp and returns nil,
// or parks the request and returns the channel its answer will come on.
func (g *group) join(req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse, from Client, session time.Duration) chan kmsg.Response {
	if g.members == nil { // the group's first join: see newGroup
		g.members, g.static, g.pending = map[string]*member{}, map[string]string{}, map[string]*timer{}
	}
	if g.cg != nil {
		if len(g.cg.members) > 0 {
			resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
			return nil
		}
		g.cg = nil // an empty consumer group turns classic
	}
	if !g.protocolsMatch(req) {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return nil
	}
	if req.MemberID == "" {
		if req.InstanceID != nil {
			if old, ok := g.static[*req.InstanceID]; ok {
				return g.replaceStatic(old, req, resp, from, session)
			}
		}
		prefix := from.ID
		if req.InstanceID != nil {
			prefix = *req.InstanceID
		}
		m := g.newMember(newMemberID(prefix), req, from, session)
		resp.MemberID = m.id
		if req.InstanceID != nil {
			g.static[*req.InstanceID] = m.id
		} else if req.Version >= 4 {
			// KIP-394: a dynamic member must come back with the id it
			// was given, so that a client retrying a join it never saw
			// answered does not leave members behind.
			var tm *timer
			tm = g.h.timers.after(session, func() {
				g.mu.Lock()
				if g.pending[m.id] == tm {
					delete(g.pending, m.id)
					g.forgetIfUnused()
				}
				g.mu.Unlock()
			})
			g.pending[m.id] = tm
			resp.ErrorCode = kerr.MemberIDRequired.Code
			return nil
		}
		return g.addAndRebalance(m, req)
	}
	if c := g.checkInstance(req.InstanceID, req.MemberID); c != 0 {
		resp.ErrorCode = c
		return nil
	}
	if tm, ok := g.pending[req.MemberID]; ok {
		g.h.timers.cancel(tm)
		delete(g.pending, req.MemberID)
		return g.addAndRebalance(g.newMember(req.MemberID, req, from, session), req)
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return nil
	}
	switch g.state {
	case statePreparingRebalance:
		return g.updateAndRebalance(m, req, session)
	case stateCompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			g.fillJoin(m.id, resp)
			return nil
		}
		return g.updateAndRebalance(m, req, session)
	case stateStable:
		if g.leader != m.id && m.sameProtocols(req.Protocols) {
			g.fillJoin(m.id, resp)
			return nil
		}
		return g.updateAndRebalance(m, req, session)
	}
	resp.ErrorCode = kerr.UnknownMemberID.Code
	return nil
}

func (g *group) newMember(id string, req *kmsg.JoinGroupRequest, from Client, session time.Duration) *member {
	g.joins++
	m := &member{id: id, instanceID: req.InstanceID, clientID: from.ID, clientHost: from.Host, joinedAt: g.joins}
	m.setJoin(req, session)
	return m
}

// setJoin takes a member's protocols and timeouts from its JoinGroup.
func (m *member) setJoin(req *kmsg.JoinGroupRequest, session time.Duration) {
	m.sessionTimeout = session
	m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || m.rebalanceTimeout <= 0 {
		m.rebalanceTimeout = session
	}
	m.protocols = make([]kmsg.JoinGroupRequestProtocol, len(req.Protocols))
	for i, p := range req.Protocols {
		m.protocols[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
}

// replaceStatic hands a static member's instance id to a new member id
// (KIP-345), fencing the old one. A stable group whose protocols do not
// change skips the rebalance.
func (g *group) replaceStatic(oldID string, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse, from Client, session time.Duration) chan kmsg.Response {
	old, ok := g.members[oldID]
	m := g.newMember(newMemberID(*req.InstanceID), req, from, session)
	resp.MemberID = m.id
	if !ok { // the old member is gone: this is a fresh static join
		g.static[*req.InstanceID] = m.id
		return g.addAndRebalance(m, req)
	}
	m.assignment = old.assignment
	m.joinedAt = old.joinedAt
	g.answerParked(old, kerr.FencedInstanceID.Code)
	g.removeMember(old)
	g.static[*req.InstanceID] = m.id
	g.members[m.id] = m
	if g.leader == old.id {
		g.leader = m.id
	}
	if g.state == stateStable && old.sameProtocols(req.Protocols) {
		g.heartbeat(m)
		g.fillJoin(m.id, resp)
		if resp.LeaderID == m.id {
			resp.SkipAssignment = true
		}
		return nil
	}
	ch := m.park(req)
	g.joining++
	g.startRebalance()
	return ch
}

// answerParked answers a member's parked JoinGroup and SyncGroup with an
// error: it left, or its instance id went to another member.
func (g *group) answerParked(m *member, code int16) {
	if m.join != nil {
		r := m.join.ResponseKind().(*kmsg.JoinGroupResponse)
		r.ErrorCode = code
		m.joinCh <- r
		m.join, m.joinCh = nil, nil
		g.joining--
	}
	if m.sync != nil {
		r := m.sync.ResponseKind().(*kmsg.SyncGroupResponse)
		r.ErrorCode = code
		m.syncCh <- r
		m.sync, m.syncCh = nil, nil
	}
}

// park records m's JoinGroup as waiting and returns where its answer
// will come.
func (m *member) park(req *kmsg.JoinGroupRequest) chan kmsg.Response {
	m.join = req
	m.joinCh = make(chan kmsg.Response, 1)
	return m.joinCh
}

func (g *group) addAndRebalance(m *member, req *kmsg.JoinGroupRequest) chan kmsg.Response {
	g.members[m.id] = m
	if g.protocolType == "" || g.state == stateEmpty {
		g.protocolType = req.ProtocolType
	}
	ch := m.park(req)
	g.joining++
	g.startRebalance()
	return ch
}

func (g *group) updateAndRebalance(m *member, req *kmsg.JoinGroupRequest, session time.Duration) chan kmsg.Response {
	m.setJoin(req, session)
	if m.join != nil {
		// A second join replaces the first, which is answered now so
		// that nothing waits for an answer that will never come.
		r := m.join.ResponseKind().(*kmsg.JoinGroupResponse)
		r.ErrorCode = kerr.RebalanceInProgress.Code
		m.joinCh <- r
	} else {
		g.joining++
	}
	g.h.timers.cancel(m.session)
	m.session = nil
	ch := m.park(req)
	g.startRebalance()
	return ch
}

// protocolsMatch reports whether a joining member can be in the group:
// same protocol type, and a protocol every member supports.
func (g *group) protocolsMatch(req *kmsg.JoinGroupRequest) bool {
	if len(g.members) == 0 {
		return true
	}
	if req.ProtocolType != g.protocolType {
		return false
	}
	for _, p := range req.Protocols {
		if g.allSupport(p.Name, req.MemberID) {
			return true
		}
	}
	return false
}

// allSupport reports whether every member but except supports protocol.
func (g *group) allSupport(protocol, except string) bool {
	for _, m := range g.members {
		if m.id == except {
			continue
		}
		if !m.supports(protocol) {
			return false
		}
	}
	return true
}

func (m *member) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) sameProtocols(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || !bytes.Equal(ps[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// checkInstance fences a static member whose instance id now belongs to
// another member id.
func (g *group) checkInstance(instanceID *string, memberID string) int16 {
	if instanceID == nil {
		return 0
	}
	known, ok := g.static[*instanceID]
	switch {
	case !ok:
		return kerr.UnknownMemberID.Code
	case known != memberID:
		return kerr.FencedInstanceID.Code
	}
	return 0
}

// removeMember drops m without starting a rebalance.
func (g *group) removeMember(m *member) {
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	g.h.timers.cancel(m.session)
	m.session = nil
	if m.join != nil {
		g.joining--
	}
}

// heartbeat restarts m's session timer.
func (g *group) heartbeat(m *member) {
	g.h.timers.cancel(m.session)
	var tm *timer
	tm = g.h.timers.after(m.sessionTimeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.members[m.id] != m || m.session != tm {
			return // left, replaced or heard from since
		}
		g.removeMember(m)
		g.startRebalance()
		g.h.log.Info(msgSessionExpired, "group", g.name, "member", m.id)
	})
	m.session = tm
}

// maxRebalanceTimeout is how long a rebalance waits for the members.
func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// startRebalance moves the group to PreparingRebalance, and completes the
// rebalance at once if every member is already waiting in JoinGroup.
func (g *group) startRebalance() {
	if g.state == stateCompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.sync != nil {
				r := m.sync.ResponseKind().(*kmsg.SyncGroupResponse)
				r.ErrorCode = kerr.RebalanceInProgress.Code
				m.syncCh <- r
				m.sync, m.syncCh = nil, nil
			}
		}
	}
	g.state = statePreparingRebalance
	g.clearPendingSync()
	if g.joining >= len(g.members) {
		g.completeRebalance()
		return
	}
	g.h.timers.cancel(g.rebalance)
	gen := g.generation
	var tm *timer
	tm = g.h.timers.after(g.maxRebalanceTimeout(), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.rebalance == tm && g.generation == gen {
			g.completeRebalance()
		}
	})
	g.rebalance = tm
}

// completeRebalance drops the members that did not rejoin and starts the
// next generation: stored first, outside the group's lock, when the group
// has offsets or commits in flight (see storeGeneration); then
// finishRebalance answers the members. The group stays PreparingRebalance
// while its generation is stored: members may join or leave meanwhile, and
// commits are refused (fenceCommit), as Kafka refuses them once the
// members have joined.
func (g *group) completeRebalance() {
	if g.state != statePreparingRebalance || g.storing {
		return
	}
	g.h.timers.cancel(g.rebalance)
	g.rebalance = nil
	g.dropAbsent()
	next, stored := g.nextGeneration()
	if len(g.members) == 0 || !stored {
		g.finishRebalance(next)
		return
	}
	g.storing = true
	g.h.goWrite(func() {
		c := g.storeGeneration(next)
		g.mu.Lock()
		defer g.mu.Unlock()
		g.storing = false
		switch {
		case g.state != statePreparingRebalance:
			// Dropped meanwhile: nobody waits.
		case c != 0:
			// The members ask again; the rebalance goes on without
			// those that do not.
			for _, m := range g.members {
				g.answerParked(m, c)
			}
			g.startRebalance()
		default:
			g.dropAbsent()
			g.finishRebalance(next)
		}
	})
}

// dropAbsent removes the members that did not rejoin.
func (g *group) dropAbsent() {
	for _, m := range g.members {
		if m.join == nil {
			g.removeMember(m)
		}
	}
}

// finishRebalance starts generation next and answers every waiting
// JoinGroup; the leader gets the members and their metadata, so that it can
// assign.
func (g *group) finishRebalance(next int32) {
	g.h.timers.cancel(g.rebalance)
	g.rebalance = nil
	g.joining = 0
	g.generation = next
	if len(g.members) == 0 {
		g.state = stateEmpty
		g.protocol, g.leader = "", ""
		g.forgetIfUnused()
		return
	}
	g.state = stateCompletingRebalance
	g.protocol = g.vote()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = ""
		var first uint64
		for _, m := range g.members {
			if g.leader == "" || m.joinedAt < first {
				g.leader, first = m.id, m.joinedAt
			}
		}
	}
	g.pendingSync = make(map[string]bool, len(g.members))
	for _, m := range g.members {
		g.pendingSync[m.id] = true
		resp := m.join.ResponseKind().(*kmsg.JoinGroupResponse)
		g.fillJoin(m.id, resp)
		m.joinCh <- resp
		m.join, m.joinCh = nil, nil
		g.heartbeat(m)
	}
	gen := g.generation
	var tm *timer
	tm = g.h.timers.after(g.maxRebalanceTimeout(), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.syncDeadline != tm || g.generation != gen || len(g.pendingSync) == 0 {
			return
		}
		for id := range g.pendingSync {
			if m := g.members[id]; m != nil {
				g.removeMember(m)
			}
		}
		g.startRebalance()
	})
	g.syncDeadline = tm
}

// forgetIfUnused drops, soon after, a group left with neither members nor
// offsets, as Kafka drops such a group, so that groups that come and go
// without committing do not pile up in memory. It runs on the timer
// goroutine, which takes the handler's lock before the group's.
func (g *group) forgetIfUnused() {
	g.h.timers.after(0, func() {
		g.h.mu.Lock()
		defer g.h.mu.Unlock()
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.empty() || len(g.members) > 0 || len(g.pending) > 0 || g.h.groups[g.name] != g ||
			g.storing || g.commits > 0 || len(g.deleting) > 0 {
			return
		}
		if _, hasOffsets, err := g.h.c.Group(g.name); err != nil || hasOffsets {
			return
		}
		g.state = stateDead
		delete(g.h.groups, g.name)
	})
}

// blank reports whether the group holds nothing the coordinator does not:
// it never had a member and has no write in flight, as a group made only
// to count a simple commit while it was written. g.mu is held.
func (g *group) blank() bool {
	return g.state == stateEmpty && g.cg == nil && g.joins == 0 && g.generation == 0 &&
		len(g.members) == 0 && len(g.pending) == 0 && !g.storing && g.commits == 0 && len(g.deleting) == 0
}

// forgetBlank drops g if it is still blank (see blank). It takes the
// handler's lock, then the group's, as inGroup does, and runs in the
// request, so a simple commit leaves nothing behind and schedules no timer.
func (h *Handler) forgetBlank(g *group) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if h.groups[g.name] == g && g.blank() {
		g.state = stateDead
		delete(h.groups, g.name)
	}
}

// empty reports whether the group has no members on either protocol.
func (g *group) empty() bool {
	return g.state == stateEmpty && (g.cg == nil || len(g.cg.members) == 0)
}

// nextGeneration is above the group's last generation in memory and above
// every generation made durable, so that members from before a restart are
// fenced. stored reports whether the group has offsets, or a commit in
// flight (a member's or a simple one) that may give it some, and so keeps
// its generation.
func (g *group) nextGeneration() (next int32, stored bool) {
	next = g.generation + 1
	info, ok, err := g.h.c.Group(g.name)
	if err == nil && ok && info.Generation >= next {
		next = info.Generation + 1
	}
	return max(next, 1), err == nil && (ok || g.commits > 0)
}

// storeGeneration makes gen durable before any member learns it, as Kafka
// stores a group before it answers the members: a coordinator that restarts
// or takes over then starts above it, and no two memberships share a
// generation. Cooperative clients rely on that: a member rejoins claiming
// its partitions at the generation it last joined, and the claim at the
// higher generation wins. It runs outside g.mu, on a goroutine of its own.
//
// It first waits for the commits fenced before the rebalance completed
// (g.storing refuses new ones), as Kafka appends a group's record after
// the commits accepted before it. A commit written after the generation
// would be refused as stale if the group had offsets; but a group's first
// commit would be taken, and the generation, stored while the group had no
// offsets, would keep nothing: after a restart the next membership would
// get it again. Waiting here holds up no heartbeat or timer.
func (g *group) storeGeneration(gen int32) int16 {
	ctx, cancel := context.WithTimeout(g.h.ctx, storeGenerationTimeout)
	defer cancel()
	err := g.awaitCommits(ctx, "generation", func() bool { return g.commits > 0 })
	if err == nil {
		err = g.h.c.StoreGeneration(ctx, g.name, gen)
	}
	if err != nil {
		g.h.log.Warn("kafka group generation not stored", "group", g.name, "generation", gen, "err", err)
	}
	return code(err)
}

// startCommit notes a commit of topics, fenced and about to be written.
// g.mu is held.
func (g *group) startCommit(topics []string) {
	g.commits++
	if g.committing == nil {
		g.committing = map[string]int{}
	}
	for _, t := range topics {
		g.committing[t]++
	}
}

// endCommit ends a commit noted by startCommit, waking the writes that
// wait for it. g.mu is held.
func (g *group) endCommit(topics []string) {
	g.commits--
	for _, t := range topics {
		if g.committing[t]--; g.committing[t] == 0 {
			delete(g.committing, t)
		}
	}
	if g.ended != nil {
		close(g.ended)
		g.ended = nil
	}
}

// awaitCommits waits, outside g.mu, until inFlight (called under g.mu)
// reports no commit that write must follow. The commits it waits for were
// fenced before write was decided, and the group keeps new ones from
// joining them (g.storing, g.deleting), so the wait ends.
func (g *group) awaitCommits(ctx context.Context, write string, inFlight func() bool) error {
	logged := false
	for {
		g.mu.Lock()
		if !inFlight() {
			g.mu.Unlock()
			return nil
		}
		if g.ended == nil {
			g.ended = make(chan struct{})
		}
		ended := g.ended
		g.mu.Unlock()
		if !logged {
			g.h.log.Debug(msgWaitsForCommits, "group", g.name, "write", write)
			logged = true
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// vote picks the protocol: each member votes for its most preferred
// protocol among those every member supports; the most votes win, ties
// going to the leader's preference order.
func (g *group) vote() string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.allSupport(p.Name, "") {
				votes[p.Name]++
				break
			}
		}
	}
	best, most := "", 0
	var first *member
	for _, m := range g.members {
		if first == nil || m.joinedAt < first.joinedAt {
			first = m
		}
	}
	for _, p := range first.protocols { // a stable order for ties
		if v := votes[p.Name]; v > most {
			best, most = p.Name, v
		}
	}
	return best
}

func (g *group) clearPendingSync() {
	g.pendingSync = nil
	g.h.timers.cancel(g.syncDeadline)
	g.syncDeadline = nil
}

// fillJoin answers a JoinGroup with the current generation.
func (g *group) fillJoin(memberID string, resp *kmsg.JoinGroupResponse) {
	resp.Generation = g.generation
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.LeaderID = g.leader
	resp.MemberID = memberID
	if memberID != g.leader {
		return
	}
	for _, m := range g.members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.id, m.instanceID, m.metadata(g.protocol)
		resp.Members = append(resp.Members, rm)
	}
}
