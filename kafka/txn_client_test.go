package kafka

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/internal/offsetcheck"
)

// forwardTxnMarkers makes the routed cluster's transaction coordinator
// (kfake's) end each transaction in the handler too, as a broker that
// embeds the handler would: every EndTxn calls Handler.WriteTxnMarker
// before kfake ends the transaction itself. before, when set, runs first
// (on kfake's control goroutine), with the request.
func (rc *routedCluster) forwardTxnMarkers(t *testing.T, before func(*kmsg.EndTxnRequest)) {
	rc.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		if before != nil {
			before(r)
		}
		// From v5 (transactions v2, KIP-890) the transaction coordinator
		// bumps the epoch as it ends a transaction and writes its markers
		// at the new one.
		epoch := r.ProducerEpoch
		if r.Version >= 5 {
			epoch++
		}
		if err := rc.current.Load().WriteTxnMarker(context.Background(), r.ProducerID, epoch, r.Commit); err != nil {
			t.Errorf("marker of producer %d epoch %d commit %v: %v", r.ProducerID, r.ProducerEpoch, r.Commit, err)
		}
		return nil, nil, false // kfake ends its side of the transaction
	})
}

// TestGroupTransactSession: kgo's exactly-once session consumes a topic of
// kfake and produces what it read to another in transactions, some
// aborted, with its group and TxnOffsetCommit requests answered by
// offsetd and its transactions' markers forwarded to offsetd. Once during
// a commit, with the transaction's offsets pending, offsetd's coordinator
// restarts: they are pending (unstable) after it, and the marker commits
// them. Every commit and read of the offsets is checked by offsetcheck
// (an aborted transaction's offsets are never read), the group ends at
// the end of each partition, and the output holds each record once.
func TestGroupTransactSession(t *testing.T) {
	const (
		partitions = 3
		perPart    = 20
	)
	ctx := testContext(t)
	rc := newRoutedVersions(t, 1, partitions, "orders", handlerKafkaVersions())
	dir := t.TempDir()
	opts := testHandlerOptions()
	opts.Broker = rc.broker(t)
	var mu sync.Mutex // guards c
	c := openCoordinator(t, dir)
	rc.current.Store(newHandler(t, c, opts))

	addr := rc.ListenAddrs()[0]
	adm := newAdmin(t, addr)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for p := range int32(partitions) {
		for i := range perPart {
			r := &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "%d/%d", p, i)}
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	restarts := 0
	rc.forwardTxnMarkers(t, func(r *kmsg.EndTxnRequest) {
		if !r.Commit || restarts > 0 {
			return
		}
		restarts++
		// The transaction's offsets are pending: restart the coordinator
		// under them.
		gc := groupClient{t, rc.current.Load()}
		if !anyUnstable(gc, "g") {
			t.Error("no offset pending before the restart")
		}
		rc.current.Load().Close()
		mu.Lock()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		c = openCoordinator(t, dir)
		mu.Unlock()
		rc.current.Store(newHandler(t, c, opts))
		if !anyUnstable(groupClient{t, rc.current.Load()}, "g") {
			t.Error("no offset pending after the restart")
		}
	})

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr),
		kgo.TransactionalID("eos"),
		kgo.ConsumerGroup("g"),
		kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("out"),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	h := offsetcheck.New()
	key := func(p int32) string { return fmt.Sprintf("orders/%d", p) }
	read := func() map[int32]int64 {
		call := h.Call()
		fetched, err := adm.FetchOffsets(ctx, "g")
		if err != nil {
			t.Logf("fetch: %v", err)
			return nil // a failed read has no effect
		}
		got := map[int32]int64{}
		for p := range int32(partitions) {
			got[p] = -1
			if o, ok := fetched.Lookup("orders", p); ok && o.Err == nil {
				got[p] = o.At
			}
			h.Read(0, key(p), got[p], call)
		}
		return got
	}
	batches, aborted := 0, 0
	for done := false; !done; {
		if ctx.Err() != nil {
			t.Fatalf("%d batches, %d aborted; committed %v", batches, aborted, read())
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fetches := sess.PollRecords(pctx, 7)
		cancel()
		if err := fetches.Err0(); err != nil && pctx.Err() == nil {
			t.Logf("poll: %v", err)
		}
		if fetches.NumRecords() == 0 {
			got := read()
			done = len(got) == partitions
			for _, o := range got {
				done = done && o == perPart
			}
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		next := map[int32]int64{}
		fetches.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: r.Value}, nil)
			next[r.Partition] = r.Offset + 1
		})
		batches++
		try := kgo.TryCommit
		if batches%3 == 2 {
			try = kgo.TryAbort
			aborted++
		}
		call := h.Call()
		committed, err := sess.End(ctx, try)
		if try == kgo.TryAbort || (err == nil && !committed) {
			read()
			continue // nothing committed
		}
		for p, off := range next {
			h.Commit(0, key(p), off, call, err == nil)
		}
		read()
	}
	if restarts != 1 || aborted == 0 {
		t.Fatalf("%d restarts, %d of %d batches aborted", restarts, aborted, batches)
	}
	for p := range int32(partitions) {
		if last, _, _ := h.LastAck(key(p)); last != perPart {
			t.Errorf("partition %d: last acknowledged commit %d, want %d", p, last, perPart)
		}
	}
	if err := h.Check(t.TempDir(), 10*time.Second); err != nil {
		t.Error(err)
	}
	mu.Lock()
	pending, err := c.PendingOffsets("g")
	mu.Unlock()
	if err != nil || len(pending) != 0 {
		t.Errorf("offsets still pending at the end: %+v %v", pending, err)
	}

	// The output, read committed, holds each input record once.
	out, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	seen := map[string]int{}
	for n := 0; n < partitions*perPart; {
		fetches := out.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d output records", n, partitions*perPart)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			n++
		})
	}
	for v, k := range seen {
		if k != 1 {
			t.Errorf("output record %s seen %d times", v, k)
		}
	}
	if len(seen) != partitions*perPart {
		t.Errorf("%d distinct output records, want %d", len(seen), partitions*perPart)
	}
}

// anyUnstable reports whether a stable fetch of group's offsets on
// orders answers UNSTABLE_OFFSET_COMMIT for some partition.
func anyUnstable(gc groupClient, group string) bool {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.RequireStable = 8, true
	r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0, 1, 2}}}}}
	for _, t := range gc.do(r).(*kmsg.OffsetFetchResponse).Groups[0].Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == kerr.UnstableOffsetCommit.Code {
				return true
			}
		}
	}
	return false
}
