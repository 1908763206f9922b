package kafka

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// members maps the member ids a coordinator hands out to the names the
// script uses (m1, m2, ...), so that two coordinators' answers compare.
type members struct {
	byName map[string]string
	byID   map[string]string
	// The transactional producer of the script, as InitProducerID and
	// EndTxn (which bumps the epoch from v5) answered.
	producerID    int64
	producerEpoch int16
}

func newMembers() *members { return &members{byName: map[string]string{}, byID: map[string]string{}} }

// name returns the script name of a member id, naming it if it is new.
func (m *members) name(id string) string {
	if id == "" {
		return ""
	}
	if n, ok := m.byID[id]; ok {
		return n
	}
	n := fmt.Sprintf("m%d", len(m.byID)+1)
	m.byID[id], m.byName[n] = n, id
	return n
}

// id returns the member id of a script name; an unknown name is sent as is.
func (m *members) id(name string) string {
	if id, ok := m.byName[name]; ok {
		return id
	}
	return name
}

// step is one request of the script and how to summarize its answer.
type step struct {
	name string
	req  func(m *members) kmsg.Request
}

func join(group, member string, instance *string) func(*members) kmsg.Request {
	return func(m *members) kmsg.Request {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.MemberID, r.InstanceID = group, m.id(member), instance
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
		r.ProtocolType = "consumer"
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{"orders"}
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
		return r
	}
}

func syncStep(group, member string, generation int32, assign bool) func(*members) kmsg.Request {
	return func(m *members) kmsg.Request {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.MemberID, r.Generation = group, m.id(member), generation
		if assign {
			r.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: m.id(member), MemberAssignment: []byte("all of it")}}
		}
		return r
	}
}

func heartbeat(group, member string, generation int32, instance *string) func(*members) kmsg.Request {
	return func(m *members) kmsg.Request {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.MemberID, r.Generation, r.InstanceID = group, m.id(member), generation, instance
		return r
	}
}

func commit(group, member string, generation int32, offset int64) func(*members) kmsg.Request {
	return func(m *members) kmsg.Request {
		r := commitRequest(group)
		r.MemberID, r.Generation = m.id(member), generation
		r.Topics[0].Partitions[0].Offset = offset
		return r
	}
}

func fetch(group string) func(*members) kmsg.Request {
	return func(*members) kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0}}}}}
		return r
	}
}

func leave(group, member string) func(*members) kmsg.Request {
	return func(m *members) kmsg.Request {
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group = group
		r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: m.id(member)}}
		return r
	}
}

func describe(groups ...string) func(*members) kmsg.Request {
	return func(*members) kmsg.Request {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups = groups
		return r
	}
}

func deleteGroups(groups ...string) func(*members) kmsg.Request {
	return func(*members) kmsg.Request {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = groups
		return r
	}
}

func list() func(*members) kmsg.Request {
	return func(*members) kmsg.Request { return kmsg.NewPtrListGroupsRequest() }
}

func offsetDelete(group string) func(*members) kmsg.Request {
	return func(*members) kmsg.Request {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = group
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		return r
	}
}

func initProducer(txid string) func(*members) kmsg.Request {
	return func(*members) kmsg.Request {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.TransactionalID, r.TransactionTimeoutMillis = kmsg.StringPtr(txid), 60000
		return r
	}
}

// txnCommit is a TxnOffsetCommit of orders/0 by the script's producer, at
// its epoch plus epochDelta.
func txnCommit(group, member string, generation int32, offset int64, epochDelta int16) func(*members) kmsg.Request {
	return func(m *members) kmsg.Request {
		r := txnCommitRequest(5, group, m.producerEpoch+epochDelta, offset)
		r.TransactionalID, r.ProducerID = "tx", m.producerID
		r.MemberID, r.Generation = m.id(member), generation
		return r
	}
}

// addOffsets is AddOffsetsToTxn of group, which a transaction coordinator
// (kfake, in both runs) answers: it starts the transaction there.
func addOffsets(group string) func(*members) kmsg.Request {
	return func(m *members) kmsg.Request {
		r := kmsg.NewPtrAddOffsetsToTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "tx", m.producerID, m.producerEpoch, group
		return r
	}
}

func endTxn(commit bool) func(*members) kmsg.Request {
	return func(m *members) kmsg.Request {
		r := kmsg.NewPtrEndTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = "tx", m.producerID, m.producerEpoch, commit
		return r
	}
}

func stableFetchStep(group string) func(*members) kmsg.Request {
	return func(m *members) kmsg.Request {
		r := fetch(group)(m).(*kmsg.OffsetFetchRequest)
		r.RequireStable = true
		return r
	}
}

// summary is what of an answer the two coordinators must agree on.
func summary(resp kmsg.Response, m *members) string {
	var b strings.Builder
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		fmt.Fprintf(&b, "code=%d gen=%d member=%s leader=%s protocol=%s members=%d", r.ErrorCode, r.Generation, m.name(r.MemberID), m.name(r.LeaderID), deref(r.Protocol), len(r.Members))
	case *kmsg.SyncGroupResponse:
		fmt.Fprintf(&b, "code=%d assignment=%q", r.ErrorCode, r.MemberAssignment)
	case *kmsg.HeartbeatResponse:
		fmt.Fprintf(&b, "code=%d", r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		fmt.Fprintf(&b, "code=%d", r.ErrorCode)
		for _, rm := range r.Members {
			fmt.Fprintf(&b, " %s:%d", m.name(rm.MemberID), rm.ErrorCode)
		}
	case *kmsg.InitProducerIDResponse:
		m.producerID, m.producerEpoch = r.ProducerID, r.ProducerEpoch
		fmt.Fprintf(&b, "code=%d", r.ErrorCode)
	case *kmsg.AddOffsetsToTxnResponse:
		fmt.Fprintf(&b, "code=%d", r.ErrorCode)
	case *kmsg.EndTxnResponse:
		if r.Version >= 5 && r.ErrorCode == 0 {
			m.producerEpoch = r.ProducerEpoch
		}
		fmt.Fprintf(&b, "code=%d", r.ErrorCode)
	case *kmsg.TxnOffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, "%s/%d:%d ", t.Topic, p.Partition, p.ErrorCode)
			}
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, "%s/%d:%d ", t.Topic, p.Partition, p.ErrorCode)
			}
		}
	case *kmsg.OffsetFetchResponse:
		for _, g := range r.Groups {
			fmt.Fprintf(&b, "%s code=%d", g.Group, g.ErrorCode)
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					fmt.Fprintf(&b, " %s/%d=%d:%d", t.Topic, p.Partition, p.Offset, p.ErrorCode)
				}
			}
		}
	case *kmsg.DescribeGroupsResponse:
		for _, g := range r.Groups {
			var ms []string
			for _, gm := range g.Members {
				ms = append(ms, m.name(gm.MemberID))
			}
			slices.Sort(ms)
			fmt.Fprintf(&b, "%s code=%d state=%s protocol=%s members=%v; ", g.Group, g.ErrorCode, g.State, g.Protocol, ms)
		}
	case *kmsg.ListGroupsResponse:
		var gs []string
		for _, g := range r.Groups {
			gs = append(gs, g.Group+":"+g.GroupState)
		}
		slices.Sort(gs)
		fmt.Fprintf(&b, "code=%d %v", r.ErrorCode, gs)
	case *kmsg.DeleteGroupsResponse:
		for _, g := range r.Groups {
			fmt.Fprintf(&b, "%s:%d ", g.Group, g.ErrorCode)
		}
	case *kmsg.OffsetDeleteResponse:
		fmt.Fprintf(&b, "code=%d", r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, " %s/%d:%d", t.Topic, p.Partition, p.ErrorCode)
			}
		}
	default:
		fmt.Fprintf(&b, "%T", resp)
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// documentedDifferences are the steps where offsetd answers as Kafka does
// and kfake does not, with offsetd's answer; README.md lists them.
var documentedDifferences = map[string]string{
	// Kafka answers an OffsetFetch of a group it does not know with -1
	// offsets and no error; kfake answers GROUP_ID_NOT_FOUND.
	"fetch from the deleted group": "g code=0 orders/0=-1:0",
	// Kafka's classic coordinator answers UNKNOWN_MEMBER_ID for a group it
	// does not know, which makes a member rejoin (after an offsetd restart,
	// that is every member); kfake answers GROUP_ID_NOT_FOUND.
	"sync of an unknown group":      `code=25 assignment=""`,
	"heartbeat of an unknown group": "code=25",
	"leave of an unknown group":     "code=25",
}

// TestDifferentialAgainstKfake plays one script of group and offset requests
// against kfake's own group coordinator and against offsetd's handler
// behind kfake, and compares the answers.
func TestDifferentialAgainstKfake(t *testing.T) {
	static := kmsg.StringPtr("instance-1")
	script := []step{
		{"simple commit", commit("plain", "", -1, 5)},
		{"simple fetch", fetch("plain")},
		{"commit with a generation to an empty group", commit("plain", "", 3, 6)},
		{"first join", join("g", "", nil)},
		{"join with the given id", join("g", "m1", nil)},
		{"leader sync", syncStep("g", "m1", 1, true)},
		{"heartbeat", heartbeat("g", "m1", 1, nil)},
		{"member commit", commit("g", "m1", 1, 10)},
		{"commit at an old generation", commit("g", "m1", 0, 11)},
		{"commit from an unknown member", commit("g", "nobody", 1, 12)},
		{"simple commit to a group with members", commit("g", "", -1, 13)},
		{"fetch", fetch("g")},
		{"heartbeat at a wrong generation", heartbeat("g", "m1", 7, nil)},
		{"delete a group with members", deleteGroups("g")},
		{"delete offsets a member subscribes to", offsetDelete("g")},
		{"describe", describe("g", "plain", "missing")},
		{"list", list()},
		{"second member, first join", join("g", "", nil)},
		{"heartbeat during the rebalance", heartbeat("g", "m1", 1, nil)},
		{"leave", leave("g", "m1")},
		{"second member joins the emptied group", join("g", "m2", nil)},
		{"leave an unknown member", leave("g", "nobody")},
		{"last leaves", leave("g", "m2")},
		{"describe the empty group", describe("g")},
		{"delete the empty group", deleteGroups("g", "never-was")},
		{"fetch from the deleted group", fetch("g")},
		{"static join", join("s", "", static)},
		{"static sync", syncStep("s", "m3", 1, true)},
		{"static rejoin under a new id", join("s", "", static)},
		{"old static id is fenced", heartbeat("s", "m3", 1, static)},
		{"delete offsets of an empty group", offsetDelete("plain")},
		{"fetch after offset delete", fetch("plain")},
		{"sync of an unknown group", syncStep("nothing", "m1", 1, false)},
		{"heartbeat of an unknown group", heartbeat("nothing", "m1", 1, nil)},
		{"leave of an unknown group", leave("nothing", "m1")},
	}

	compareScript(t, script)
}

// TestDifferentialTxnAgainstKfake plays a script of transactional offset
// commits: kfake is the transaction coordinator in both runs, and its
// transactions' ends are forwarded to offsetd as markers.
func TestDifferentialTxnAgainstKfake(t *testing.T) {
	compareScript(t, []step{
		{"init producer", initProducer("tx")},
		{"simple commit", commit("tg", "", -1, 1)},
		{"add offsets", addOffsets("tg")},
		{"txn commit", txnCommit("tg", "", -1, 5, 0)},
		{"stable fetch, pending", stableFetchStep("tg")},
		{"fetch, pending", fetch("tg")},
		{"commit the transaction", endTxn(true)},
		{"stable fetch, committed", stableFetchStep("tg")},
		{"txn commit at an older epoch", txnCommit("tg", "", -1, 6, -1)},
		{"add offsets again", addOffsets("tg")},
		{"txn commit to abort", txnCommit("tg", "", -1, 7, 0)},
		{"abort", endTxn(false)},
		{"stable fetch after the abort", stableFetchStep("tg")},
		{"txn commit with a generation, no group", txnCommit("nog", "", 3, 1, 0)},
		{"first join", join("cg", "", nil)},
		{"join", join("cg", "m1", nil)},
		{"sync", syncStep("cg", "m1", 1, true)},
		{"add the member's offsets", addOffsets("cg")},
		{"member txn commit", txnCommit("cg", "m1", 1, 3, 0)},
		{"txn commit at a wrong generation", txnCommit("cg", "m1", 2, 3, 0)},
		{"txn commit from an unknown member", txnCommit("cg", "nobody", 1, 3, 0)},
		{"txn commit with no member and no generation", txnCommit("cg", "", -1, 4, 0)},
		{"txn commit to a new group", txnCommit("fresh", "", -1, 2, 0)},
		{"list with a group of pending offsets only", list()},
		{"describe a group of pending offsets only", describe("fresh")},
		{"commit the member's transaction", endTxn(true)},
		{"list once committed", list()},
		{"fetch the member's group", fetch("cg")},
	})
}

// compareScript plays script against kfake alone and against offsetd
// behind kfake, and reports every answer that differs, but for
// documentedDifferences.
func compareScript(t *testing.T, script []step) {
	t.Helper()
	kfakeAnswers := playScript(t, script, false)
	offsetdAnswers := playScript(t, script, true)
	for i, s := range script {
		if want, ok := documentedDifferences[s.name]; ok {
			if offsetdAnswers[i] != want {
				t.Errorf("%s: offsetd answered %s, want %s (kfake: %s)", s.name, offsetdAnswers[i], want, kfakeAnswers[i])
			}
			continue
		}
		if kfakeAnswers[i] == offsetdAnswers[i] {
			continue
		}
		t.Errorf("%s:\n  kfake:   %s\n  offsetd: %s", s.name, kfakeAnswers[i], offsetdAnswers[i])
	}
}

// playScript runs the script against a fresh kfake cluster, its group
// requests answered by kfake itself or by offsetd.
func playScript(t *testing.T, script []step, offsetd bool) []string {
	var addrs []string
	if offsetd {
		rc := newRoutedCluster(t, 1, "orders")
		opts := testHandlerOptions()
		opts.Broker = rc.broker(t)
		rc.current.Store(newHandler(t, openCoordinator(t, t.TempDir()), opts))
		rc.forwardTxnMarkers(t, nil)
		addrs = rc.ListenAddrs()
	} else {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"), kfake.GroupMinSessionTimeout(0), kfake.MaxVersions(handlerKafkaVersions()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cluster.Close)
		addrs = cluster.ListenAddrs()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testContext(t)
	m := newMembers()
	var out []string
	for _, s := range script {
		req := s.req(m)
		resp, err := cl.Broker(0).Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		out = append(out, summary(resp, m))
	}
	return out
}
