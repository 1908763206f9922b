package kafka

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
)

// heldCommit is a handler one of whose commits (the one sent by commit) is
// held between its fence and its write, so that a test decides what
// happens while it is in flight.
type heldCommit struct {
	t       *testing.T
	h       *Handler
	ctx     context.Context
	armed   atomic.Bool   // the next commit fenced is held
	held    chan struct{} // closed once the commit is fenced
	release chan struct{} // closed by the test: the commit is written
	waits   chan string   // the writes that wait for commits in flight (msgWaitsForCommits)
}

func newHeldCommit(t *testing.T, c *coordinator.Coordinator) *heldCommit {
	f := &heldCommit{t: t, ctx: testContext(t), held: make(chan struct{}), release: make(chan struct{}), waits: make(chan string, 4)}
	o := testHandlerOptions()
	o.Logger = slog.New(logged{msg: msgWaitsForCommits, key: "write", to: f.waits})
	f.h = newHandler(t, c, o)
	f.h.commitFenced = func() {
		if f.armed.CompareAndSwap(true, false) {
			close(f.held)
			<-f.release
		}
	}
	return f
}

// handle sends req on a goroutine of its own; its response comes on the
// channel returned, nil if it failed.
func (f *heldCommit) handle(req kmsg.Request) <-chan kmsg.Response {
	answered := make(chan kmsg.Response, 1)
	go func() {
		resp, err := f.h.Handle(f.ctx, req, Client{ID: "test", Host: "127.0.0.1"})
		if err != nil {
			f.t.Error(err)
		}
		answered <- resp
	}()
	return answered
}

// commit sends req, which becomes the commit held, and waits until it is
// fenced.
func (f *heldCommit) commit(req *kmsg.OffsetCommitRequest) <-chan kmsg.Response {
	f.armed.Store(true)
	committed := f.handle(req)
	<-f.held
	return committed
}

// await returns answered's response if it comes before a write waits for
// the commit held, or else the write that waits.
func (f *heldCommit) await(answered <-chan kmsg.Response) (resp kmsg.Response, waits string) {
	select {
	case resp = <-answered:
		if resp == nil {
			f.t.FailNow()
		}
		return resp, ""
	case waits = <-f.waits:
		return nil, waits
	}
}

// finish writes the commit held, checks that it is taken, and returns
// answered's response: resp, if await had it.
func (f *heldCommit) finish(committed, answered <-chan kmsg.Response, resp kmsg.Response) kmsg.Response {
	f.t.Helper()
	close(f.release)
	wantCode(f.t, "the commit held", committedCode(<-committed), nil)
	if resp == nil {
		if resp = <-answered; resp == nil {
			f.t.FailNow()
		}
	}
	return resp
}

// committedCode is the code of a commit of one offset, or -1 if it failed.
func committedCode(resp kmsg.Response) int16 {
	if resp == nil {
		return -1
	}
	return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// generationAfterRestart closes h and c, opens dir again, and returns the
// generation a new member joins group at.
func generationAfterRestart(t *testing.T, h *Handler, c *coordinator.Coordinator, dir, group string) int32 {
	t.Helper()
	h.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	gc := groupClient{t, newHandler(t, openCoordinator(t, dir), testHandlerOptions())}
	j := gc.join(group, time.Minute, time.Minute)
	wantCode(t, "join after the restart", j.ErrorCode, nil)
	return j.Generation
}

// A group's first commit, fenced before a rebalance completes and still
// being written when the rebalance stores the next generation, lands
// before that generation: were it written after, the generation would have
// been stored for a group without offsets, which keeps nothing, and after a
// restart the next membership would get it again.
func TestGenerationNotReusedAfterFirstCommitInFlight(t *testing.T) {
	dir := t.TempDir()
	c := openCoordinator(t, dir) // closed by generationAfterRestart
	f := newHeldCommit(t, c)
	gc := groupClient{t, f.h}
	j := gc.join("g", time.Minute, time.Minute)
	wantCode(t, "join", j.ErrorCode, nil)
	wantCode(t, "sync", gc.sync("g", j.MemberID, j.Generation, nil).ErrorCode, nil)

	req := commitRequest("g")
	req.Version = 9
	req.MemberID, req.Generation = j.MemberID, j.Generation
	committed := f.commit(req)
	// The leader rejoins: the rebalance completes at once.
	rejoined := f.handle(gc.joinRequest("g", j.MemberID, nil, time.Minute, time.Minute))
	// Unless the generation is stored before the commit, it waits for
	// it, and takes no other commit meanwhile: one taken after the wait
	// could land after the generation.
	resp, waits := f.await(rejoined)
	if waits != "" {
		wantCode(t, "commit while the generation is stored", gc.commit("g", j.MemberID, j.Generation, nil), kerr.RebalanceInProgress)
	}
	next := f.finish(committed, rejoined, resp).(*kmsg.JoinGroupResponse)
	wantCode(t, "rejoin", next.ErrorCode, nil)
	if next.Generation <= j.Generation {
		t.Fatalf("rejoin at generation %d, want above %d", next.Generation, j.Generation)
	}
	if after := generationAfterRestart(t, f.h, c, dir, "g"); after <= next.Generation {
		t.Errorf("generation after the restart is %d, want above %d, which members learned before it", after, next.Generation)
	}
}

// A simple commit to a group the handler holds nothing of is counted in
// the group all the same: a member that joins while it is being written
// gets a generation stored after it, so the group, which has offsets once
// the commit lands, never hands that generation out again after a restart.
func TestGenerationNotReusedAfterSimpleCommitInFlight(t *testing.T) {
	dir := t.TempDir()
	c := openCoordinator(t, dir) // closed by generationAfterRestart
	f := newHeldCommit(t, c)
	gc := groupClient{t, f.h}
	committed := f.commit(commitRequest("g"))

	join := gc.joinRequest("g", "", nil, time.Minute, time.Minute)
	first := gc.do(join).(*kmsg.JoinGroupResponse)
	wantCode(t, "first join", first.ErrorCode, kerr.MemberIDRequired)
	join.MemberID = first.MemberID
	joined := f.handle(join)
	resp, _ := f.await(joined) // the generation is handed out, or waits for the commit
	j := f.finish(committed, joined, resp).(*kmsg.JoinGroupResponse)
	wantCode(t, "join", j.ErrorCode, nil)
	if after := generationAfterRestart(t, f.h, c, dir, "g"); after <= j.Generation {
		t.Errorf("generation after the restart is %d, want above %d, which a member learned before it", after, j.Generation)
	}
}

// A deletion removes the commits fenced before it was decided, as Kafka's
// tombstones follow the commits it accepted before them: a commit still
// being written when an OffsetDelete or DeleteGroups of an Empty group is
// decided lands before the tombstone, not after it, whether or not the
// group ever had members.
func TestDeletionFollowsCommitsInFlight(t *testing.T) {
	deleteOffsets := func() kmsg.Request {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = "g"
		req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		return req
	}
	deleteGroup := func() kmsg.Request {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"g"}
		return req
	}
	offsetDeleted := func(r kmsg.Response) int16 {
		resp := r.(*kmsg.OffsetDeleteResponse)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	groupDeleted := func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode }
	for _, tc := range []struct {
		name   string
		joined bool // the group had a member, and so is held in memory
		delete func() kmsg.Request
		code   func(kmsg.Response) int16
	}{
		{"OffsetDelete", true, deleteOffsets, offsetDeleted},
		{"DeleteGroups", true, deleteGroup, groupDeleted},
		{"OffsetDelete/NeverJoined", false, deleteOffsets, offsetDeleted},
		{"DeleteGroups/NeverJoined", false, deleteGroup, groupDeleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openCoordinator(t, t.TempDir())
			f := newHeldCommit(t, c)
			gc := groupClient{t, f.h}
			// An Empty group with offsets.
			if tc.joined {
				j := gc.join("g", time.Minute, time.Minute)
				wantCode(t, "sync", gc.sync("g", j.MemberID, j.Generation, nil).ErrorCode, nil)
				wantCode(t, "commit", gc.commit("g", j.MemberID, j.Generation, nil), nil)
				leave := kmsg.NewPtrLeaveGroupRequest()
				leave.Group, leave.MemberID = "g", j.MemberID
				wantCode(t, "leave", gc.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode, nil)
			} else {
				wantCode(t, "commit", gc.commit("g", "", -1, nil), nil)
			}
			if got := gc.state("g"); got != "Empty" {
				t.Fatalf("state %s, want Empty", got)
			}

			req := commitRequest("g")
			req.Topics[0].Partitions[0].Offset = 9
			committed := f.commit(req) // a simple commit, held
			deleted := f.handle(tc.delete())
			resp, waits := f.await(deleted) // written before the commit, or waits for it
			if waits != "" && waits != "deletion" {
				t.Fatalf("%s waits for commits, want the deletion", waits)
			}
			wantCode(t, tc.name, tc.code(f.finish(committed, deleted, resp)), nil)
			if o, ok, err := c.Fetch("g", "orders", 0); err != nil || ok {
				t.Errorf("after %s: offset %d (found %v, err %v), want none: the commit fenced before it landed after it", tc.name, o.Offset, ok, err)
			}
		})
	}
}
