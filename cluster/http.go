package cluster

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RaftPath is where a node's Raft transport receives messages: POST, body
// as AppendMessages encodes it.
const RaftPath = "/raft/v1/messages"

// Headers of a Raft POST: the sending node's id, and the address where it
// serves clients, which receivers keep to tell clients where a leader is.
const (
	headerFrom      = "X-Offsetd-From"
	headerAdvertise = "X-Offsetd-Advertise"
	headerRaft      = "X-Offsetd-Raft"
	// headerNotMember, in an answer, lists the partitions whose leader
	// does not have the sender in its configuration: a node removed while
	// it was cut off learns it so.
	headerNotMember = "X-Offsetd-Not-Member"
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
	// (and TLS, if set).
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

// HTTPTransport carries Raft messages between processes over HTTP: one
// goroutine per peer POSTs whatever queued for it since its last request.
// A peer that is down or slow loses messages (its queue is bounded), which
// Raft survives.
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
	q             chan []byte // one encoded message each
	sent, dropped atomic.Uint64
	mu            sync.Mutex
	lastOK        time.Time // guarded by mu: the last POST that succeeded, or when sending began
	failing       bool      // guarded by mu: the last POST failed
}

// peerQueue bounds the messages waiting for one peer.
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
	p := &peer{q: make(chan []byte, peerQueue), lastOK: time.Now()}
	t.peers[id] = p
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.sender(id, addr, p)
	}()
}

// Send queues each message for its peer, encoded; a full queue drops it.
func (t *HTTPTransport) Send(msgs []Message) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, m := range msgs {
		p := t.peers[m.Raft.GetTo()]
		if p == nil {
			continue
		}
		b, err := AppendMessages(nil, []Message{m})
		if err != nil {
			t.opts.Logger.Error("cluster: dropping a message that does not encode", "partition", m.Partition, "err", err)
			continue
		}
		select {
		case p.q <- b:
		default:
			p.dropped.Add(1)
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

// sender POSTs what queues for one peer until Close, and an empty body
// after every ProbeInterval without anything to send.
func (t *HTTPTransport) sender(id uint64, addr string, p *peer) {
	scheme := "http://"
	if t.opts.TLS != nil {
		scheme = "https://"
	}
	url := scheme + addr + RaftPath
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-t.stop
		cancel()
	}()
	probe := time.NewTimer(t.opts.ProbeInterval)
	defer probe.Stop()
	var body []byte
	for {
		n := 0
		select {
		case <-t.stop:
			return
		case b := <-p.q:
			body = append(body[:0], b...)
			n++
		case <-probe.C:
			body = body[:0]
		}
	gather:
		for len(body) < maxPostBytes {
			select {
			case b := <-p.q:
				body = append(body, b...)
				n++
			default:
				break gather
			}
		}
		err := t.post(ctx, url, body)
		if ctx.Err() != nil {
			return
		}
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

func (t *HTTPTransport) post(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
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
	resp, err := t.opts.Client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if v := resp.Header.Get(headerNotMember); v != "" {
		if fn := t.notMember.Load(); fn != nil {
			(*fn)(parsePartitions(v))
		}
	}
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return nil
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

// Handler returns the handler of RaftPath that hands what arrives to n,
// and keeps the client address each sender advertises, and the Raft
// address of a sender its transport does not know. With a token, it
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
		from, err := strconv.ParseUint(r.Header.Get(headerFrom), 10, 64)
		if err == nil && from != 0 {
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
		n.Receive(msgs)
		w.WriteHeader(http.StatusNoContent)
	})
}

func constantTimeEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
