package kafka

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnCommitRequest is a TxnOffsetCommit of orders/0 at offset, at version
// v, by producer 1.
func txnCommitRequest(v int16, group string, epoch int16, offset int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = v
	r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = "tx", group, 1, epoch
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = 0, offset, -1
	r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "orders", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{p}}}
	return r
}

func txnCode(resp kmsg.Response) int16 {
	return resp.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// markerRequest is a WriteTxnMarkers for producer 1, naming two
// partitions of __consumer_offsets and one of another topic.
func markerRequest(epoch int16, commit bool) *kmsg.WriteTxnMarkersRequest {
	r := kmsg.NewPtrWriteTxnMarkersRequest()
	r.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = 1, epoch, commit
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: offsetsTopic, Partitions: []int32{3, 7}}, {Topic: "orders", Partitions: []int32{0}}}
	r.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
	return r
}

// markerCodes returns the codes of a marker's __consumer_offsets
// partitions (which must agree) and of the other topic's.
func markerCodes(t *testing.T, resp kmsg.Response) (offsets, other int16) {
	t.Helper()
	ts := resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics
	if len(ts) != 2 || len(ts[0].Partitions) != 2 || ts[0].Partitions[0].ErrorCode != ts[0].Partitions[1].ErrorCode {
		t.Fatalf("marker answer %+v", ts)
	}
	return ts[0].Partitions[0].ErrorCode, ts[1].Partitions[0].ErrorCode
}

// stableFetch fetches orders/0 of group with RequireStable at version v
// (7: one group; 8: groups), returning offset and partition code.
func stableFetch(gc groupClient, v int16, group string, stable bool) (int64, int16) {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.RequireStable = v, stable
	if v >= 8 {
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0}}}}}
		p := gc.do(r).(*kmsg.OffsetFetchResponse).Groups[0].Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	r.Group = group
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
	p := gc.do(r).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

func wantFetch(t *testing.T, gc groupClient, what, group string, stable bool, offset int64, code *kerr.Error) {
	t.Helper()
	for _, v := range []int16{7, 8} {
		off, c := stableFetch(gc, v, group, stable)
		wantCode(t, what, c, code)
		if off != offset {
			t.Errorf("%s (v%d): offset %d, want %d", what, v, off, offset)
		}
	}
}

// TestTxnOffsetCommit: offsets stay pending (unstable to a RequireStable
// fetch, invisible to others) until a marker commits them or drops them;
// producer epochs fence as Kafka's do, per version.
func TestTxnOffsetCommit(t *testing.T) {
	h := newHandler(t, openCoordinator(t, t.TempDir()), testHandlerOptions())
	gc := groupClient{t, h}
	wantCode(t, "txn commit", txnCode(gc.do(txnCommitRequest(3, "g", 2, 10))), nil)
	wantFetch(t, gc, "stable fetch, pending", "g", true, -1, kerr.UnstableOffsetCommit)
	wantFetch(t, gc, "fetch, pending", "g", false, -1, nil)
	all := kmsg.NewPtrOffsetFetchRequest()
	all.Version, all.Group, all.RequireStable = 7, "g", true
	if ts := gc.do(all).(*kmsg.OffsetFetchResponse).Topics; len(ts) != 0 {
		t.Fatalf("fetch of all topics lists a pending offset without a committed one: %+v", ts)
	}

	// A zombie of an older epoch is fenced, in the codes its version knows.
	wantCode(t, "older epoch, v3", txnCode(gc.do(txnCommitRequest(3, "g", 1, 11))), kerr.ProducerFenced)
	wantCode(t, "older epoch, v2", txnCode(gc.do(txnCommitRequest(2, "g", 1, 11))), kerr.InvalidProducerEpoch)
	offsets, other := markerCodes(t, gc.do(markerRequest(1, true)))
	wantCode(t, "marker of an older epoch", offsets, kerr.InvalidProducerEpoch)
	wantCode(t, "marker's other topic", other, kerr.UnknownTopicOrPartition)
	wantFetch(t, gc, "stable fetch after refusals", "g", true, -1, kerr.UnstableOffsetCommit)

	offsets, _ = markerCodes(t, gc.do(markerRequest(2, true)))
	wantCode(t, "commit marker", offsets, nil)
	wantFetch(t, gc, "stable fetch, committed", "g", true, 10, nil)
	offsets, _ = markerCodes(t, gc.do(markerRequest(2, true)))
	wantCode(t, "marker retried", offsets, nil)

	// An abort drops; the exported call ends a transaction as a marker does.
	wantCode(t, "txn commit to abort", txnCode(gc.do(txnCommitRequest(5, "g", 3, 20))), nil)
	if err := h.WriteTxnMarker(context.Background(), 1, 2, false); err != kerr.InvalidProducerEpoch {
		t.Fatalf("WriteTxnMarker of an older epoch: %v", err)
	}
	if err := h.WriteTxnMarker(context.Background(), 1, 3, false); err != nil {
		t.Fatal(err)
	}
	wantFetch(t, gc, "stable fetch after the abort", "g", true, 10, nil)

	// Refusals of the request as a whole.
	bad := txnCommitRequest(3, "", 3, 1)
	wantCode(t, "empty group", txnCode(gc.do(bad)), kerr.InvalidGroupID)
	bad = txnCommitRequest(3, "g", 3, -5)
	wantCode(t, "bad offset", txnCode(gc.do(bad)), kerr.InvalidRequest)
	bad = txnCommitRequest(3, "g", 3, 1)
	bad.ProducerID = -1
	wantCode(t, "no producer id", txnCode(gc.do(bad)), kerr.InvalidProducerIDMapping)
	wantFetch(t, gc, "after the refusals", "g", true, 10, nil)
}

// TestTxnOffsetCommitFencedByGroup: a TxnOffsetCommit that names a member
// or a generation (v3+) must come from a member at the group's
// generation; one that names neither is taken whatever the group.
func TestTxnOffsetCommitFencedByGroup(t *testing.T) {
	h := newHandler(t, openCoordinator(t, t.TempDir()), testHandlerOptions())
	gc := groupClient{t, h}
	instance := kmsg.StringPtr("i1")
	jr := gc.joinRequest("g", "", instance, 10*time.Second, 10*time.Second)
	joined := gc.do(jr).(*kmsg.JoinGroupResponse)
	wantCode(t, "join", joined.ErrorCode, nil)
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Version = 5
	sr.Group, sr.MemberID, sr.InstanceID, sr.Generation = "g", joined.MemberID, instance, joined.Generation
	sr.ProtocolType, sr.Protocol = kmsg.StringPtr("consumer"), joined.Protocol
	sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: joined.MemberID, MemberAssignment: []byte{}}}
	wantCode(t, "sync", gc.do(sr).(*kmsg.SyncGroupResponse).ErrorCode, nil)

	at := func(member string, instance *string, generation int32) *kmsg.TxnOffsetCommitRequest {
		r := txnCommitRequest(3, "g", 0, 5)
		r.MemberID, r.InstanceID, r.Generation = member, instance, generation
		return r
	}
	wantCode(t, "member at its generation", txnCode(gc.do(at(joined.MemberID, instance, joined.Generation))), nil)
	wantCode(t, "wrong generation", txnCode(gc.do(at(joined.MemberID, instance, joined.Generation+1))), kerr.IllegalGeneration)
	wantCode(t, "unknown member", txnCode(gc.do(at("nobody", nil, joined.Generation))), kerr.UnknownMemberID)
	wantCode(t, "fenced instance", txnCode(gc.do(at("nobody", instance, joined.Generation))), kerr.FencedInstanceID)
	wantCode(t, "no member, no generation", txnCode(gc.do(at("", nil, -1))), nil)
	wantCode(t, "before v3: no member fields", txnCode(gc.do(txnCommitRequest(2, "g", 0, 6))), nil)
	unknown := txnCommitRequest(3, "nothing", 0, 1)
	unknown.Generation = 4
	wantCode(t, "generation for an unknown group", txnCode(gc.do(unknown)), kerr.IllegalGeneration)
	unknown.Generation = -1
	wantCode(t, "simple txn commit for an unknown group", txnCode(gc.do(unknown)), nil)
}

// TestTxnOffsetCommitConsumerGroup: in a KIP-848 group, the generation of
// a TxnOffsetCommit is the member epoch, fenced as OffsetCommit fences it
// but over any version, a stale epoch answered ILLEGAL_GENERATION (as
// Kafka does before TxnOffsetCommit v6).
func TestTxnOffsetCommitConsumerGroup(t *testing.T) {
	o := testHandlerOptions()
	o.Topics = knownTopics{"orders": {id: [16]byte{1}, partitions: 2}}
	h := newHandler(t, openCoordinator(t, t.TempDir()), o)
	gc := groupClient{t, h}
	resp := gc.consumerBeat("a", 0, nil, [16]byte{1}, nil)
	wantCode(t, "heartbeat", resp.ErrorCode, nil)
	member, epoch := "a", resp.MemberEpoch
	at := func(member string, epoch int32) *kmsg.TxnOffsetCommitRequest {
		r := txnCommitRequest(4, "g", 0, 5)
		r.MemberID, r.Generation = member, epoch
		return r
	}
	wantCode(t, "member at its epoch", txnCode(gc.do(at(member, epoch))), nil)
	wantCode(t, "future epoch", txnCode(gc.do(at(member, epoch+3))), kerr.IllegalGeneration)
	wantCode(t, "unknown member", txnCode(gc.do(at("nobody", epoch))), kerr.UnknownMemberID)
	wantCode(t, "no member, no epoch", txnCode(gc.do(at("", -1))), nil)
}

// TestTxnPendingAcrossRestart: offsets pending when the coordinator
// closes are pending when it opens again (the journal, then a snapshot),
// and the marker sent after the restart commits them.
func TestTxnPendingAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	c := openCoordinator(t, dir)
	h := newHandler(t, c, testHandlerOptions())
	gc := groupClient{t, h}
	wantCode(t, "txn commit", txnCode(gc.do(txnCommitRequest(3, "g", 0, 10))), nil)
	wantCode(t, "txn commit, other group", txnCode(gc.do(txnCommitRequest(3, "h", 0, 30))), nil)
	for round := range 2 {
		h.Close()
		if round == 1 {
			if err := c.Snapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c = openCoordinator(t, dir)
		h = newHandler(t, c, testHandlerOptions())
		gc = groupClient{t, h}
		wantFetch(t, gc, "stable fetch after a restart", "g", true, -1, kerr.UnstableOffsetCommit)
		wantFetch(t, gc, "stable fetch after a restart, other group", "h", true, -1, kerr.UnstableOffsetCommit)
	}
	wantCode(t, "zombie after the restart", txnCode(gc.do(txnCommitRequest(3, "g", 0, 11))), nil)
	offsets, _ := markerCodes(t, gc.do(markerRequest(0, true)))
	wantCode(t, "commit marker after the restart", offsets, nil)
	wantFetch(t, gc, "committed after the restart", "g", true, 11, nil)
	wantFetch(t, gc, "committed after the restart, other group", "h", true, 30, nil)
}

// TestApiVersionsAdvertiseTxn: the listener advertises the transactional
// requests at the versions the handler serves, and serves them.
func TestApiVersionsAdvertiseTxn(t *testing.T) {
	h := newHandler(t, openCoordinator(t, t.TempDir()), testHandlerOptions())
	addr := listen(t, h, ServerOptions{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testContext(t)
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int16][2]int16{int16(kmsg.TxnOffsetCommit): {0, 5}, int16(kmsg.WriteTxnMarkers): {0, 2}}
	for _, k := range resp.ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			if k.MinVersion != w[0] || k.MaxVersion != w[1] {
				t.Errorf("%s: v%d-v%d, want v%d-v%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, w[0], w[1])
			}
			delete(want, k.ApiKey)
		}
	}
	if len(want) > 0 {
		t.Fatalf("not advertised: %v", want)
	}
	tc, err := txnCommitRequest(5, "g", 0, 1).RequestWith(ctx, cl)
	if err != nil || tc.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit over the listener: %+v %v", tc, err)
	}
	// A transaction coordinator sends markers to the broker it means;
	// kgo would look for the leaders of __consumer_offsets.
	mresp, err := cl.SeedBrokers()[0].Request(ctx, markerRequest(0, true))
	if err != nil {
		t.Fatal(err)
	}
	if mr := mresp.(*kmsg.WriteTxnMarkersResponse); mr.Markers[0].Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("WriteTxnMarkers over the listener: %+v", mr)
	}
}

// TestTxnMarkersOnCluster: on a 3-node cluster, a client's
// TxnOffsetCommits reach each group's coordinator; a marker ends the
// groups of the node it reaches, and sent to every node, as a transaction
// coordinator of an embedding broker would, it commits them all.
func TestTxnMarkersOnCluster(t *testing.T) {
	ctx := testContext(t)
	kc := newKafkaCluster(t, 3)
	groups := []string{"a", "b", "c", "d", "e", "f"}
	leaders := map[string]int32{}
	for _, g := range groups {
		l, err := kc.awaitLeader(ctx, g, func(id int32) bool { return id == kc.preferred(g) })
		if err != nil {
			t.Fatal(err)
		}
		leaders[g] = l
	}
	if nodes := slices.Compact(slices.Sorted(maps.Values(leaders))); len(nodes) < 2 {
		t.Fatalf("every group is led by one node (%v): the test needs groups on several", leaders)
	}
	cl := kc.client(t)
	for i, g := range groups {
		resp, err := txnCommitRequest(3, g, 0, int64(10+i)).RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("txn commit of %s: %+v %v", g, resp, err)
		}
	}
	pending := func(g string) int {
		p, err := kc.leaderCoordinator(ctx, g).PendingOffsets(g)
		if err != nil {
			t.Fatal(err)
		}
		return len(p)
	}
	first := leaders[groups[0]]
	offsets, _ := markerCodes(t, kc.handle(t, first, markerRequest(0, true)))
	wantCode(t, "marker to one node", offsets, nil)
	for _, g := range groups {
		if want := map[bool]int{true: 0, false: 1}[leaders[g] == first]; pending(g) != want {
			t.Errorf("group %s (led by node %d) after a marker to node %d: %d pending, want %d", g, leaders[g], first, pending(g), want)
		}
	}
	for _, b := range kc.brokers {
		offsets, _ := markerCodes(t, kc.handle(t, b.NodeID, markerRequest(0, true)))
		wantCode(t, "marker to every node", offsets, nil)
	}
	for i, g := range groups {
		o, ok, err := kc.leaderCoordinator(ctx, g).Fetch(g, "orders", 0)
		if err != nil || !ok || o.Offset != int64(10+i) || pending(g) != 0 {
			t.Errorf("group %s: %+v %v %v, %d pending", g, o, ok, err, pending(g))
		}
	}
}

// handle hands req to node id's handler, as its broker would.
func (kc *kafkaCluster) handle(t *testing.T, id int32, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := kc.handlers[id].Handle(testContext(t), req, Client{ID: "broker"})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
