package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/coordinator"
)

// Client describes who sent a request, as DescribeGroups reports it.
type Client struct {
	// ID is the client.id of the request header.
	ID string
	// Host is the client's address.
	Host string
}

// Handler answers the Kafka requests of a group coordinator: FindCoordinator,
// OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups,
// DeleteGroups, TxnOffsetCommit and WriteTxnMarkers (transactional
// offsets, held pending until their transaction's marker), the classic group protocol (JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup). Offsets and generations are stored in the
// coordinator; group membership lives in memory and is rebuilt by the
// members rejoining after a restart. It is safe for concurrent use.
type Handler struct {
	c      *coordinator.Coordinator
	opts   Options
	log    *slog.Logger
	timers *timers

	mu     sync.Mutex
	groups map[string]*group // guarded by mu; groups with membership state

	closed  atomic.Bool
	closing chan struct{}      // closed by Close: requests waiting in a group answer at once
	ctx     context.Context    // ended by Close: writes the handler starts on its own
	cancel  context.CancelFunc // ends ctx
	once    sync.Once

	classicOnly map[int16]versionRange // handlerVersions without the consumer protocol

	writesMu sync.Mutex     // taken after any group's lock, never before
	writing  bool           // guarded by writesMu; false once Close began
	writes   sync.WaitGroup // the writes started by goWrite

	// commitFenced, set by tests before the first request, runs between
	// a commit's fence and its write, to hold the commit in flight.
	commitFenced func()
}

// NewHandler returns a Handler serving c's groups. opts is copied; bad
// values are reported by name.
func NewHandler(c *coordinator.Coordinator, opts Options) (*Handler, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	classicOnly := maps.Clone(handlerVersions)
	for _, key := range consumerProtocol {
		delete(classicOnly, key)
	}
	return &Handler{
		classicOnly: classicOnly,
		c:           c,
		opts:        opts,
		log:         opts.Logger,
		timers:      newTimers(),
		groups:      map[string]*group{},
		writing:     true,
		closing:     make(chan struct{}),
		ctx:         ctx,
		cancel:      cancel,
	}, nil
}

// Close stops the handler: requests waiting in JoinGroup or SyncGroup, and
// every later request, are answered COORDINATOR_NOT_AVAILABLE, which
// Kafka clients retry after finding the coordinator again. It does not
// close the coordinator.
func (h *Handler) Close() {
	h.once.Do(func() {
		h.closed.Store(true)
		close(h.closing)
		h.cancel()
		h.timers.close()
		h.writesMu.Lock()
		h.writing = false
		h.writesMu.Unlock()
		h.writes.Wait()
	})
}

// goWrite runs write, a write the handler starts on its own (a group's
// next generation), on a goroutine that Close waits for. Once Close has
// begun it runs nothing: the requests that wait for it are answered by
// Close.
func (h *Handler) goWrite(write func()) {
	h.writesMu.Lock()
	defer h.writesMu.Unlock()
	if !h.writing {
		return
	}
	h.writes.Add(1)
	go func() {
		defer h.writes.Done()
		write()
	}()
}

// Handle answers req, one of the requests Supported lists, and returns its
// response at req's version. Requests that join or sync a group block until
// the group's rebalance gets that far, ctx ends or the handler closes. An
// unsupported key or version fails with ErrUnsupported: the caller should
// close the connection it came from.
func (h *Handler) Handle(ctx context.Context, req kmsg.Request, from Client) (kmsg.Response, error) {
	if !supports(h.served(), req) {
		return nil, fmt.Errorf("%w: %s v%d", ErrUnsupported, kmsg.NameForKey(req.Key()), req.GetVersion())
	}
	start := time.Now()
	if h.closed.Load() {
		resp := refuse(req, kerr.CoordinatorNotAvailable.Code)
		observe(h.opts.Observer, req.Key(), resp, time.Since(start))
		return resp, nil
	}
	if resp := h.routed(req); resp != nil {
		observe(h.opts.Observer, req.Key(), resp, time.Since(start))
		return resp, nil
	}
	var resp kmsg.Response
	var err error
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		resp = h.findCoordinator(r)
	case *kmsg.OffsetCommitRequest:
		resp = h.offsetCommit(ctx, r)
	case *kmsg.OffsetFetchRequest:
		resp = h.offsetFetch(ctx, r)
	case *kmsg.OffsetDeleteRequest:
		resp = h.offsetDelete(ctx, r)
	case *kmsg.TxnOffsetCommitRequest:
		resp = h.txnOffsetCommit(ctx, r)
	case *kmsg.WriteTxnMarkersRequest:
		resp = h.writeTxnMarkers(ctx, r)
	case *kmsg.ListGroupsRequest:
		resp = h.listGroups(r)
	case *kmsg.DescribeGroupsRequest:
		resp = h.describeGroups(r)
	case *kmsg.DeleteGroupsRequest:
		resp = h.deleteGroups(ctx, r)
	case *kmsg.JoinGroupRequest:
		resp, err = h.joinGroup(ctx, r, from)
	case *kmsg.SyncGroupRequest:
		resp, err = h.syncGroup(ctx, r)
	case *kmsg.HeartbeatRequest:
		resp = h.heartbeat(r)
	case *kmsg.LeaveGroupRequest:
		resp = h.leaveGroup(r)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		resp = h.consumerGroupHeartbeat(r, from)
	case *kmsg.ConsumerGroupDescribeRequest:
		resp = h.consumerGroupDescribe(r)
	default:
		return nil, fmt.Errorf("%w: %T", ErrUnsupported, req)
	}
	if err != nil {
		return nil, err
	}
	observe(h.opts.Observer, req.Key(), resp, time.Since(start))
	return resp, nil
}

// wait waits for the answer of req, parked in a group.
func (h *Handler) wait(ctx context.Context, req kmsg.Request, ch <-chan kmsg.Response) (kmsg.Response, error) {
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-h.closing:
		return refuse(req, kerr.CoordinatorNotAvailable.Code), nil
	}
}
