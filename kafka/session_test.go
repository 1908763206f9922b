package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
)

// groupClient drives a Handler directly, as an embedding broker does.
type groupClient struct {
	t *testing.T
	h *Handler
}

func (gc groupClient) do(req kmsg.Request) kmsg.Response {
	gc.t.Helper()
	resp, err := gc.h.Handle(context.Background(), req, Client{ID: "test", Host: "127.0.0.1"})
	if err != nil {
		gc.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// join joins group as a new dynamic member (the two-step KIP-394 join) and
// returns the answer of the second step.
func (gc groupClient) join(group string, session, rebalance time.Duration) *kmsg.JoinGroupResponse {
	gc.t.Helper()
	req := gc.joinRequest(group, "", nil, session, rebalance)
	first := gc.do(req).(*kmsg.JoinGroupResponse)
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		gc.t.Fatalf("first join: code %d, want MEMBER_ID_REQUIRED", first.ErrorCode)
	}
	req.MemberID = first.MemberID
	return gc.do(req).(*kmsg.JoinGroupResponse)
}

func (gc groupClient) joinRequest(group, member string, instance *string, session, rebalance time.Duration) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group, req.MemberID, req.InstanceID = group, member, instance
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = int32(session.Milliseconds()), int32(rebalance.Milliseconds())
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("meta")}}
	return req
}

func (gc groupClient) sync(group, member string, generation int32, instance *string) *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, member, generation, instance
	req.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte("assignment")}}
	return gc.do(req).(*kmsg.SyncGroupResponse)
}

func (gc groupClient) commit(group, member string, generation int32, instance *string) int16 {
	req := commitRequest(group)
	req.Version = 9
	req.MemberID, req.Generation, req.InstanceID = member, generation, instance
	return gc.do(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func (gc groupClient) heartbeat(group, member string, generation int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = group, member, generation
	return gc.do(req).(*kmsg.HeartbeatResponse).ErrorCode
}

func (gc groupClient) state(group string) string {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	return gc.do(req).(*kmsg.DescribeGroupsResponse).Groups[0].State
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var code int16
	if want != nil {
		code = want.Code
	}
	if got != code {
		t.Errorf("%s: code %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// A member that stops heartbeating is removed after its session timeout,
// by the one timer goroutine.
func TestSessionExpiry(t *testing.T) {
	c := openCoordinator(t, t.TempDir())
	o := testHandlerOptions()
	expired := make(chan string, 1)
	o.Logger = slog.New(logged{msg: msgSessionExpired, key: "member", to: expired})
	gc := groupClient{t, newHandler(t, c, o)}

	j := gc.join("g", 50*time.Millisecond, time.Second)
	wantCode(t, "join", j.ErrorCode, nil)
	wantCode(t, "sync", gc.sync("g", j.MemberID, j.Generation, nil).ErrorCode, nil)
	if got := gc.state("g"); got != "Stable" {
		t.Fatalf("state %s, want Stable", got)
	}
	// An offset keeps the group once it is empty (see TestUnusedGroupForgotten).
	wantCode(t, "commit", gc.commit("g", j.MemberID, j.Generation, nil), nil)
	if got := <-expired; got != j.MemberID {
		t.Fatalf("expired %s, want %s", got, j.MemberID)
	}
	if got := gc.state("g"); got != "Empty" {
		t.Fatalf("state after expiry %s, want Empty", got)
	}
	wantCode(t, "heartbeat of the expired member", gc.heartbeat("g", j.MemberID, j.Generation), kerr.UnknownMemberID)
	wantCode(t, "commit of the expired member", gc.commit("g", j.MemberID, j.Generation, nil), kerr.IllegalGeneration)
}

// A member that does not rejoin within the rebalance timeout is dropped
// and the rebalance completes with the members that did.
func TestRebalanceTimeoutDropsAbsentMembers(t *testing.T) {
	c := openCoordinator(t, t.TempDir())
	gc := groupClient{t, newHandler(t, c, testHandlerOptions())}
	a := gc.join("g", time.Minute, 50*time.Millisecond)
	gc.sync("g", a.MemberID, a.Generation, nil)
	wantCode(t, "commit of the only member", gc.commit("g", a.MemberID, a.Generation, nil), nil)

	// b's join waits for a, which never rejoins.
	b := gc.join("g", time.Minute, 50*time.Millisecond)
	wantCode(t, "join of b", b.ErrorCode, nil)
	if b.Generation != a.Generation+1 || b.LeaderID != b.MemberID || len(b.Members) != 1 {
		t.Fatalf("b joined generation %d led by %s with %d members; want generation %d, b leading alone",
			b.Generation, b.LeaderID, len(b.Members), a.Generation+1)
	}
	wantCode(t, "heartbeat of the dropped member", gc.heartbeat("g", a.MemberID, a.Generation), kerr.UnknownMemberID)
	wantCode(t, "commit before the leader synced", gc.commit("g", b.MemberID, b.Generation, nil), kerr.RebalanceInProgress)
	wantCode(t, "commit of the dropped member", gc.commit("g", a.MemberID, a.Generation, nil), kerr.UnknownMemberID)
	wantCode(t, "sync of b", gc.sync("g", b.MemberID, b.Generation, nil).ErrorCode, nil)
	wantCode(t, "commit at the old generation", gc.commit("g", b.MemberID, a.Generation, nil), kerr.IllegalGeneration)
	wantCode(t, "commit of b", gc.commit("g", b.MemberID, b.Generation, nil), nil)
}

// A static member that rejoins under a new member id fences the old one,
// and a stable group skips the rebalance.
func TestStaticMemberFencing(t *testing.T) {
	c := openCoordinator(t, t.TempDir())
	gc := groupClient{t, newHandler(t, c, testHandlerOptions())}
	instance := kmsg.StringPtr("pod-1")
	first := gc.do(gc.joinRequest("g", "", instance, time.Minute, time.Minute)).(*kmsg.JoinGroupResponse)
	wantCode(t, "static join", first.ErrorCode, nil)
	wantCode(t, "static sync", gc.sync("g", first.MemberID, first.Generation, instance).ErrorCode, nil)

	again := gc.do(gc.joinRequest("g", "", instance, time.Minute, time.Minute)).(*kmsg.JoinGroupResponse)
	wantCode(t, "static rejoin", again.ErrorCode, nil)
	if again.MemberID == first.MemberID || again.Generation != first.Generation || !again.SkipAssignment {
		t.Fatalf("rejoin: member %s generation %d skip %v; want a new id at generation %d without a rebalance",
			again.MemberID, again.Generation, again.SkipAssignment, first.Generation)
	}
	wantCode(t, "commit of the fenced instance", gc.commit("g", first.MemberID, first.Generation, instance), kerr.FencedInstanceID)
	wantCode(t, "commit of the new instance", gc.commit("g", again.MemberID, again.Generation, instance), nil)
	if got := gc.state("g"); got != "Stable" {
		t.Fatalf("state %s, want Stable", got)
	}
}

// After a restart the next generation is above every generation a commit
// made durable, so members from before are fenced.
func TestGenerationAboveDurable(t *testing.T) {
	c := openCoordinator(t, t.TempDir())
	if _, err := c.CommitGeneration(context.Background(), "g", 7, []coordinator.OffsetCommit{{Topic: "orders", Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	gc := groupClient{t, newHandler(t, c, testHandlerOptions())}
	j := gc.join("g", time.Minute, time.Minute)
	if j.Generation != 8 {
		t.Fatalf("first generation after restart %d, want 8", j.Generation)
	}
}

// A closed coordinator answers COORDINATOR_NOT_AVAILABLE; so does a closed
// handler, to parked joins and to every later request.
func TestStopping(t *testing.T) {
	c := openCoordinator(t, t.TempDir())
	h := newHandler(t, c, testHandlerOptions())
	gc := groupClient{t, h}
	a := gc.join("g", time.Minute, time.Minute)
	gc.sync("g", a.MemberID, a.Generation, nil)

	parked := make(chan kmsg.Response, 1)
	go func() {
		req := gc.joinRequest("g", "", nil, time.Minute, time.Minute)
		first := gc.do(req).(*kmsg.JoinGroupResponse)
		req.MemberID = first.MemberID
		resp, _ := h.Handle(context.Background(), req, Client{})
		parked <- resp
	}()
	// The second member waits for a, which only heartbeats: once its
	// heartbeat says a rebalance is on, the join is parked.
	for gc.heartbeat("g", a.MemberID, a.Generation) != kerr.RebalanceInProgress.Code {
		runtime.Gosched()
	}
	c.Close()
	wantCode(t, "simple commit on a closed coordinator", gc.commit("plain", "", -1, nil), kerr.CoordinatorNotAvailable)
	h.Close()
	wantCode(t, "parked join of a closed handler", (<-parked).(*kmsg.JoinGroupResponse).ErrorCode, kerr.CoordinatorNotAvailable)
	wantCode(t, "commit to a closed handler", gc.commit("g", a.MemberID, a.Generation, nil), kerr.CoordinatorNotAvailable)
	wantCode(t, "list on a closed handler", gc.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse).ErrorCode, kerr.CoordinatorNotAvailable)
}

// Coordinator errors map to the codes Kafka clients act on.
func TestErrorCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want *kerr.Error
	}{
		{fmt.Errorf("partition 3: %w", coordinator.ErrLoading), kerr.CoordinatorLoadInProgress},
		{coordinator.ErrClosed, kerr.CoordinatorNotAvailable},
		{coordinator.ErrWriteFailed, kerr.CoordinatorNotAvailable},
		{fmt.Errorf("%w: group g", coordinator.ErrStaleGeneration), kerr.IllegalGeneration},
		{coordinator.ErrInvalid, kerr.InvalidRequest},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{errors.New("anything else"), kerr.UnknownServerError},
	} {
		if got := code(c.err); got != c.want.Code {
			t.Errorf("code(%v) = %v, want %v", c.err, kerr.ErrorForCode(got), c.want)
		}
	}
}

// Timers fire in deadline order, and a cancelled timer never fires.
func TestTimers(t *testing.T) {
	tm := newTimers()
	defer tm.close()
	fired := make(chan int, 3)
	tm.after(30*time.Millisecond, func() { fired <- 3 })
	cancelled := tm.after(20*time.Millisecond, func() { fired <- 2 })
	tm.after(10*time.Millisecond, func() { fired <- 1 })
	tm.cancel(cancelled)
	if a, b := <-fired, <-fired; a != 1 || b != 3 {
		t.Fatalf("fired %d then %d, want 1 then 3", a, b)
	}
	done := make(chan struct{})
	tm.after(0, func() { close(done) })
	<-done
	if len(fired) != 0 {
		t.Fatal("a cancelled timer fired")
	}
}

// A refusal carries its code wherever the response kind has one, for
// every request the handler serves.
func TestRefuseEveryKind(t *testing.T) {
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
	oldFetch := kmsg.NewPtrOffsetFetchRequest()
	oldFetch.Version = 1
	oldFetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version = 4
	find.CoordinatorKeys = []string{"g"}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{"g"}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	cgDescribe := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgDescribe.Groups = []string{"g"}
	reqs := []kmsg.Request{kmsg.NewPtrConsumerGroupHeartbeatRequest(), cgDescribe, commitRequest("g"), fetch, oldFetch, find, kmsg.NewPtrFindCoordinatorRequest(), describe, del,
		kmsg.NewPtrOffsetDeleteRequest(), kmsg.NewPtrListGroupsRequest(), kmsg.NewPtrJoinGroupRequest(),
		kmsg.NewPtrSyncGroupRequest(), kmsg.NewPtrHeartbeatRequest(), kmsg.NewPtrLeaveGroupRequest(),
		txnCommitRequest(3, "g", 0, 1), markerRequest(0, true)}
	seen := map[int16]bool{}
	for _, req := range reqs {
		seen[req.Key()] = true
		resp := refuse(req, kerr.CoordinatorNotAvailable.Code)
		if got := errorCode(resp); got != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("%s v%d refused with code %d", kmsg.NameForKey(req.Key()), req.GetVersion(), got)
		}
		if resp.GetVersion() != req.GetVersion() {
			t.Errorf("%s answered at v%d, asked at v%d", kmsg.NameForKey(req.Key()), resp.GetVersion(), req.GetVersion())
		}
	}
	for key := range handlerVersions {
		if !seen[key] {
			t.Errorf("%s not covered", kmsg.NameForKey(key))
		}
	}
}

// A group whose members all leave without committing is forgotten; one
// with offsets stays, Empty.
func TestUnusedGroupForgotten(t *testing.T) {
	c := openCoordinator(t, t.TempDir())
	h := newHandler(t, c, testHandlerOptions())
	gc := groupClient{t, h}
	for _, group := range []string{"passing", "committed"} {
		j := gc.join(group, time.Minute, time.Minute)
		gc.sync(group, j.MemberID, j.Generation, nil)
		if group == "committed" {
			wantCode(t, "commit", gc.commit(group, j.MemberID, j.Generation, nil), nil)
		}
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Group, leave.MemberID = group, j.MemberID
		wantCode(t, "leave", gc.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode, nil)
	}
	// The forgetting runs on the timer goroutine, in deadline order: a
	// timer due later runs after it.
	done := make(chan struct{})
	h.timers.after(time.Millisecond, func() { close(done) })
	<-done
	if got := gc.state("passing"); got != "Dead" {
		t.Errorf("group without members or offsets is %s, want Dead (forgotten)", got)
	}
	if got := gc.state("committed"); got != "Empty" {
		t.Errorf("group with offsets is %s, want Empty", got)
	}
	h.mu.Lock()
	n := len(h.groups)
	h.mu.Unlock()
	if n != 1 {
		t.Errorf("handler keeps %d groups, want 1", n)
	}
}

// A rebalance stores its generation before the members learn it: after a
// restart the next membership never gets a generation an earlier one had.
// Cooperative clients depend on it: a member that kept its partitions across
// the restart claims them at the generation it last joined, and the claim at
// the higher generation wins.
func TestGenerationNotReusedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	c, err := coordinator.Open(dir, coordinatorOptions())
	if err != nil {
		t.Fatal(err)
	}
	h := newHandler(t, c, testHandlerOptions())
	gc := groupClient{t, h}
	wantCode(t, "simple commit", gc.commit("g", "", -1, nil), nil) // the group has offsets
	j := gc.join("g", 10*time.Second, 10*time.Second)
	wantCode(t, "join", j.ErrorCode, nil)
	wantCode(t, "sync", gc.sync("g", j.MemberID, j.Generation, nil).ErrorCode, nil)
	// The member never commits at its generation: only the rebalance
	// stored it.
	h.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c2 := openCoordinator(t, dir)
	gc2 := groupClient{t, newHandler(t, c2, testHandlerOptions())}
	j2 := gc2.join("g", 10*time.Second, 10*time.Second)
	wantCode(t, "join after the restart", j2.ErrorCode, nil)
	if j2.Generation <= j.Generation {
		t.Errorf("generation after the restart is %d, want above %d from before it", j2.Generation, j.Generation)
	}
	wantCode(t, "commit at the old generation", gc2.commit("g", j.MemberID, j.Generation, nil), kerr.UnknownMemberID)
}
