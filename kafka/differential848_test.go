package kafka

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// consumerRun is what a consumer-protocol script has seen so far in one
// run: the topic's ID there, and each member's last epoch and assignment.
type consumerRun struct {
	topic    [16]byte
	epoch    map[string]int32
	assigned map[string][]int32
}

type consumerStep struct {
	name string
	req  func(r *consumerRun) kmsg.Request
}

// beat is a ConsumerGroupHeartbeat (v1, the member names itself) of group
// "cg"; epoch nil is the member's last epoch, and owned reports its last
// assignment when set.
func beat(member string, epoch *int32, owned bool) func(*consumerRun) kmsg.Request {
	return func(r *consumerRun) kmsg.Request {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID = "cg", member
		req.MemberEpoch = r.epoch[member]
		if epoch != nil {
			req.MemberEpoch = *epoch
		}
		req.RebalanceTimeoutMillis = -1
		if req.MemberEpoch == 0 {
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{"orders"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		} else if owned {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: r.topic, Partitions: r.assigned[member]}}
		}
		return req
	}
}

func epochOf(e int32) *int32 { return &e }

// commitAt commits for member at its last epoch plus off.
func commitAt(member string, off int32) func(*consumerRun) kmsg.Request {
	return func(r *consumerRun) kmsg.Request {
		req := commitRequest("cg")
		req.Version = 9
		req.MemberID, req.Generation = member, r.epoch[member]+off
		return req
	}
}

// fetchAt fetches cg's offsets (v9) as member at its last epoch plus off.
func fetchAt(member string, off int32) func(*consumerRun) kmsg.Request {
	return func(r *consumerRun) kmsg.Request {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "cg", MemberID: kmsg.StringPtr(member), MemberEpoch: r.epoch[member] + off,
			Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0}}}}}
		return req
	}
}

// consumerDocumentedDifferences are the steps where offsetd and kfake
// answer apart, with offsetd's answer; README.md lists them.
var consumerDocumentedDifferences = map[string]string{
	// A classic member joining a consumer group: Kafka 4's default
	// group.consumer.migration.policy (bidirectional) takes it into the
	// group, as kfake does (MEMBER_ID_REQUIRED, the first step of a join);
	// offsetd follows the disabled policy, INCONSISTENT_GROUP_PROTOCOL.
	"classic join of the consumer group": "code=23 gen=-1 member= leader= protocol=<nil> members=0",
}

// TestDifferentialConsumerProtocol plays one script of the consumer group
// protocol (KIP-848) against kfake's own coordinator and against offsetd's
// handler behind kfake, and compares the answers: epochs, assignments,
// revocation before reassignment, fencing, commits and fetches at member
// epochs, describe and list.
func TestDifferentialConsumerProtocol(t *testing.T) {
	script := []consumerStep{
		{"a joins", beat("a", nil, false)},
		{"b joins", beat("b", nil, false)},
		{"a heartbeats owning everything", beat("a", nil, true)},
		{"b before a revoked", beat("b", nil, true)},
		{"a revokes", beat("a", nil, true)},
		{"b after a revoked", beat("b", nil, true)},
		{"a stable", beat("a", nil, true)},
		{"commit at the member epoch", commitAt("a", 0)},
		{"commit at an older epoch", commitAt("a", -1)},
		{"commit from an unknown member", commitAt("nobody", 0)},
		{"fetch at the member epoch", fetchAt("a", 0)},
		{"fetch at an older epoch", fetchAt("a", -1)},
		{"heartbeat at a future epoch", beat("a", epochOf(99), false)},
		{"heartbeat of an unknown member", beat("nobody", epochOf(3), false)},
		{"classic join of the consumer group", func(*consumerRun) kmsg.Request { return join("cg", "", nil)(newMembers()) }},
		{"describe", func(*consumerRun) kmsg.Request {
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Groups = []string{"cg", "missing"}
			return req
		}},
		{"list consumer groups", func(*consumerRun) kmsg.Request {
			req := kmsg.NewPtrListGroupsRequest()
			req.TypesFilter = []string{"consumer"}
			return req
		}},
		{"b leaves", beat("b", epochOf(-1), false)},
		{"a takes everything", beat("a", nil, true)},
		{"a leaves", beat("a", epochOf(-1), false)},
		{"a leaves again", beat("a", epochOf(-1), false)},
	}
	kfakeAnswers := playConsumerScript(t, script, false)
	offsetdAnswers := playConsumerScript(t, script, true)
	for i, s := range script {
		if want, ok := consumerDocumentedDifferences[s.name]; ok {
			if offsetdAnswers[i] != want {
				t.Errorf("%s: offsetd answered %s, want %s (kfake: %s)", s.name, offsetdAnswers[i], want, kfakeAnswers[i])
			}
			continue
		}
		if kfakeAnswers[i] != offsetdAnswers[i] {
			t.Errorf("%s:\n  kfake:   %s\n  offsetd: %s", s.name, kfakeAnswers[i], offsetdAnswers[i])
		}
	}
}

func playConsumerScript(t *testing.T, script []consumerStep, offsetd bool) []string {
	var addr string
	if offsetd {
		rc, _ := newConsumerCluster(t, 4, "orders")
		addr = rc.ListenAddrs()[0]
	} else {
		versions := kversion.Stable()
		for key, v := range handlerVersions {
			versions.SetMaxKeyVersion(key, v.max)
		}
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "orders"), kfake.MaxVersions(versions))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cluster.Close)
		addr = cluster.ListenAddrs()[0]
	}
	ctx := testContext(t)
	topics, err := newAdmin(t, addr).ListTopics(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	r := &consumerRun{topic: topics["orders"].ID, epoch: map[string]int32{}, assigned: map[string][]int32{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for _, s := range script {
		req := s.req(r)
		resp, err := cl.Broker(0).Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		out = append(out, consumerSummary(req, resp, r))
	}
	return out
}

// consumerSummary is what of an answer the two coordinators must agree on;
// it notes a heartbeat's epoch and assignment in r.
func consumerSummary(req kmsg.Request, resp kmsg.Response, r *consumerRun) string {
	var b strings.Builder
	switch resp := resp.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		fmt.Fprintf(&b, "code=%d epoch=%d", resp.ErrorCode, resp.MemberEpoch)
		member := req.(*kmsg.ConsumerGroupHeartbeatRequest).MemberID
		if resp.ErrorCode == 0 && resp.MemberEpoch >= 0 {
			r.epoch[member] = resp.MemberEpoch
		}
		if resp.Assignment != nil {
			var ps []int32
			for _, tp := range resp.Assignment.Topics {
				ps = append(ps, tp.Partitions...)
			}
			slices.Sort(ps)
			r.assigned[member] = ps
			fmt.Fprintf(&b, " assigned=%v", ps)
		}
	case *kmsg.ConsumerGroupDescribeResponse:
		for _, g := range resp.Groups {
			fmt.Fprintf(&b, "%s code=%d", g.Group, g.ErrorCode)
			if g.ErrorCode != 0 {
				b.WriteString("; ")
				continue
			}
			fmt.Fprintf(&b, " state=%s epoch=%d assignment=%d", g.State, g.Epoch, g.AssignmentEpoch)
			var ms []string
			for _, m := range g.Members {
				var ps []int32
				for _, tp := range m.Assignment.TopicPartitions {
					ps = append(ps, tp.Partitions...)
				}
				slices.Sort(ps)
				ms = append(ms, fmt.Sprintf("%s@%d%v", m.MemberID, m.MemberEpoch, ps))
			}
			slices.Sort(ms)
			fmt.Fprintf(&b, " members=%v; ", ms)
		}
	case *kmsg.ListGroupsResponse:
		var gs []string
		for _, g := range resp.Groups {
			gs = append(gs, g.Group+":"+g.GroupType+":"+g.GroupState)
		}
		slices.Sort(gs)
		fmt.Fprintf(&b, "code=%d %v", resp.ErrorCode, gs)
	default:
		b.WriteString(summary(resp, newMembers()))
	}
	return b.String()
}
