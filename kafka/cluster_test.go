package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/cluster/clustertest"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/internal/offsetcheck"
	"github.com/offsetd/offsetd/partitioner"
)

// kafkaCluster is a cluster of nodes in this process, over a cluster
// Network, each serving Kafka clients on a loopback listener.
type kafkaCluster struct {
	t        *testing.T
	nw       *clustertest.Network
	brokers  []Broker
	handlers map[int32]*Handler // every node's, stopped or not

	mu    sync.Mutex
	nodes map[int32]*kafkaNode // guarded by mu: the running ones
}

type kafkaNode struct {
	node    *cluster.Node
	handler *Handler
	server  *Server // nil when a Kafka peer hands the node its requests
	served  chan error
}

// newKafkaCluster runs size nodes, each serving Kafka clients on a
// loopback listener of its own.
func newKafkaCluster(t *testing.T, size int) *kafkaCluster {
	t.Helper()
	var brokers []Broker
	var lns []net.Listener
	for id := range int32(size) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		brokers = append(brokers, Broker{NodeID: id + 1, Host: addr.IP.String(), Port: int32(addr.Port)})
		lns = append(lns, ln)
	}
	return startKafkaCluster(t, brokers, lns)
}

// startKafkaCluster runs a node per broker (ids from 1); it serves Kafka
// clients on lns when given, else whoever embeds the handlers hands them
// the requests.
func startKafkaCluster(t *testing.T, brokers []Broker, lns []net.Listener) *kafkaCluster {
	t.Helper()
	kc := &kafkaCluster{t: t, nw: clustertest.NewNetwork(1), brokers: brokers, handlers: map[int32]*Handler{}, nodes: map[int32]*kafkaNode{}}
	var peers []uint64
	for _, b := range brokers {
		peers = append(peers, uint64(b.NodeID))
	}
	dir := t.TempDir()
	for i, b := range kc.brokers {
		copts := coordinator.Options{Partitions: 4, Logger: quiet}
		n, err := cluster.Open(filepath.Join(dir, strconv.Itoa(int(b.NodeID))), copts,
			cluster.Options{ID: uint64(b.NodeID), Peers: peers, Transport: kc.nw.Transport(uint64(b.NodeID)), TickInterval: 5 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		kc.nw.Attach(uint64(b.NodeID), n)
		opts := testHandlerOptions()
		opts.Broker, opts.Brokers = b, kc.brokers
		h, err := NewHandler(n.Coordinator(), opts)
		if err != nil {
			t.Fatal(err)
		}
		kn := &kafkaNode{node: n, handler: h, served: make(chan error, 1)}
		if lns != nil {
			if kn.server, err = NewServer(h, ServerOptions{Logger: quiet}); err != nil {
				t.Fatal(err)
			}
			go func() { kn.served <- kn.server.Serve(lns[i]) }()
		}
		kc.nodes[b.NodeID] = kn
		kc.handlers[b.NodeID] = h
	}
	t.Cleanup(func() {
		for _, b := range kc.brokers {
			kc.stop(b.NodeID)
		}
		kc.nw.Close()
	})
	return kc
}

// stop closes node id's listener, then the node, which hands the lead of
// its partitions to the others.
func (kc *kafkaCluster) stop(id int32) {
	kc.mu.Lock()
	kn := kc.nodes[id]
	delete(kc.nodes, id)
	kc.mu.Unlock()
	if kn == nil {
		return
	}
	kn.handler.Close()
	if kn.server != nil {
		kn.server.Close()
		if err := <-kn.served; err != nil {
			kc.t.Errorf("node %d: Serve: %v", id, err)
		}
	}
	if err := kn.node.Close(); err != nil && !errors.Is(err, coordinator.ErrClosed) {
		kc.t.Errorf("node %d: Close: %v", id, err)
	}
	kc.nw.Detach(uint64(id))
}

// awaitLeader waits until every running node knows the same leader of
// group's partition, one that want accepts, and returns it.
func (kc *kafkaCluster) awaitLeader(ctx context.Context, group string, want func(int32) bool) (int32, error) {
	for {
		kc.mu.Lock()
		var nodes []*cluster.Node
		for _, kn := range kc.nodes {
			nodes = append(nodes, kn.node)
		}
		kc.mu.Unlock()
		part, err := partitioner.New(nodes[0].Coordinator().Partitions())
		if err != nil {
			return 0, err
		}
		p := part.Group(group)
		agreed := int32(-1)
		for _, n := range nodes {
			for l := n.Leader(p); l == 0 || !want(int32(l)); l = n.Leader(p) {
				if _, err := n.AwaitLeader(ctx, p, l); err != nil {
					return 0, err
				}
			}
			if l := int32(n.Leader(p)); agreed == -1 || agreed == l {
				agreed = l
			} else {
				agreed = 0
			}
		}
		if agreed > 0 && want(agreed) {
			return agreed, nil
		}
	}
}

// coordinator returns a running node's coordinator.
func (kc *kafkaCluster) coordinator() *coordinator.Coordinator {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	for _, kn := range kc.nodes {
		return kn.node.Coordinator()
	}
	return nil
}

// leaderCoordinator returns the coordinator of the node that leads group's
// partition.
func (kc *kafkaCluster) leaderCoordinator(ctx context.Context, group string) *coordinator.Coordinator {
	kc.t.Helper()
	leader, err := kc.awaitLeader(ctx, group, func(int32) bool { return true })
	if err != nil {
		kc.t.Fatal(err)
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	return kc.nodes[leader].node.Coordinator()
}

// preferred is the node that leads group's partition whenever it is up:
// the partitions are dealt out over the nodes.
func (kc *kafkaCluster) preferred(group string) int32 {
	part, err := partitioner.New(4)
	if err != nil {
		kc.t.Fatal(err)
	}
	return kc.brokers[part.Group(group)%len(kc.brokers)].NodeID
}

func (kc *kafkaCluster) addrs() []string {
	var out []string
	for _, b := range kc.brokers {
		out = append(out, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	return out
}

// clusterMember is a classic group member driven request by request
// through a kgo client, which sends each request to the group's
// coordinator and finds it again when told NOT_COORDINATOR.
type clusterMember struct {
	t          *testing.T
	cl         *kgo.Client
	group      string
	id         string
	generation int32
	next       int64 // the next offset to commit
}

// join joins (again) as a new member and syncs.
func (m *clusterMember) join(ctx context.Context) {
	m.t.Helper()
	m.id = ""
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID = m.group, m.id
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 30000
		req.ProtocolType = "consumer"
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("meta")}}
		resp, err := req.RequestWith(ctx, m.cl)
		if err != nil {
			m.t.Fatalf("join: %v", err)
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code {
			m.id = resp.MemberID
			continue
		}
		if resp.ErrorCode != 0 {
			m.t.Fatalf("join: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		m.id, m.generation = resp.MemberID, resp.Generation
		break
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = m.group, m.id, m.generation
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: m.id, MemberAssignment: []byte("all")}}
	resp, err := sync.RequestWith(ctx, m.cl)
	if err != nil || resp.ErrorCode != 0 {
		m.t.Fatalf("sync: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
}

// commit commits offset at the member's generation and returns the code.
func (m *clusterMember) commit(ctx context.Context, offset int64) (int16, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.generation
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return 0, err
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// commitAndFetch commits the next offsets n times, reading the group's
// offset back after each, and records both in h. A commit refused because
// the coordinator moved and started the group afresh makes the member
// rejoin.
func (m *clusterMember) commitAndFetch(ctx context.Context, h *offsetcheck.History, n int) {
	m.t.Helper()
	for range n {
		call := h.Call()
		c, err := m.commit(ctx, m.next)
		switch {
		case err == nil && c == 0:
			h.Commit(0, m.group, m.next, call, true)
			m.next++
		case err == nil && (c == kerr.IllegalGeneration.Code || c == kerr.UnknownMemberID.Code):
			h.Commit(0, m.group, m.next, call, false) // refused, but claim nothing
			m.join(ctx)
		default:
			h.Commit(0, m.group, m.next, call, false)
			if ctx.Err() != nil {
				m.t.Fatalf("commit %d: %v %v", m.next, err, kerr.ErrorForCode(c))
			}
		}
		call = h.Call()
		if got, err := m.fetch(ctx); err == nil {
			h.Read(0, m.group, got, call)
		}
	}
}

// checkHistory checks that the group holds its last acknowledged commit
// and that the history is linearizable.
func (m *clusterMember) checkHistory(ctx context.Context, h *offsetcheck.History) {
	m.t.Helper()
	got, err := m.fetch(ctx)
	if err != nil {
		m.t.Fatal(err)
	}
	if last, _, _ := h.LastAck(m.group); got != last {
		m.t.Errorf("the group's offset is %d, want the last acknowledged %d", got, last)
	}
	if err := h.Check(m.t.TempDir(), 10*time.Second); err != nil {
		m.t.Error(err)
	}
}

// fetch reads the group's offset (-1 for none) from its coordinator.
func (m *clusterMember) fetch(ctx context.Context) (int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = m.group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	return resp.Topics[0].Partitions[0].Offset, nil
}

// client returns a kgo client seeded with every node, closed when the
// test ends.
func (kc *kafkaCluster) client(t *testing.T) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.addrs()...), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A consumer group on a 3-node cluster: its member commits through the
// node that leads the group's partition; that node stops, handing its lead
// off; the client finds the new coordinator, the member rejoins at a higher
// generation and commits go on. No acknowledged commit is lost and the
// history of commits and fetches is linearizable.
func TestGroupOnCluster(t *testing.T) {
	const group = "workers"
	ctx := testContext(t)
	kc := newKafkaCluster(t, 3)
	cl := kc.client(t)

	// Metadata lists every node.
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 3 {
		t.Fatalf("Metadata lists %d brokers, want 3: %+v", len(meta.Brokers), meta.Brokers)
	}
	// The lead settles on the partition's preferred node.
	leader, err := kc.awaitLeader(ctx, group, func(id int32) bool { return id == kc.preferred(group) })
	if err != nil {
		t.Fatal(err)
	}
	// FindCoordinator, asked of any node, names the leader. A node that
	// knows no leader for a moment, or an old one (an election timeout on
	// a loaded machine), answers COORDINATOR_NOT_AVAILABLE or that node,
	// which clients handle by asking again: so does the test, once every
	// node names the preferred leader again, until the test's deadline.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = group, []string{group}
	for _, b := range kc.brokers {
		for {
			resp, err := fc.RequestWith(ctx, cl.Broker(int(b.NodeID)))
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Coordinators) == 1 { // v4 and later
				resp.NodeID, resp.ErrorCode = resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
			}
			if resp.ErrorCode == 0 && resp.NodeID == leader {
				break
			}
			got := fmt.Sprintf("node %d, code %v", resp.NodeID, kerr.ErrorForCode(resp.ErrorCode))
			t.Logf("FindCoordinator asked of node %d: %s; asking again once the lead is settled on node %d", b.NodeID, got, leader)
			if _, err := kc.awaitLeader(ctx, group, func(id int32) bool { return id == leader }); err != nil {
				t.Fatalf("FindCoordinator asked of node %d: %s; want node %d (%v)", b.NodeID, got, leader, err)
			}
		}
	}

	m := &clusterMember{t: t, cl: cl, group: group}
	m.join(ctx)
	// A group's request sent to another node is answered NOT_COORDINATOR.
	other := kc.brokers[leader%3].NodeID // the next node
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, m.id, m.generation
	hb, err := req.RequestWith(ctx, cl.Broker(int(other)))

	if err != nil {
		t.Fatal(err)
	}
	if hb.ErrorCode != kerr.NotCoordinator.Code {
		t.Errorf("heartbeat sent to node %d (not the coordinator): %v, want NOT_COORDINATOR", other, kerr.ErrorForCode(hb.ErrorCode))
	}

	h := offsetcheck.New()
	commits := func(n int) { m.commitAndFetch(ctx, h, n) }
	commits(20)
	before := m.generation
	kc.stop(leader)
	commits(20)
	if m.generation <= before {
		t.Errorf("generation after the coordinator moved is %d, not above %d", m.generation, before)
	}
	if h.Acked() < 30 {
		t.Errorf("%d commits acknowledged of 40", h.Acked())
	}
	m.checkHistory(ctx, h)
}

// The lead of a group's partition leaves its preferred node (cut off) and
// comes back to it (let back in). The node it left drops the group's
// membership; the node it returns to holds membership from before the
// group ran elsewhere, which it drops too, seeing a higher stored
// generation; the member rejoins each time at a higher generation and
// commits go on with none lost.
func TestGroupOnClusterLeadReturns(t *testing.T) {
	const group = "workers"
	ctx := testContext(t)
	kc := newKafkaCluster(t, 3)
	cl := kc.client(t)
	preferred := kc.preferred(group)
	if _, err := kc.awaitLeader(ctx, group, func(id int32) bool { return id == preferred }); err != nil {
		t.Fatal(err)
	}
	m := &clusterMember{t: t, cl: cl, group: group}
	h := offsetcheck.New()
	m.join(ctx)
	m.commitAndFetch(ctx, h, 10)
	first := m.generation

	kc.nw.Isolate(uint64(preferred))
	m.commitAndFetch(ctx, h, 10)
	if m.generation <= first {
		t.Fatalf("generation while node %d is cut off is %d, not above %d", preferred, m.generation, first)
	}
	second := m.generation

	kc.nw.Heal()
	if _, err := kc.awaitLeader(ctx, group, func(id int32) bool { return id == preferred }); err != nil {
		t.Fatal(err)
	}
	m.commitAndFetch(ctx, h, 10)
	if m.generation <= second {
		t.Errorf("generation once the lead is back on node %d is %d, not above %d", preferred, m.generation, second)
	}
	if h.Acked() < 20 {
		t.Errorf("%d commits acknowledged of 30", h.Acked())
	}
	m.checkHistory(ctx, h)
}

// kgo consumers in one group on a Kafka peer (kfake, serving the records)
// whose group coordinator is a 3-node offsetd cluster, each kfake broker
// handing its group requests to one node, as Go brokers embedding offsetd
// would. The node that leads the group's partition stops mid-way and hands
// its lead off: the consumers find the new coordinator, rejoin, and every
// record is consumed and committed with no progress lost.
func TestConsumerGroupOnCluster(t *testing.T) {
	const (
		topic      = "events"
		group      = "workers"
		partitions = 3
		records    = 300
	)
	ctx := testContext(t)
	// Broker 0 serves records only; brokers 1-3 are the nodes.
	rc := newRoutedBrokers(t, 4, partitions, topic)
	t.Cleanup(func() { rc.trace.logIfFailed(t) })
	var brokers []Broker
	for id, addr := range rc.ListenAddrs()[1:] {
		host, port, err := splitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		brokers = append(brokers, Broker{NodeID: int32(id + 1), Host: host, Port: port})
	}
	kc := startKafkaCluster(t, brokers, nil)
	rc.handlerOf = func(node int32) *Handler { return kc.handlers[max(node, 1)] }
	preferred := kc.preferred(group)
	if _, err := kc.awaitLeader(ctx, group, func(id int32) bool { return id == preferred }); err != nil {
		t.Fatal(err)
	}

	tl := newTally()
	seeds := rc.ListenAddrs()
	produce(t, seeds, topic, partitions, 0, records/2)
	a := startConsumer(t, seeds, group, topic, tl)
	b := startConsumer(t, seeds, group, topic, tl)
	waitAssigned(ctx, t, a, b)
	if err := tl.waitDistinct(ctx, records/2); err != nil {
		t.Fatal(err)
	}
	if err := waitOffsets(ctx, kc.coordinator(), group, "an offset", func(stored []coordinator.PartitionOffset) bool { return len(stored) > 0 }); err != nil {
		t.Fatal(err)
	}
	before, _, err := kc.coordinator().Group(group)
	if err != nil {
		t.Fatal(err)
	}

	kc.stop(preferred) // the coordinator's node stops and hands its lead off
	if _, err := kc.awaitLeader(ctx, group, func(id int32) bool { return id != preferred }); err != nil {
		t.Fatal(err)
	}
	produce(t, seeds, topic, partitions, records/2, records)
	if err := tl.waitDistinct(ctx, records); err != nil {
		t.Fatal(err)
	}
	if err := waitCommitted(ctx, kc.leaderCoordinator(ctx, group), group, partitions, records/partitions); err != nil {
		t.Fatal(err)
	}
	a.stop(t)
	b.stop(t)
	a.cl.Close()
	b.cl.Close()

	c := kc.leaderCoordinator(ctx, group)
	if err := c.Barrier(ctx, group); err != nil {
		t.Fatal(err)
	}
	tl.check(t, c, group, partitions, records/partitions)
	after, _, err := c.Group(group)
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation <= before.Generation {
		t.Errorf("generation after the coordinator moved is %d, not above %d", after.Generation, before.Generation)
	}
}
