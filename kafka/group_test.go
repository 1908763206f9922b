package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/offsetd/offsetd/coordinator"
)

// routedCluster is an in-process Kafka cluster (kfake) that serves the
// data and hands every group and offset request to the current handler,
// as a Go broker embedding offsetd would.
type routedCluster struct {
	*kfake.Cluster
	current atomic.Pointer[Handler]
	// handlerOf, when set, picks the handler of the broker a request
	// reached instead: each broker is a node of an offsetd cluster.
	handlerOf func(node int32) *Handler
	trace     requestTrace
}

func newRoutedCluster(t *testing.T, partitions int32, topic string) *routedCluster {
	return newRoutedBrokers(t, 1, partitions, topic)
}

// newRoutedBrokers is newRoutedCluster with brokers brokers.
func newRoutedBrokers(t *testing.T, brokers int, partitions int32, topic string) *routedCluster {
	t.Helper()
	return newRoutedVersions(t, brokers, partitions, topic, handlerKafkaVersions())
}

// newRoutedVersions is newRoutedBrokers with a cluster advertising
// versions.
func newRoutedVersions(t *testing.T, brokers int, partitions int32, topic string, versions *kversion.Versions) *routedCluster {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.SeedTopics(partitions, topic), kfake.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	rc := &routedCluster{Cluster: cluster}
	for key := range handlerVersions {
		cluster.ControlKey(key, rc.route)
	}
	return rc
}

// handlerKafkaVersions is a cluster advertising what the handler serves:
// OffsetCommit and OffsetFetch up to v9, and no KIP-848 heartbeat, so that
// clients use the classic protocol.
func handlerKafkaVersions() *kversion.Versions {
	versions := kversion.Stable()
	for key, v := range handlerVersions {
		versions.SetMaxKeyVersion(key, v.max)
	}
	versions.SetMaxKeyVersion(int16(kmsg.ConsumerGroupHeartbeat), -1)
	versions.SetMaxKeyVersion(int16(kmsg.ConsumerGroupDescribe), -1)
	return versions
}

// route answers one request with the current handler. JoinGroup and
// SyncGroup wait for the other members, so they sleep outside kfake's
// control loop while they wait.
func (rc *routedCluster) route(req kmsg.Request) (kmsg.Response, error, bool) {
	if fc, ok := req.(*kmsg.FindCoordinatorRequest); ok && fc.CoordinatorType != 0 {
		return nil, nil, false // a transaction coordinator is kfake's
	}
	rc.KeepControl()
	start := time.Now()
	h := rc.current.Load()
	if rc.handlerOf != nil {
		h = rc.handlerOf(rc.CurrentNode())
	}
	var resp kmsg.Response
	var err error
	switch req.(type) {
	case *kmsg.JoinGroupRequest, *kmsg.SyncGroupRequest:
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err = h.Handle(context.Background(), req, Client{ID: "routed"})
		}()
		rc.SleepControl(func() { <-done })
	default:
		resp, err = h.Handle(context.Background(), req, Client{ID: "routed"})
	}
	rc.trace.add(start, h, req, resp)
	return resp, err, true
}

// broker is the kfake broker as the handler should name it.
func (rc *routedCluster) broker(t *testing.T) Broker {
	host, port, err := splitHostPort(rc.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	return Broker{NodeID: 0, Host: host, Port: port}
}

func splitHostPort(addr string) (string, int32, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			p, err := strconv.Atoi(addr[i+1:])
			return addr[:i], int32(p), err
		}
	}
	return "", 0, fmt.Errorf("no port in %q", addr)
}

// tally records what the consumers saw and what they had committed.
type tally struct {
	mu       sync.Mutex
	seen     map[[2]int64]int // partition, offset → deliveries
	acked    map[int32]int64  // highest acknowledged commit per partition
	bad      []string
	distinct int
	changed  chan struct{}
}

func newTally() *tally {
	return &tally{seen: map[[2]int64]int{}, acked: map[int32]int64{}, changed: make(chan struct{}, 1)}
}

func (t *tally) record(r *kgo.Record) {
	t.mu.Lock()
	k := [2]int64{int64(r.Partition), r.Offset}
	if t.seen[k] > 0 && r.Offset < t.acked[r.Partition] {
		// Redelivered below an acknowledged commit: progress was lost.
		t.bad = append(t.bad, fmt.Sprintf("partition %d offset %d redelivered after a commit of %d was acknowledged", r.Partition, r.Offset, t.acked[r.Partition]))
	}
	if t.seen[k] == 0 {
		t.distinct++
	}
	t.seen[k]++
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *tally) ack(next map[int32]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, o := range next {
		t.acked[p] = max(t.acked[p], o)
	}
}

// check reports progress lost: a record redelivered below an acknowledged
// commit, or a partition of group whose committed offset in c is not want
// once every consumer stopped.
func (t *tally) check(tt *testing.T, c *coordinator.Coordinator, group string, partitions, want int) {
	tt.Helper()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, msg := range t.bad {
		tt.Error(msg)
	}
	var dups int
	for _, n := range t.seen {
		dups += n - 1
	}
	tt.Logf("%d records, %d redelivered inside the at-least-once window", len(t.seen), dups)
	stored, err := c.FetchGroup(group)
	if err != nil {
		tt.Fatal(err)
	}
	if len(stored) != partitions {
		tt.Errorf("offsetd holds %d offsets, want %d: %+v", len(stored), partitions, stored)
	}
	for _, o := range stored {
		if o.Offset.Offset != int64(want) {
			tt.Errorf("partition %d committed at %d, want %d", o.Partition, o.Offset.Offset, want)
		}
	}
}

// waitDistinct waits until n different records have been consumed.
func (t *tally) waitDistinct(ctx context.Context, n int) error {
	for {
		t.mu.Lock()
		d := t.distinct
		t.mu.Unlock()
		if d >= n {
			return nil
		}
		select {
		case <-t.changed:
		case <-ctx.Done():
			return fmt.Errorf("consumed %d different records, want %d: %w", d, n, ctx.Err())
		}
	}
}

// consumer is one kgo group member that commits after every poll.
type consumer struct {
	cl       *kgo.Client // owned by the poll loop until done is closed
	cancel   context.CancelFunc
	done     chan struct{}
	assigned chan struct{} // closed once the member is first given partitions
}

func startConsumer(t *testing.T, seeds []string, group, topic string, tl *tally) *consumer {
	assigned := make(chan struct{})
	var once sync.Once
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, got map[string][]int32) {
				if len(got) > 0 {
					once.Do(func() { close(assigned) })
				}
			}),
			kgo.SeedBrokers(seeds...),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
			kgo.BlockRebalanceOnPoll(),
			kgo.SessionTimeout(3*time.Second),
			kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.RebalanceTimeout(10*time.Second),
			kgo.FetchMaxWait(100*time.Millisecond),
		)
		if err != nil {
			t.Error(err)
		}
		return cl
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{cl: newClient(), cancel: cancel, done: make(chan struct{}), assigned: assigned}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil && c.cl != nil {
			fs := c.cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			next := map[int32]int64{}
			fs.EachRecord(func(r *kgo.Record) {
				tl.record(r)
				next[r.Partition] = r.Offset + 1
			})
			err := c.cl.CommitUncommittedOffsets(ctx)
			if err == nil {
				tl.ack(next)
			}
			c.cl.AllowRebalance()
			if lostMembership(err) {
				c.cl.Close()
				c.cl = newClient()
			}
		}
	}()
	return c
}

// lostMembership reports a commit refused because the member is no longer
// in the group at its generation (offsetd restarted, or its session
// expired). Its partitions may have been consumed and committed further by
// others since, so what it consumed is no longer its to commit: Kafka would
// take the commit from the member it rejoins as, but a Java consumer drops
// those offsets (onPartitionsLost) and commits nothing of them. kgo rejoins
// keeping them, and may commit them under its new membership before it
// revokes the partitions, which would take the group's progress back; so
// the test's consumer starts afresh instead.
func lostMembership(err error) bool {
	return errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.FencedInstanceID)
}

// stop ends the poll loop and commits what was consumed, unless the member
// lost its membership.
func (c *consumer) stop(t *testing.T) {
	c.cancel()
	<-c.done
	if c.cl == nil {
		return
	}
	var err error
	for range 50 { // a commit during a rebalance is refused; the next one goes through
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.cl.CommitUncommittedOffsets(ctx)
		cancel()
		if err == nil || lostMembership(err) {
			return
		}
		c.cl.AllowRebalance()
	}
	t.Errorf("final commit: %v", err)
}

// waitAssigned waits until each consumer has been given partitions.
func waitAssigned(ctx context.Context, t *testing.T, cs ...*consumer) {
	t.Helper()
	for _, c := range cs {
		select {
		case <-c.assigned:
		case <-ctx.Done():
			t.Fatalf("a consumer was never given partitions: %v", ctx.Err())
		}
	}
}

func produce(t *testing.T, seeds []string, topic string, partitions int32, from, to int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(testContext(t), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// TestConsumerGroupOnKafkaPeer runs kgo consumers in one group on a real
// Kafka peer whose group coordinator is offsetd: members join and leave,
// offsetd restarts, and every record is consumed with no progress lost.
func TestConsumerGroupOnKafkaPeer(t *testing.T) {
	const (
		topic      = "events"
		group      = "workers"
		partitions = 3
		records    = 300
	)
	ctx := testContext(t)
	dir := t.TempDir()
	rc := newRoutedCluster(t, partitions, topic)
	t.Cleanup(func() { rc.trace.logIfFailed(t) })
	opts := testHandlerOptions()
	opts.Broker = rc.broker(t)
	beforeRestart := newCounter()
	opts.Observer = beforeRestart

	c, err := coordinator.Open(dir, coordinatorOptions())
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	rc.current.Store(h)

	tl := newTally()
	produce(t, rc.ListenAddrs(), topic, partitions, 0, records/2)
	a := startConsumer(t, rc.ListenAddrs(), group, topic, tl)
	b := startConsumer(t, rc.ListenAddrs(), group, topic, tl)
	waitAssigned(ctx, t, a, b)
	cons := startConsumer(t, rc.ListenAddrs(), group, topic, tl) // a third member joins
	a.stop(t)
	a.cl.Close() // and the first leaves
	if err := tl.waitDistinct(ctx, records/2); err != nil {
		t.Fatal(err)
	}
	// A commit goes through before the restart, so that the group runs on
	// offsetd on both sides of it; others may still be on their way.
	if err := waitOffsets(ctx, c, group, "an offset", func(stored []coordinator.PartitionOffset) bool { return len(stored) > 0 }); err != nil {
		t.Fatal(err)
	}

	// Restart offsetd: membership is gone, offsets and generation stay.
	before, _, err := c.Group(group)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2, err := coordinator.Open(dir, coordinatorOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	afterRestart := newCounter()
	opts.Observer = afterRestart
	h2 := newHandler(t, c2, opts)
	rc.current.Store(h2)

	// After the restart one member leaves and a new one joins: the
	// partitions that move resume from the offsets offsetd kept.
	b.stop(t)
	b.cl.Close()
	d := startConsumer(t, rc.ListenAddrs(), group, topic, tl)
	produce(t, rc.ListenAddrs(), topic, partitions, records/2, records)
	if err := tl.waitDistinct(ctx, records); err != nil {
		t.Fatal(err)
	}
	// Every record was seen, but a member that saw a partition's last
	// records may have lost it in a rebalance before its commit went
	// through; the new owner then consumes them again from the offset
	// offsetd holds, and commits. Wait for that before stopping anyone.
	if err := waitCommitted(ctx, c2, group, partitions, records/partitions); err != nil {
		t.Fatal(err)
	}
	cons.stop(t)
	d.stop(t)
	cons.cl.Close()
	d.cl.Close()

	tl.check(t, c2, group, partitions, records/partitions)
	// The group really ran on offsetd, before and after the restart.
	for _, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetFetch, kmsg.OffsetCommit, kmsg.LeaveGroup} {
		if beforeRestart.ok(int16(key)) == 0 || afterRestart.ok(int16(key)) == 0 {
			t.Errorf("%s answered without error %d times before the restart and %d after, want some of each",
				kmsg.NameForKey(int16(key)), beforeRestart.ok(int16(key)), afterRestart.ok(int16(key)))
		}
	}
	after, _, err := c2.Group(group)
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation <= before.Generation {
		t.Errorf("generation after the restart is %d, not above %d from before it", after.Generation, before.Generation)
	}
}

func coordinatorOptions() coordinator.Options {
	o := coordinator.DefaultOptions()
	o.Partitions = 4
	o.Logger = quiet
	return o
}

// counter is an Observer counting requests answered without error.
type counter struct {
	mu     sync.Mutex
	counts map[[2]string]int // API, error
}

func newCounter() *counter { return &counter{counts: map[[2]string]int{}} }

func (c *counter) ObserveKafkaRequest(api, code string, _ time.Duration) {
	c.mu.Lock()
	c.counts[[2]string{api, code}]++
	c.mu.Unlock()
}

func (c *counter) ok(key int16) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[[2]string{kmsg.NameForKey(key), "NONE"}]
}

// waitCommitted returns once group has committed offset want on each of its
// partitions.
func waitCommitted(ctx context.Context, c *coordinator.Coordinator, group string, partitions, want int) error {
	return waitOffsets(ctx, c, group, fmt.Sprintf("%d on each of %d partitions", want, partitions), func(stored []coordinator.PartitionOffset) bool {
		done := 0
		for _, o := range stored {
			if o.Offset.Offset == int64(want) {
				done++
			}
		}
		return done == partitions
	})
}

// waitOffsets returns once group's offsets satisfy ok, woken by offsetd's
// own change notifications.
func waitOffsets(ctx context.Context, c *coordinator.Coordinator, group, want string, ok func([]coordinator.PartitionOffset) bool) error {
	for {
		_, changed, stop, err := c.WatchGroup(group)
		if err != nil {
			return err
		}
		stored, err := c.FetchGroup(group)
		if err != nil {
			stop()
			return err
		}
		if ok(stored) {
			stop()
			return nil
		}
		select {
		case <-changed:
			stop()
		case <-ctx.Done():
			stop()
			return fmt.Errorf("group %s committed %+v, want %s: %w", group, stored, want, ctx.Err())
		}
	}
}
