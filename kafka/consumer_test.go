package kafka

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// knownTopics is a Topics of fixed topics, read from a Kafka cluster.
type knownTopics map[string]struct {
	id         [16]byte
	partitions int32
}

func (k knownTopics) Topic(name string) ([16]byte, int32, bool) {
	t, ok := k[name]
	return t.id, t.partitions, ok
}

func (k knownTopics) Names() []string { return slices.Collect(maps.Keys(k)) }

// newConsumerCluster is a kfake cluster that serves topic's records and
// hands every group and offset request, the consumer protocol's too, to
// the handler it returns, which knows kfake's topics.
func newConsumerCluster(t *testing.T, partitions int32, topic string) (*routedCluster, *Handler) {
	t.Helper()
	versions := kversion.Stable()
	for key, v := range handlerVersions {
		versions.SetMaxKeyVersion(key, v.max)
	}
	rc := newRoutedVersions(t, 1, partitions, topic, versions)
	adm := newAdmin(t, rc.ListenAddrs()[0])
	details, err := adm.ListTopics(testContext(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	topics := knownTopics{}
	for name, d := range details {
		topics[name] = struct {
			id         [16]byte
			partitions int32
		}{d.ID, int32(len(d.Partitions))}
	}
	o := testHandlerOptions()
	o.Broker = rc.broker(t)
	o.Topics = topics
	o.ConsumerHeartbeatInterval = 50 * time.Millisecond
	o.ConsumerSessionTimeout = 5 * time.Second
	h := newHandler(t, openCoordinator(t, t.TempDir()), o)
	rc.current.Store(h)
	return rc, h
}

// owners follows what each consumer owns, from its assignment callbacks.
type owners struct {
	mu      sync.Mutex
	owned   map[string]map[int32]bool // consumer → partitions
	changed chan struct{}
}

func newOwners() *owners {
	return &owners{owned: map[string]map[int32]bool{}, changed: make(chan struct{}, 1)}
}

func (o *owners) opts(name string) []kgo.Opt {
	update := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			o.mu.Lock()
			if o.owned[name] == nil {
				o.owned[name] = map[int32]bool{}
			}
			for _, tps := range ps {
				for _, p := range tps {
					if add {
						o.owned[name][p] = true
					} else {
						delete(o.owned[name], p)
					}
				}
			}
			o.mu.Unlock()
			select {
			case o.changed <- struct{}{}:
			default:
			}
		}
	}
	return []kgo.Opt{kgo.OnPartitionsAssigned(update(true)), kgo.OnPartitionsRevoked(update(false)), kgo.OnPartitionsLost(update(false))}
}

// waitFor waits until each consumer named in want owns exactly that many
// partitions and no partition is owned twice.
func (o *owners) waitFor(t *testing.T, ctx context.Context, want map[string]int) {
	t.Helper()
	for {
		o.mu.Lock()
		ok := true
		seen := map[int32]string{}
		for name, ps := range o.owned {
			if len(ps) != want[name] {
				ok = false
			}
			for p := range ps {
				if other, dup := seen[p]; dup {
					t.Fatalf("partition %d owned by %s and %s at once", p, other, name)
				}
				seen[p] = name
			}
		}
		for name, n := range want {
			if len(o.owned[name]) != n {
				ok = false
			}
		}
		snapshot := maps.Clone(o.owned)
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-o.changed:
		case <-ctx.Done():
			t.Fatalf("owned %v, want counts %v", snapshot, want)
		}
	}
}

func consumer848(t *testing.T, addr string, o *owners, name string, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"),
		kgo.ServerSideBalancer(), kgo.ClientID(name),
	}, o.opts(name)...)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return cl
}

// kgo consumers on the consumer protocol (kgo.ServerSideBalancer) are
// assigned by offsetd's uniform assignor: one member gets every partition,
// a second takes half of them only after the first revoked them, and the
// first gets them all back when the second leaves.
func TestConsumerProtocolWithKgo(t *testing.T) {
	rc, h := newConsumerCluster(t, 6, "orders")
	addr := rc.ListenAddrs()[0]
	ctx := testContext(t)
	o := newOwners()

	consumer848(t, addr, o, "a")
	o.waitFor(t, ctx, map[string]int{"a": 6})
	b := consumer848(t, addr, o, "b")
	o.waitFor(t, ctx, map[string]int{"a": 3, "b": 3})

	gc := groupClient{t, h}
	d := gc.describeConsumer("g")
	if d.ErrorCode != 0 || len(d.Members) != 2 || d.AssignorName != "uniform" {
		t.Fatalf("described %+v", d)
	}
	if desc, ok := h.Describe("g"); !ok || desc.ProtocolType != "consumer" || len(desc.Members) != 2 || desc.Generation != d.Epoch {
		t.Fatalf("Describe: %+v, %v; ConsumerGroupDescribe said epoch %d", desc, ok, d.Epoch)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 5
	lg.TypesFilter = []string{"consumer"}
	if groups := gc.do(lg).(*kmsg.ListGroupsResponse).Groups; len(groups) != 1 || groups[0].Group != "g" || groups[0].GroupType != "consumer" {
		t.Fatalf("ListGroups of type consumer: %+v", groups)
	}

	// Fencing: a member at an epoch it no longer has, an unknown member,
	// and a commit at another epoch.
	var memberID string
	var epoch int32
	for _, m := range d.Members {
		memberID, epoch = m.MemberID, m.MemberEpoch
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version = 1
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", memberID, epoch+5, -1
	wantCode(t, "heartbeat at a future epoch", gc.do(hb).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode, kerr.FencedMemberEpoch)
	hb.MemberID = "nobody"
	wantCode(t, "heartbeat of an unknown member", gc.do(hb).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode, kerr.UnknownMemberID)
	cr := commitRequest("g")
	cr.Version = 9
	cr.MemberID, cr.Generation = memberID, epoch+5
	wantCode(t, "commit at another epoch", gc.do(cr).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.StaleMemberEpoch)
	cr.MemberID = "nobody"
	wantCode(t, "commit of an unknown member", gc.do(cr).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.UnknownMemberID)
	jg := gc.joinRequest("g", "", nil, time.Minute, time.Minute)
	wantCode(t, "classic join of a consumer group", gc.do(jg).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)

	// b leaves (a heartbeat at epoch -1 as its client closes): a gets
	// everything back.
	b.Close()
	o.waitFor(t, ctx, map[string]int{"a": 6, "b": 0})
}

func (gc groupClient) describeConsumer(group string) kmsg.ConsumerGroupDescribeResponseGroup {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	return gc.do(req).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
}

// consumerBeat sends a ConsumerGroupHeartbeat of group "g"; owned nil sends
// no owned partitions (unchanged), otherwise those of topic id.
func (gc groupClient) consumerBeat(member string, epoch int32, instance *string, id [16]byte, owned []int32) *kmsg.ConsumerGroupHeartbeatResponse {
	gc.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = "g", member, epoch, instance
	req.RebalanceTimeoutMillis = -1
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 100
		req.SubscribedTopicNames = []string{"orders"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	} else if owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: id, Partitions: owned}}
	}
	return gc.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
}

// assigned returns the partitions a heartbeat answer assigns, or nil when
// it carries no assignment.
func assigned(t *testing.T, resp *kmsg.ConsumerGroupHeartbeatResponse) []int32 {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp.Assignment == nil {
		return nil
	}
	out := []int32{}
	for _, tp := range resp.Assignment.Topics {
		out = append(out, tp.Partitions...)
	}
	return out
}

// A partition moves to a new member only once its previous member has
// revoked it; a member that does not revoke within its rebalance timeout
// is fenced; a static member that leaves for a while (epoch -2) hands its
// place, epoch and partitions to the member that comes back with its
// instance id.
func TestConsumerRevokeBeforeReassign(t *testing.T) {
	id := [16]byte{1}
	o := testHandlerOptions()
	o.Topics = knownTopics{"orders": {id, 4}}
	fenced := make(chan string, 1)
	o.Logger = slog.New(logged{msg: msgRevocationTimeout, key: "member", to: fenced})
	gc := groupClient{t, newHandler(t, openCoordinator(t, t.TempDir()), o)}
	want := func(what string, got, want []int32) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: assigned %v, want %v", what, got, want)
		}
	}

	a := gc.consumerBeat("a", 0, nil, id, nil)
	want("a joins", assigned(t, a), []int32{0, 1, 2, 3})
	b := gc.consumerBeat("b", 0, nil, id, nil)
	want("b joins while a owns everything", assigned(t, b), []int32{})
	a = gc.consumerBeat("a", a.MemberEpoch, nil, id, []int32{0, 1, 2, 3})
	want("a is asked to revoke", assigned(t, a), []int32{0, 1})
	if a.MemberEpoch != 1 {
		t.Fatalf("a revoking at epoch %d, want its epoch 1 kept", a.MemberEpoch)
	}
	if got := assigned(t, gc.consumerBeat("b", b.MemberEpoch, nil, id, []int32{})); len(got) != 0 {
		t.Fatalf("b got %v before a revoked", got)
	}
	a = gc.consumerBeat("a", a.MemberEpoch, nil, id, []int32{0, 1})
	if a.MemberEpoch != b.MemberEpoch {
		t.Fatalf("a at epoch %d after revoking, want %d", a.MemberEpoch, b.MemberEpoch)
	}
	want("b after a revoked", assigned(t, gc.consumerBeat("b", b.MemberEpoch, nil, id, []int32{})), []int32{2, 3})
	wantCode(t, "a at its previous epoch, owning more than it has", gc.consumerBeat("a", 1, nil, id, []int32{0, 1, 2}).ErrorCode, kerr.FencedMemberEpoch)

	// c joins: a keeps its two (sticky), b must give one up but never
	// answers: once its rebalance timeout passes it is fenced, and its
	// partitions go on.
	c := gc.consumerBeat("c", 0, nil, id, nil)
	a = gc.consumerBeat("a", a.MemberEpoch, nil, id, []int32{0, 1})
	if got := assigned(t, a); got != nil {
		t.Fatalf("a keeps its partitions, yet was sent assignment %v", got)
	}
	want("b is asked to give one up", assigned(t, gc.consumerBeat("b", b.MemberEpoch, nil, id, []int32{2, 3})), []int32{2})
	if got := <-fenced; got != "b" {
		t.Fatalf("fenced %s, want b", got)
	}
	wantCode(t, "b after it was fenced", gc.consumerBeat("b", b.MemberEpoch, nil, id, nil).ErrorCode, kerr.UnknownMemberID)
	c = gc.consumerBeat("c", c.MemberEpoch, nil, id, []int32{})
	want("c after b was fenced", assigned(t, c), []int32{2, 3})

	// A static member leaves for a while and comes back as another id.
	s1 := kmsg.StringPtr("s1")
	s := gc.consumerBeat("s", 0, s1, id, nil)
	wantCode(t, "another member with s's instance id", gc.consumerBeat("t", 0, s1, id, nil).ErrorCode, kerr.UnreleasedInstanceID)
	leave := gc.consumerBeat("s", -2, s1, id, nil)
	if leave.ErrorCode != 0 || leave.MemberEpoch != -2 {
		t.Fatalf("static leave: code %d epoch %d", leave.ErrorCode, leave.MemberEpoch)
	}
	back := gc.consumerBeat("s-again", 0, s1, id, nil)
	if back.ErrorCode != 0 || back.MemberEpoch != s.MemberEpoch {
		t.Fatalf("static member back: code %d epoch %d, want its epoch %d", back.ErrorCode, back.MemberEpoch, s.MemberEpoch)
	}
}

// A member subscribed by regular expression is assigned the topics it
// matches, whole names only, and a matching topic created later once it
// heartbeats again; a bad expression is INVALID_REGULAR_EXPRESSION.
func TestConsumerRegexSubscription(t *testing.T) {
	orders, eu := [16]byte{1}, [16]byte{2}
	topics := knownTopics{"orders": {orders, 2}, "xorders": {[16]byte{3}, 1}}
	o := testHandlerOptions()
	o.Topics = topics
	gc := groupClient{t, newHandler(t, openCoordinator(t, t.TempDir()), o)}
	beat := func(epoch int32, regex string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g", "a", epoch, -1
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 1000
			req.SubscribedTopicRegex = kmsg.StringPtr(regex)
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		return gc.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	wantCode(t, "a bad expression", beat(0, "(").ErrorCode, kerr.InvalidRegularExpression)
	a := beat(0, "orders.*")
	if got := assigned(t, a); !slices.Equal(got, []int32{0, 1}) || a.Assignment.Topics[0].TopicID != orders {
		t.Fatalf("assigned %+v, want orders 0-1 (and not xorders)", a.Assignment)
	}
	topics["orders-eu"] = struct {
		id         [16]byte
		partitions int32
	}{eu, 1}
	a = beat(a.MemberEpoch, "")
	var euParts []int32
	for _, tp := range a.Assignment.Topics {
		if tp.TopicID == eu {
			euParts = tp.Partitions
		}
	}
	if !slices.Equal(euParts, []int32{0}) {
		t.Fatalf("after orders-eu was created: assigned %+v, want its partition 0 too", a.Assignment)
	}
}

// A kgo consumer that consumes by regular expression (kgo.ConsumeRegex)
// subscribes by SubscribedTopicRegex and is assigned what it matches.
func TestConsumerRegexWithKgo(t *testing.T) {
	rc, h := newConsumerCluster(t, 6, "orders")
	o := newOwners()
	consumer848(t, rc.ListenAddrs()[0], o, "r", kgo.ConsumeRegex())
	o.waitFor(t, testContext(t), map[string]int{"r": 6})
	d := groupClient{t, h}.describeConsumer("g")
	if len(d.Members) != 1 || d.Members[0].SubscribedTopicRegex == nil {
		t.Fatalf("described %+v: want one member subscribed by regular expression", d.Members)
	}
}

// TestMetadataByTopicID answers a Metadata request that names topics by ID,
// as librdkafka resolves the topics of a consumer-protocol assignment: a
// topic of Options.Topics is found with its name and partitions, any other
// ID is UNKNOWN_TOPIC_ID.
func TestMetadataByTopicID(t *testing.T) {
	o := testHandlerOptions()
	o.Topics = knownTopics{"orders": {TopicID("orders"), 3}, "payments": {TopicID("payments"), 2}}
	addr := listen(t, newHandler(t, openCoordinator(t, t.TempDir()), o), ServerOptions{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: TopicID("payments")}, {TopicID: TopicID("unknown")}}
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics answered, want 2", len(resp.Topics))
	}
	known, unknown := resp.Topics[0], resp.Topics[1]
	if known.ErrorCode != 0 || known.Topic == nil || *known.Topic != "payments" || known.TopicID != TopicID("payments") || len(known.Partitions) != 2 {
		t.Errorf("payments by ID: error %d, name %v, id %x, %d partitions; want its name, ID and 2 partitions",
			known.ErrorCode, known.Topic, known.TopicID, len(known.Partitions))
	}
	if unknown.ErrorCode != kerr.UnknownTopicID.Code || unknown.TopicID != TopicID("unknown") || len(unknown.Partitions) != 0 {
		t.Errorf("an unknown ID: error %d, id %x, %d partitions; want UNKNOWN_TOPIC_ID", unknown.ErrorCode, unknown.TopicID, len(unknown.Partitions))
	}
}

// A group moves from the classic protocol to the consumer protocol as
// Kafka's disabled migration policy has it: once its classic members have
// left, a consumer-protocol member takes the group, and the offsets the
// classic members committed stay.
func TestGroupMovesFromClassicToConsumer(t *testing.T) {
	rc, h := newConsumerCluster(t, 6, "orders")
	addr := rc.ListenAddrs()[0]
	ctx := testContext(t)

	classic, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	for {
		// A classic group has a leader; a consumer-protocol group none.
		if desc, ok := h.Describe("g"); ok && desc.Leader != "" && len(desc.Members) == 1 && desc.State == "Stable" {
			break
		}
		poll, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		classic.PollRecords(poll, 1) // joins, then waits for records that never come
		cancel()
		if ctx.Err() != nil {
			t.Fatal("the classic consumer never joined")
		}
	}
	committed := map[string]map[int32]kgo.EpochOffset{"orders": {0: {Epoch: -1, Offset: 5}, 4: {Epoch: -1, Offset: 9}}}
	var commitErr error
	classic.CommitOffsetsSync(ctx, committed, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if commitErr == nil && p.ErrorCode != 0 {
					commitErr = kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("the classic member's commit: %v", commitErr)
	}
	classic.Close() // leaves the group

	o := newOwners()
	consumer848(t, addr, o, "new")
	o.waitFor(t, ctx, map[string]int{"new": 6})
	if desc, ok := h.Describe("g"); !ok || desc.Leader != "" || desc.Protocol != "uniform" || len(desc.Members) != 1 {
		t.Fatalf("after the move: %+v, %v", desc, ok)
	}
	fetched, err := newAdmin(t, addr).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 5, 4: 9} {
		if got, ok := fetched.Lookup("orders", p); !ok || got.At != want {
			t.Fatalf("partition %d after the move: %+v, %v; want %d", p, got, ok, want)
		}
	}
}
