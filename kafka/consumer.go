package kafka

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
)

// A consumer group (KIP-848, group.protocol=consumer) is assigned by the
// coordinator: members heartbeat their subscriptions and the partitions
// they own, and the coordinator answers each with its next assignment.
// There is no rebalance barrier: each member moves towards the group's
// target assignment on its own, giving up partitions before others get
// them.
//
//   - The group epoch grows with every change of membership, subscriptions
//     or partition counts; the target assignment is computed by the
//     group's assignor (uniform or range) at the group epoch, its
//     assignment epoch.
//   - A member's epoch moves to the assignment epoch once it owns nothing
//     the target takes away: a member asked to revoke keeps its epoch until
//     a heartbeat shows it no longer owns those partitions, and is fenced
//     when its rebalance timeout passes first. A partition goes to its new
//     member only once its previous member released it (UNRELEASED).
//   - Requests carry the member's epoch: a heartbeat at an epoch the member
//     no longer has is FENCED_MEMBER_EPOCH (the previous epoch is accepted
//     when the owned partitions show the answer to it was lost), a commit
//     at another epoch STALE_MEMBER_EPOCH.
//
// Membership and epochs live in memory, as a classic group's membership
// does: after a restart, or when the group's coordinator moves, members
// are UNKNOWN_MEMBER_ID and join again, under new member ids.
//
// A group runs one protocol at a time, as Kafka's
// group.consumer.migration.policy=disabled has it for groups with members:
// a JoinGroup to a consumer group with members is
// INCONSISTENT_GROUP_PROTOCOL and a ConsumerGroupHeartbeat to a classic
// group with members GROUP_ID_NOT_FOUND; an empty group takes the protocol
// of the first member that joins, as every Kafka policy converts an empty
// group.

// consumerMemberState is where a member is on its way to the target.
type consumerMemberState int8

const (
	memberStable     consumerMemberState = iota
	memberUnrevoked                      // must give up partitions before its epoch moves
	memberUnreleased                     // waits for partitions others still own
)

// consumerGroup is the state of a group on the consumer protocol. It is
// guarded by its group's mu.
type consumerGroup struct {
	epoch       int32
	targetEpoch int32
	assignor    string
	target      map[string]partitionsOf // by member id
	members     map[string]*consumerMember
	static      map[string]string    // instance id → member id
	owner       map[topicPart]string // partition → the member that owns it, or is revoking it
	sizes       map[string]int32     // partition counts the target was computed with
	missing     map[string]bool      // subscribed topics that did not exist then
	names       map[[16]byte]string  // topic ids seen → names
	ids         map[string][16]byte  // topic names → ids
}

type topicPart struct {
	topic string
	p     int32
}

// consumerMember is one member of a consumer group.
type consumerMember struct {
	id, clientID, clientHost string
	instanceID, rackID       *string
	epoch, previousEpoch     int32
	state                    consumerMemberState
	assigned, revoking       partitionsOf
	assignedAt               map[topicPart]int32 // the epoch each assigned partition came at (KIP-1251)
	subscribed               []string            // sorted: the names, and the topics the regex matched
	names                    []string            // sorted: the names the member subscribed to
	regex                    *regexp.Regexp      // the member's subscription by regular expression, or nil
	assignor                 string
	rebalanceTimeout         time.Duration
	session, revocation      *timer
	sent                     bool // the current assignment was sent
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members: map[string]*consumerMember{},
		static:  map[string]string{},
		owner:   map[topicPart]string{},
		target:  map[string]partitionsOf{},
		sizes:   map[string]int32{},
		names:   map[[16]byte]string{},
		ids:     map[string][16]byte{},
	}
}

// consumerGroupHeartbeat answers a member of a consumer group.
func (h *Handler) consumerGroupHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, from Client) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(e *kerr.Error, msg string) kmsg.Response {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	if !validName(req.Group) {
		return fail(kerr.InvalidGroupID, "")
	}
	if _, _, err := h.c.Group(req.Group); err != nil {
		resp.ErrorCode = code(err)
		return resp
	}
	switch {
	case req.MemberEpoch < -2:
		return fail(kerr.InvalidRequest, "member epoch below -2")
	case req.MemberEpoch == 0 && req.Version >= 1 && req.MemberID == "":
		return fail(kerr.InvalidRequest, "a member joining at version 1 or above names its member id")
	case req.MemberEpoch == 0 && req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
		return fail(kerr.InvalidRequest, "a joining member subscribes")
	case req.MemberEpoch == 0 && req.RebalanceTimeoutMillis < 0:
		return fail(kerr.InvalidRequest, "a joining member gives its rebalance timeout")
	case req.MemberEpoch == 0 && len(req.Topics) > 0:
		return fail(kerr.InvalidRequest, "a joining member owns no partitions")
	case req.MemberEpoch != 0 && req.MemberID == "":
		return fail(kerr.InvalidRequest, "member id missing")
	case req.ServerAssignor != nil && !slices.Contains(assignors, *req.ServerAssignor):
		return fail(kerr.UnsupportedAssignor, "offsetd assigns with uniform or range")
	}
	h.inGroup(req.Group, true, func(g *group) {
		if len(g.members) > 0 || g.state != stateEmpty {
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			resp.ErrorMessage = kmsg.StringPtr("the group is a classic group with members")
			return
		}
		if g.cg == nil {
			g.cg = newConsumerGroup()
		}
		g.consumerHeartbeat(req, resp, from)
	})
	return resp
}

// consumerHeartbeat runs one heartbeat under g.mu.
func (g *group) consumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse, from Client) {
	cg := g.cg
	if req.MemberEpoch < 0 {
		g.consumerLeave(req, resp)
		return
	}
	m, static, c := g.consumerMember(req, from)
	if c != 0 {
		resp.ErrorCode = c
		return
	}
	if req.MemberEpoch > 0 && req.MemberEpoch != m.epoch {
		if req.MemberEpoch != m.previousEpoch || !g.ownsOnly(m, req.Topics) {
			resp.ErrorCode = kerr.FencedMemberEpoch.Code
			return
		}
	}
	changed := req.MemberEpoch == 0 && !static // a static member's return changes nothing
	if req.SubscribedTopicNames != nil {
		m.names = slices.Clone(req.SubscribedTopicNames)
		slices.Sort(m.names)
		m.names = slices.Compact(m.names)
	}
	if req.SubscribedTopicRegex != nil && (m.regex == nil || m.regex.String() != anchored(*req.SubscribedTopicRegex)) {
		re, err := regexp.Compile(anchored(*req.SubscribedTopicRegex))
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
			return
		}
		m.regex = re
	}
	if subs := g.subscriptionOf(m); !slices.Equal(subs, m.subscribed) {
		m.subscribed, changed = subs, true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor, changed = *req.ServerAssignor, true
	}
	if req.RebalanceTimeoutMillis >= 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	if changed || g.topicsChanged() {
		cg.epoch++
	}
	if cg.epoch > cg.targetEpoch {
		g.computeTarget()
	}
	owned := g.ownedOf(req.Topics)
	if req.MemberEpoch == 0 {
		owned = partitionsOf{} // a member that joins owns nothing
	}
	before := m.assigned
	g.reconcile(m, owned)
	g.consumerSession(m)
	resp.MemberID = kmsg.StringPtr(m.id)
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(g.h.opts.ConsumerHeartbeatInterval.Milliseconds())
	// As Kafka, the assignment goes with an answer that changes it, and
	// with every answer to a full request (a join, or one that carries
	// every field, as a client sends after an error).
	full := req.MemberEpoch == 0 || req.RebalanceTimeoutMillis != -1 && req.SubscribedTopicNames != nil && req.Topics != nil
	if !m.sent || full || !samePartitions(before, m.assigned) {
		resp.Assignment = g.assignmentOf(m.assigned)
		m.sent = true
	}
}

// anchored makes a subscription's regular expression match whole topic
// names, as Kafka matches it (RE2 syntax, as Kafka's RE2/J).
func anchored(re string) string { return "^(?:" + re + ")$" }

// subscriptionOf returns the topics m subscribes to: its names, and the
// topics its regular expression matches now, sorted. A member that
// subscribes by regular expression is resolved again at each heartbeat, so
// that a topic created since joins its subscription.
func (g *group) subscriptionOf(m *consumerMember) []string {
	if m.regex == nil {
		return m.names
	}
	subs := slices.Clone(m.names)
	for _, t := range g.h.opts.Topics.Names() {
		if m.regex.MatchString(t) {
			subs = append(subs, t)
		}
	}
	slices.Sort(subs)
	return slices.Compact(subs)
}

// consumerMember returns the member a heartbeat comes from, making it when
// it joins, or the code that refuses the heartbeat. static reports a
// static member that came back in the place it left.
func (g *group) consumerMember(req *kmsg.ConsumerGroupHeartbeatRequest, from Client) (m *consumerMember, static bool, c int16) {
	cg := g.cg
	m = cg.members[req.MemberID]
	if req.MemberEpoch > 0 {
		if m == nil {
			return nil, false, kerr.UnknownMemberID.Code
		}
		if req.InstanceID != nil && cg.static[*req.InstanceID] != m.id {
			return nil, false, kerr.FencedInstanceID.Code
		}
		return m, false, 0
	}
	id := req.MemberID
	if id == "" {
		id = newMemberID(from.ID)
	}
	if req.InstanceID != nil {
		if holder, ok := cg.static[*req.InstanceID]; ok && holder != id {
			old := cg.members[holder]
			if old.epoch != -2 {
				return nil, false, kerr.UnreleasedInstanceID.Code
			}
			// The static member comes back under a new member id: it
			// takes the place, epoch and partitions of the one that
			// left for a while (KIP-345), without a new epoch.
			m = &consumerMember{
				id: id, instanceID: req.InstanceID, clientID: from.ID, clientHost: from.Host,
				epoch: old.previousEpoch, previousEpoch: old.previousEpoch,
				assigned: old.assigned, assignedAt: old.assignedAt, revoking: partitionsOf{}, subscribed: old.subscribed, assignor: old.assignor,
				names: old.names, regex: old.regex,
				rebalanceTimeout: old.rebalanceTimeout,
			}
			g.release(old)
			g.h.timers.cancel(old.session)
			g.h.timers.cancel(old.revocation)
			delete(cg.members, old.id)
			cg.members[id] = m
			cg.static[*req.InstanceID] = id
			cg.target[id] = cg.target[old.id]
			delete(cg.target, old.id)
			g.own(m)
			return m, true, 0
		}
	}
	if m != nil {
		// A member that joins again owns nothing any more.
		g.release(m)
		m.assigned, m.revoking, m.state, m.assignedAt = partitionsOf{}, partitionsOf{}, memberStable, nil
		m.epoch, m.previousEpoch = 0, 0
		m.sent = false
		return m, false, 0
	}
	m = &consumerMember{
		id: id, instanceID: req.InstanceID, rackID: req.RackID, clientID: from.ID, clientHost: from.Host,
		assigned: partitionsOf{}, revoking: partitionsOf{},
	}
	g.cg.members[id] = m
	if req.InstanceID != nil {
		g.cg.static[*req.InstanceID] = id
	}
	return m, false, 0
}

// consumerLeave takes a member out (epoch -1), or a static member out for
// a while, keeping its partitions for its return (epoch -2).
func (g *group) consumerLeave(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	cg := g.cg
	id := req.MemberID
	if req.InstanceID != nil {
		if holder, ok := cg.static[*req.InstanceID]; ok {
			if holder != id {
				resp.ErrorCode = kerr.FencedInstanceID.Code
				return
			}
		}
	}
	m := cg.members[id]
	if m == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return
	}
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(id), req.MemberEpoch
	if req.MemberEpoch == -2 && m.instanceID != nil {
		m.previousEpoch, m.epoch = m.epoch, -2
		g.h.timers.cancel(m.revocation)
		m.revocation = nil
		g.consumerSession(m)
		return
	}
	g.removeConsumer(m)
}

// removeConsumer drops m, releasing its partitions, and starts a new
// group epoch.
func (g *group) removeConsumer(m *consumerMember) {
	cg := g.cg
	g.release(m)
	g.h.timers.cancel(m.session)
	g.h.timers.cancel(m.revocation)
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
	cg.epoch++
	if len(cg.members) == 0 {
		g.forgetIfUnused()
	}
}

// consumerSession restarts m's session timer: a member not heard from
// within the session timeout is removed, as one that left.
func (g *group) consumerSession(m *consumerMember) {
	g.h.timers.cancel(m.session)
	var tm *timer
	tm = g.h.timers.after(g.h.opts.ConsumerSessionTimeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.cg == nil || g.cg.members[m.id] != m || m.session != tm {
			return
		}
		g.removeConsumer(m)
		g.h.log.Info(msgSessionExpired, "group", g.name, "member", m.id)
	})
	m.session = tm
}

// topicsChanged reports whether a topic the target was computed with has
// another partition count now, or is gone, or a subscribed topic that did
// not exist then does now. It asks Topics once per topic the group
// subscribes to, not once per member.
func (g *group) topicsChanged() bool {
	for t, n := range g.cg.sizes {
		if _, now, ok := g.h.opts.Topics.Topic(t); !ok || now != n {
			return true
		}
	}
	for t := range g.cg.missing {
		if _, n, ok := g.h.opts.Topics.Topic(t); ok && n > 0 {
			return true
		}
	}
	return false
}

// subscribedSizes returns the partition counts of the topics the members
// subscribe to that exist, and notes those that do not in cg.missing.
func (g *group) subscribedSizes() map[string]int32 {
	sizes := map[string]int32{}
	g.cg.missing = map[string]bool{}
	for _, m := range g.cg.members {
		for _, t := range m.subscribed {
			if _, seen := sizes[t]; seen || g.cg.missing[t] {
				continue
			}
			if id, n, ok := g.h.opts.Topics.Topic(t); ok && n > 0 {
				sizes[t] = n
				g.cg.names[id], g.cg.ids[t] = t, id
			} else {
				g.cg.missing[t] = true
			}
		}
	}
	return sizes
}

// computeTarget computes the target assignment at the group epoch.
func (g *group) computeTarget() {
	cg := g.cg
	cg.sizes = g.subscribedSizes()
	cg.assignor = g.pickAssignor()
	members := make([]assignee, 0, len(cg.members))
	for _, m := range cg.members {
		members = append(members, assignee{id: m.id, subscribed: m.subscribed, previous: cg.target[m.id]})
	}
	cg.target = assign(cg.assignor, members, cg.sizes)
	cg.targetEpoch = cg.epoch
}

// pickAssignor is the assignor most members ask for; ties and members
// that ask for none go to the default order (uniform, then range).
func (g *group) pickAssignor() string {
	votes := map[string]int{}
	for _, m := range g.cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := assignors[0]
	for _, a := range assignors {
		if votes[a] > votes[best] {
			best = a
		}
	}
	return best
}

// reconcile moves m towards its target, given the partitions it says it
// owns (nil: as before), as Kafka's CurrentAssignmentBuilder does.
func (g *group) reconcile(m *consumerMember, owned partitionsOf) {
	cg := g.cg
	switch m.state {
	case memberUnrevoked:
		if owned == nil || overlaps(owned, m.revoking) {
			return // still revoking
		}
	case memberStable:
		if m.epoch == cg.targetEpoch {
			return
		}
	}
	g.release(m)
	target := cg.target[m.id]
	keep, revoke, gain := partitionsOf{}, partitionsOf{}, partitionsOf{}
	unreleased := false
	for t, ps := range m.assigned {
		for _, p := range ps {
			if slices.Contains(target[t], p) {
				keep[t] = append(keep[t], p)
			} else {
				revoke[t] = append(revoke[t], p)
			}
		}
	}
	for t, ps := range target {
		for _, p := range ps {
			if slices.Contains(m.assigned[t], p) {
				continue
			}
			if _, taken := cg.owner[topicPart{t, p}]; taken {
				unreleased = true
				continue
			}
			gain[t] = append(gain[t], p)
		}
	}
	switch {
	case len(revoke) > 0:
		m.state, m.assigned, m.revoking = memberUnrevoked, keep, revoke
		g.revocationDeadline(m)
	default:
		for t, ps := range gain {
			keep[t] = append(keep[t], ps...)
			slices.Sort(keep[t])
		}
		m.assigned, m.revoking = keep, partitionsOf{}
		m.state = memberStable
		if unreleased {
			m.state = memberUnreleased
		}
		if m.epoch != cg.targetEpoch {
			m.previousEpoch, m.epoch = m.epoch, cg.targetEpoch
		}
		at := make(map[topicPart]int32, len(m.assignedAt))
		for t, ps := range m.assigned {
			for _, p := range ps {
				tp := topicPart{t, p}
				if e, ok := m.assignedAt[tp]; ok {
					at[tp] = e
				} else {
					at[tp] = m.epoch
				}
			}
		}
		m.assignedAt = at
		g.h.timers.cancel(m.revocation)
		m.revocation = nil
	}
	g.own(m)
}

// msgRevocationTimeout is logged, with the group and member, when a
// member is fenced for not revoking within its rebalance timeout.
const msgRevocationTimeout = "kafka consumer group member fenced: it did not revoke within its rebalance timeout"

// revocationDeadline fences m if it still revokes once its rebalance
// timeout has passed, so that the partitions it holds go on.
func (g *group) revocationDeadline(m *consumerMember) {
	g.h.timers.cancel(m.revocation)
	epoch := m.epoch
	var tm *timer
	tm = g.h.timers.after(m.rebalanceTimeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.cg == nil || g.cg.members[m.id] != m || m.revocation != tm || m.state != memberUnrevoked || m.epoch != epoch {
			return
		}
		g.removeConsumer(m)
		g.h.log.Info(msgRevocationTimeout, "group", g.name, "member", m.id)
	})
	m.revocation = tm
}

// own records m's partitions as owned by it; release forgets them.
func (g *group) own(m *consumerMember) {
	for _, a := range []partitionsOf{m.assigned, m.revoking} {
		for t, ps := range a {
			for _, p := range ps {
				g.cg.owner[topicPart{t, p}] = m.id
			}
		}
	}
}

func (g *group) release(m *consumerMember) {
	for _, a := range []partitionsOf{m.assigned, m.revoking} {
		for t, ps := range a {
			for _, p := range ps {
				if g.cg.owner[topicPart{t, p}] == m.id {
					delete(g.cg.owner, topicPart{t, p})
				}
			}
		}
	}
}

// ownedOf converts the partitions a heartbeat says it owns; nil stays nil
// (unchanged). Topics the group does not know are left out.
func (g *group) ownedOf(topics []kmsg.ConsumerGroupHeartbeatRequestTopic) partitionsOf {
	if topics == nil {
		return nil
	}
	out := partitionsOf{}
	for _, t := range topics {
		if name, ok := g.cg.names[t.TopicID]; ok {
			out[name] = append(out[name], t.Partitions...)
		}
	}
	return out
}

// ownsOnly reports whether the partitions a heartbeat says it owns are all
// assigned to m (nil: nothing said).
func (g *group) ownsOnly(m *consumerMember, topics []kmsg.ConsumerGroupHeartbeatRequestTopic) bool {
	for t, ps := range g.ownedOf(topics) {
		for _, p := range ps {
			if !slices.Contains(m.assigned[t], p) {
				return false
			}
		}
	}
	return true
}

func overlaps(a, b partitionsOf) bool {
	for t, ps := range a {
		for _, p := range ps {
			if slices.Contains(b[t], p) {
				return true
			}
		}
	}
	return false
}

func samePartitions(a, b partitionsOf) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]int32])
}

// assignmentOf is a heartbeat answer's assignment, by topic id.
func (g *group) assignmentOf(a partitionsOf) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	out.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, t := range slices.Sorted(maps.Keys(a)) {
		if len(a[t]) == 0 {
			continue
		}
		rt := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		rt.TopicID, rt.Partitions = g.cg.ids[t], slices.Clone(a[t])
		out.Topics = append(out.Topics, rt)
	}
	return &out
}

// consumerState is Kafka's name of a consumer group's state.
func (cg *consumerGroup) state() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.epoch > cg.targetEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.targetEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// fenceConsumerCommit checks an OffsetCommit against a consumer group: a
// group without members takes simple commits; otherwise the commit comes
// from a member, over OffsetCommit v9 or above (a transactional commit,
// txn, over any version), at an epoch no later than its own and, for each
// partition assigned to it, no earlier than the epoch the partition came
// at (KIP-1251: a commit sent just before the member's epoch moved still
// lands). One partition refused refuses the commit.
func (g *group) fenceConsumerCommit(version int16, memberID string, epoch int32, offsets []coordinator.OffsetCommit, txn bool) int16 {
	cg := g.cg
	if len(cg.members) == 0 {
		if epoch >= 0 {
			return kerr.UnknownMemberID.Code
		}
		return 0
	}
	m := cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case version < 9 && !txn:
		return kerr.UnsupportedVersion.Code
	case epoch > m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	for _, o := range offsets {
		if at, ok := m.assignedAt[topicPart{o.Topic, o.Partition}]; ok && epoch < at {
			return kerr.StaleMemberEpoch.Code
		}
	}
	return 0
}

// fenceConsumerFetch checks an OffsetFetch that names a member (v9+): it
// must be a member at its current epoch.
func (g *group) fenceConsumerFetch(memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	var m *consumerMember
	if g.cg != nil && memberID != nil {
		m = g.cg.members[*memberID]
	}
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// subscribed reports whether a member subscribes to topic.
func (cg *consumerGroup) subscribed(topic string) bool {
	for _, m := range cg.members {
		if slices.Contains(m.subscribed, topic) {
			return true
		}
	}
	return false
}

// consumerGroupDescribe describes consumer groups: their epochs, assignor
// and members with their current and target assignments.
func (h *Handler) consumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group = name
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = allGroupOperations
		}
		if rg.ErrorCode = h.describable(name); rg.ErrorCode == 0 {
			rg.ErrorCode = kerr.GroupIDNotFound.Code
			h.inGroup(name, false, func(g *group) {
				if g.cg != nil {
					rg.ErrorCode = 0
					g.describeConsumer(&rg)
				}
			})
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (g *group) describeConsumer(rg *kmsg.ConsumerGroupDescribeResponseGroup) {
	cg := g.cg
	rg.State, rg.Epoch, rg.AssignmentEpoch = cg.state(), cg.epoch, cg.targetEpoch
	rg.AssignorName = cg.assignor
	if rg.AssignorName == "" {
		rg.AssignorName = assignors[0]
	}
	for _, id := range slices.Sorted(maps.Keys(cg.members)) {
		m := cg.members[id]
		rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		rm.MemberID, rm.InstanceID, rm.RackID, rm.MemberEpoch = m.id, m.instanceID, m.rackID, m.epoch
		rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
		rm.SubscribedTopics = slices.Clone(m.names)
		if m.regex != nil {
			re := strings.TrimSuffix(strings.TrimPrefix(m.regex.String(), "^(?:"), ")$")
			rm.SubscribedTopicRegex = &re
		}
		rm.Assignment = g.describedAssignment(m.assigned)
		rm.TargetAssignment = g.describedAssignment(cg.target[m.id])
		rg.Members = append(rg.Members, rm)
	}
}

func (g *group) describedAssignment(a partitionsOf) kmsg.Assignment {
	out := kmsg.NewAssignment()
	for _, t := range slices.Sorted(maps.Keys(a)) {
		if len(a[t]) == 0 {
			continue
		}
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = g.cg.ids[t], t, slices.Clone(a[t])
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	return out
}
