package kafka

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
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

// newConsumerCluster is a kfake cluster that serves topic's records and
// hands every group and offset request, the consumer protocol's too, to
// the handler it returns, which knows kfake's topics.
func newConsumerCluster(t *testing.T, partitions int32, topic string) (*routedCluster, *Handler) {
	t.Helper()
	versions := kversion.Stable()
	for key, v := range handlerVersions {
		versions.SetMaxKeyVersion(key, v.max)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic), kfake.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	rc := &routedCluster{Cluster: cluster}
	for key := range handlerVersions {
		cluster.ControlKey(key, rc.route)
	}
	adm := newAdmin(t, cluster.ListenAddrs()[0])
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
