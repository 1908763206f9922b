package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RaftPath is where a node's Raft transport receives messages: POST, body
// as AppendMessages encodes it.
const RaftPath = "/raft/v1/messages"

// StreamPath is where a node's Raft transport receives a stream of
// messages: one POST per sending peer that lasts as long as the
// connection, its body a sequence of frames (uvarint size, then size bytes
// of messages as AppendMessages encodes them; size 0 is a probe), its
// answer a 200 followed by one frame per probe (uvarint count, then that
// many uvarint partitions: those whose leader here does not have the
// sender in its configuration, as headerNotMember says). A sender streams
// only to a node whose answer to a POST to RaftPath says it takes streams
// (headerStreams), so that a node of an earlier release still gets POSTs.
const StreamPath = "/raft/v1/stream"

// SnapshotPath is where a node's Raft transport receives a streamed
// snapshot: POST, body the MsgSnap as AppendMessages encodes it, then the
// snapshot file it refers to, of the size headerSnapshotSize gives.
const SnapshotPath = "/raft/v1/snapshot"

// snapshotStall is how long a snapshot transfer may go without reading
// more of the file (or, once read, without an answer) before the sender
// cuts it: the transfer itself may take as long as the file needs.
const snapshotStall = 30 * time.Second

// Headers of a Raft POST: the sending node's id, and the address where it
// serves clients, which receivers keep to tell clients where a leader is.
const (
	headerFrom      = "X-Offsetd-From"
	headerAdvertise = "X-Offsetd-Advertise"
	headerRaft      = "X-Offsetd-Raft"
	// headerSnapshotSize is the size of the file a snapshot POST carries
	// after its message.
	headerSnapshotSize = "X-Offsetd-Snapshot-Size"
	// headerNotMember, in an answer, lists the partitions whose leader
	// does not have the sender in its configuration: a node removed while
	// it was cut off learns it so.
	headerNotMember = "X-Offsetd-Not-Member"
	// headerStreams, in an answer to a POST to RaftPath, says that the
	// node takes streams at StreamPath.
	headerStreams = "X-Offsetd-Streams"
)

// HTTPOptions configures an HTTPTransport.
type HTTPOptions struct {
	// ID is the sending node's id.
	ID uint64
	// Peers maps every other node's id to the host:port of its Raft
	// listener.
	Peers map[uint64]string
	// Advertise is the host:port where this node serves clients, sent with
	// every message so that the other nodes can send clients here.
	Advertise string
	// Address is the host:port where the other nodes reach this node's
	// Raft listener, sent with every message so that a node that does not
	// know this one (it joined later, and the other restarted with an
	// older list of peers) learns where to answer.
	Address string
	// Token, when not empty, is sent as a bearer token and required of
	// what Handler receives.
	Token string
	// TLS, when set, makes the transport speak HTTPS to the peers with this
	// client configuration (RootCAs: what signs their certificates).
	TLS *tls.Config
	// Client sends the requests. Nil means a client with a 5 s timeout
	// (and TLS, if set). A streamed snapshot is sent without the client's
	// Timeout: it is cut once it makes no progress for 30 s.
	Client *http.Client
	// Logger receives send failures at debug level. Nil means
	// slog.Default().
	Logger *slog.Logger
	// ProbeInterval is how long a sender with nothing to send waits before
	// it POSTs an empty body, to learn whether its peer still answers: a
	// peer is unreachable once a POST to it fails, or none has succeeded
	// for three intervals. Zero means 500ms, half Raft's default election
	// timeout, so that a peer that stops reads unreachable within two
	// election timeouts.
	ProbeInterval time.Duration
}

// HTTPTransport carries Raft messages between processes over HTTP. Each
// peer has a sender goroutine. To a peer that takes streams (see
// StreamPath) it keeps one POST open whose body carries, frame after
// frame, whatever queued for the peer since the last frame, written as it
// comes: a message never waits for the answer to an earlier one, and the
// peer's messages stay in the order they were sent, which raft's
// pipelined appends want (appends that overtake each other are refused
// and sent again). To other peers, and while no stream is open, it POSTs
// whatever queued since its last request to RaftPath, one request at a
// time. A peer that is down or slow loses messages (its queue is
// bounded), which Raft survives. A snapshot is a POST of its own to
// SnapshotPath, on the goroutine that calls SendSnapshot, beside the
// peer's messages.
type HTTPTransport struct {
	opts      HTTPOptions
	notMember atomic.Pointer[func(partitions []int)] // set by the Node: see headerNotMember
	mu        sync.RWMutex
	peers     map[uint64]*peer // guarded by mu
	stop      chan struct{}
	wg        sync.WaitGroup
}

// peer is what an HTTPTransport keeps of one peer.
type peer struct {
	addr          string       // host:port of its Raft listener
	q             chan encoded // what each Send had for the peer
	streams       atomic.Bool  // its last answer to a POST said it takes streams
	sent, dropped atomic.Uint64
	mu            sync.Mutex
	lastOK        time.Time // guarded by mu: the last POST that succeeded or probe answered, or when sending began
	failing       bool      // guarded by mu: the last POST or stream failed
}

// encoded is messages for one peer, as AppendMessages encodes them.
type encoded struct {
	b []byte
	n int // how many
}

// peerQueue bounds the Send calls waiting for one peer.
const peerQueue = 4096

// maxPostBytes bounds the body of one POST a sender makes of what queued.
const maxPostBytes = 4 << 20

// NewHTTPTransport starts the senders to every peer; Close stops them.
func NewHTTPTransport(opts HTTPOptions) *HTTPTransport {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 5 * time.Second}
		if opts.TLS != nil {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = opts.TLS.Clone()
			opts.Client.Transport = tr
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = 500 * time.Millisecond
	}
	t := &HTTPTransport{opts: opts, peers: make(map[uint64]*peer), stop: make(chan struct{})}
	for id, addr := range opts.Peers {
		t.AddPeer(id, addr)
	}
	return t
}

// AddPeer starts sending to node id at addr, the host:port of its Raft
// listener; a node the transport already sends to keeps its address. A
// Node calls it when a configuration change adds a node with its address.
func (t *HTTPTransport) AddPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.peers[id]; ok || id == t.opts.ID {
		return
	}
	select {
	case <-t.stop:
		return
	default:
	}
	p := &peer{addr: addr, q: make(chan encoded, peerQueue), lastOK: time.Now()}
	t.peers[id] = p
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.sender(id, addr, p)
	}()
}

// Send queues the messages for each peer, encoded together; a full queue
// drops them.
func (t *HTTPTransport) Send(msgs []Message) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var done []uint64 // the peers whose messages are queued
	for i, m := range msgs {
		to := m.Raft.GetTo()
		if slices.Contains(done, to) {
			continue
		}
		done = append(done, to)
		p := t.peers[to]
		if p == nil {
			continue
		}
		var e encoded
		for _, m := range msgs[i:] {
			if m.Raft.GetTo() != to {
				continue
			}
			b, err := appendMessage(e.b, m)
			if err != nil {
				t.opts.Logger.Error("cluster: dropping a message that does not encode", "partition", m.Partition, "err", err)
				continue
			}
			e.b = b
			e.n++
		}
		if e.n == 0 {
			continue
		}
		select {
		case p.q <- e:
		default:
			p.dropped.Add(uint64(e.n))
		}
	}
}

// Peer returns how node id fares as this transport sees it.
func (t *HTTPTransport) Peer(id uint64) (PeerStats, bool) {
	t.mu.RLock()
	p := t.peers[id]
	t.mu.RUnlock()
	if p == nil {
		return PeerStats{ID: id}, false
	}
	p.mu.Lock()
	reachable := !p.failing && time.Since(p.lastOK) < 3*t.opts.ProbeInterval
	p.mu.Unlock()
	return PeerStats{ID: id, Reachable: reachable, Sent: p.sent.Load(), Dropped: p.dropped.Load()}, true
}

// sender sends what queues for one peer until Close: on a stream while
// the peer takes one, otherwise in POSTs, one at a time, with an empty
// body after every ProbeInterval without anything to send.
func (t *HTTPTransport) sender(id uint64, addr string, p *peer) {
	url := t.url(addr, RaftPath)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-t.stop
		cancel()
	}()
	probe := time.NewTimer(t.opts.ProbeInterval)
	defer probe.Stop()
	var body []byte
	// A stream that fails before its first answer is tried again only
	// after a wait that doubles each time, so that a peer that offers
	// streams but cannot keep one (a proxy in the way, say) gets POSTs.
	var streamAt time.Time
	backoff := t.opts.ProbeInterval
	for {
		if p.streams.Load() && !time.Now().Before(streamAt) {
			answered, err := t.stream(ctx, p)
			if ctx.Err() != nil {
				return
			}
			if answered {
				backoff = t.opts.ProbeInterval
			} else {
				backoff = min(2*backoff, maxStreamBackoff)
			}
			streamAt = time.Now().Add(backoff)
			// Back to POSTs, until an answer says the peer takes streams
			// again (it may have restarted as an earlier release).
			p.streams.Store(false)
			p.mu.Lock()
			p.failing = true
			p.mu.Unlock()
			t.opts.Logger.Debug("cluster: stream to a peer ended", "peer", id, "err", err)
		}
		n := 0
		select {
		case <-t.stop:
			return
		case e := <-p.q:
			body = append(body[:0], e.b...)
			n += e.n
		case <-probe.C:
			body = body[:0]
		}
	gather:
		for len(body) < maxPostBytes {
			select {
			case e := <-p.q:
				body = append(body, e.b...)
				n += e.n
			default:
				break gather
			}
		}
		streams, err := t.post(ctx, url, body)
		if ctx.Err() != nil {
			return
		}
		p.streams.Store(streams)
		p.mu.Lock()
		p.failing = err != nil
		if err == nil {
			p.lastOK = time.Now()
		}
		p.mu.Unlock()
		if err != nil {
			p.dropped.Add(uint64(n))
			t.opts.Logger.Debug("cluster: messages to a peer lost", "peer", id, "messages", n, "err", err)
		} else {
			p.sent.Add(uint64(n))
		}
		probe.Reset(t.opts.ProbeInterval)
	}
}

// url returns the URL of path on the Raft listener at addr.
func (t *HTTPTransport) url(addr, path string) string {
	if t.opts.TLS != nil {
		return "https://" + addr + path
	}
	return "http://" + addr + path
}

// post POSTs body to url, and returns whether the answer says the peer
// takes streams.
func (t *HTTPTransport) post(ctx context.Context, url string, body []byte) (streams bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	h, err := t.do(t.opts.Client, req)
	return err == nil && h.Get(headerStreams) != "", err
}

// setHeaders sets the headers every POST of the transport carries.
func (t *HTTPTransport) setHeaders(req *http.Request) {
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(headerFrom, strconv.FormatUint(t.opts.ID, 10))
	if t.opts.Advertise != "" {
		req.Header.Set(headerAdvertise, t.opts.Advertise)
	}
	if t.opts.Address != "" {
		req.Header.Set(headerRaft, t.opts.Address)
	}
	if t.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.opts.Token)
	}
}

// do sends req, a POST of the transport, with the headers every one
// carries, reads the answer, and returns its header.
func (t *HTTPTransport) do(client *http.Client, req *http.Request) (http.Header, error) {
	url := req.URL.String()
	t.setHeaders(req)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	why, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if v := resp.Header.Get(headerNotMember); v != "" {
		if fn := t.notMember.Load(); fn != nil {
			(*fn)(parsePartitions(v))
		}
	}
	if resp.StatusCode != http.StatusNoContent {
		if why = bytes.TrimSpace(why); len(why) > 0 {
			return nil, fmt.Errorf("POST %s: %s: %s", url, resp.Status, why)
		}
		return nil, fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return resp.Header, nil
}

// SendSnapshot POSTs m and then file (size bytes), streamed, to
// SnapshotPath of m's node, and returns once that node answered. The
// transfer is cut once it makes no progress for 30 s, or ctx is done, or
// the transport closes.
func (t *HTTPTransport) SendSnapshot(ctx context.Context, m Message, file io.Reader, size int64) error {
	to := m.Raft.GetTo()
	t.mu.RLock()
	p := t.peers[to]
	t.mu.RUnlock()
	if p == nil {
		return fmt.Errorf("cluster: no address of node %d", to)
	}
	head, err := AppendMessages(nil, []Message{m})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body := &progressReader{r: io.MultiReader(bytes.NewReader(head), io.LimitReader(file, size))}
	body.note()
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(snapshotStall / 10)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.stop:
				cancel()
				return
			case <-tick.C:
				if body.stalled(snapshotStall) {
					cancel()
					return
				}
			}
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url(p.addr, SnapshotPath), body)
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(head)) + size
	req.Header.Set(headerSnapshotSize, strconv.FormatInt(size, 10))
	client := *t.opts.Client
	client.Timeout = 0 // the stall above bounds it
	if _, err := t.do(&client, req); err != nil {
		p.dropped.Add(1)
		return err
	}
	p.sent.Add(1)
	return nil
}

// progressReader notes when it was last read from.
type progressReader struct {
	r    io.Reader
	last atomic.Int64 // unix nanoseconds
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.note()
	return n, err
}

func (p *progressReader) note() { p.last.Store(time.Now().UnixNano()) }

// stalled reports whether the reader was last read from longer than d ago.
func (p *progressReader) stalled(d time.Duration) bool {
	return time.Since(time.Unix(0, p.last.Load())) > d
}

// onNotMember has fn called with the partitions whose leaders answer
// that this node is no member of them.
func (t *HTTPTransport) onNotMember(fn func(partitions []int)) { t.notMember.Store(&fn) }

// parsePartitions parses a comma-separated list of partitions, skipping
// what is not one.
func parsePartitions(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if p, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && p >= 0 {
			out = append(out, p)
		}
	}
	return out
}

// Close stops the senders; what is queued is dropped.
func (t *HTTPTransport) Close() {
	t.mu.Lock()
	close(t.stop)
	t.mu.Unlock()
	t.wg.Wait()
}

// Handler returns the handler of a node's Raft listener: a POST to
// SnapshotPath is a streamed snapshot, handed to n.ReceiveSnapshot as it
// arrives; any other POST (RaftPath) carries messages, handed to
// n.Receive. It keeps the client address each sender advertises, and the
// Raft address of a sender its transport does not know. With a token, it
// refuses requests that do not carry it.
func Handler(n *Node, token string) http.Handler {
	want := ""
	if token != "" {
		want = "Bearer " + token
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if want != "" && !constantTimeEqual(r.Header.Get("Authorization"), want) {
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case SnapshotPath:
			receiveSnapshot(n, w, r)
			return
		case StreamPath:
			receiveStream(n, w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPostBytes+maxMessageBytes))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		msgs, err := DecodeMessages(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		learnSender(n, w, r, msgs)
		n.Receive(msgs)
		w.Header().Set(headerStreams, "1")
		w.WriteHeader(http.StatusNoContent)
	})
}

// learnSender keeps where the sender of r serves clients and its Raft
// address, and tells it, in w, the partitions this node leads that it is
// no member of.
func learnSender(n *Node, w http.ResponseWriter, r *http.Request, msgs []Message) {
	from := sender(r)
	if from == 0 {
		return
	}
	if addr := r.Header.Get(headerAdvertise); addr != "" {
		n.SetAddress(from, addr)
	}
	if addr := r.Header.Get(headerRaft); addr != "" {
		n.addPeer(from, addr)
	}
	if parts := n.notMemberOf(from, msgs); len(parts) > 0 {
		s := make([]string, len(parts))
		for i, p := range parts {
			s[i] = strconv.Itoa(p)
		}
		w.Header().Set(headerNotMember, strings.Join(s, ","))
	}
}

// sender returns the id of the node that sent r, 0 if it does not say.
func sender(r *http.Request) uint64 {
	from, err := strconv.ParseUint(r.Header.Get(headerFrom), 10, 64)
	if err != nil {
		return 0
	}
	return from
}

// receiveSnapshot takes a POST to SnapshotPath: the MsgSnap, then the
// file, streamed into n.ReceiveSnapshot. 204 once the file is the
// partition's and the message handed to its group; a transfer cut short
// or a file refused leaves no file.
func receiveSnapshot(n *Node, w http.ResponseWriter, r *http.Request) {
	size, err := strconv.ParseInt(r.Header.Get(headerSnapshotSize), 10, 64)
	if err != nil || size < 0 {
		http.Error(w, "missing or bad "+headerSnapshotSize, http.StatusBadRequest)
		return
	}
	body := bufio.NewReader(r.Body)
	m, err := readMessage(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	learnSender(n, w, r, []Message{m})
	if err := n.ReceiveSnapshot(m, io.LimitReader(body, size)); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func constantTimeEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
