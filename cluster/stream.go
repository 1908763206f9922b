package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"time"
)

// A stream is one POST to StreamPath that lasts as long as its connection:
// the sender writes frames of messages into its body as they queue, the
// receiver hands each frame's messages to its node as it arrives. Every
// ProbeInterval the sender writes a probe, which the receiver answers in
// the response body (full duplex): the answers keep the peer reachable,
// and carry the partitions whose leader says the sender is no member. A
// stream that goes two intervals without an answer is cut, and the sender
// falls back to POSTs (see HTTPTransport).

// streamAnswer bounds how long a new stream waits for the peer's answer.
const streamAnswer = 5 * time.Second

// maxStreamBackoff bounds the wait before a peer whose streams fail at
// once is offered another.
const maxStreamBackoff = 30 * time.Second

// errNoAnswer reports a stream whose peer stopped answering its probes.
var errNoAnswer = errors.New("cluster: stream: no answer to the probes")

// stream sends p's messages on a stream until it fails or ctx is done,
// and says whether the peer answered any probe.
func (t *HTTPTransport) stream(ctx context.Context, p *peer) (answered bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	body := &streamBody{ctx: ctx, p: p, probe: time.NewTicker(t.opts.ProbeInterval), pending: []byte{0}}
	defer body.probe.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url(p.addr, StreamPath), body)
	if err != nil {
		return false, err
	}
	req.ContentLength = -1
	t.setHeaders(req)
	// The first answer, and then every answer to a probe, must come in
	// time: a peer that stops answering is cut off.
	quiet := time.AfterFunc(streamAnswer, func() { cancel(errNoAnswer) })
	defer quiet.Stop()
	client := *t.opts.Client
	client.Timeout = 0 // the answers to the probes bound it
	resp, err := client.Do(req)
	if err != nil {
		return false, errors.Join(err, context.Cause(ctx))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		why, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return false, fmt.Errorf("POST %s: %s: %s", req.URL, resp.Status, why)
	}
	answers := bufio.NewReader(resp.Body)
	for {
		quiet.Reset(2 * t.opts.ProbeInterval)
		parts, err := readAnswer(answers)
		if err != nil {
			return answered, errors.Join(err, context.Cause(ctx))
		}
		answered = true
		p.mu.Lock()
		p.failing = false
		p.lastOK = time.Now()
		p.mu.Unlock()
		if len(parts) > 0 {
			if fn := t.notMember.Load(); fn != nil {
				(*fn)(parts)
			}
		}
	}
}

// streamBody is a stream's request body: each Read takes what queued for
// the peer (waiting for something, or the next probe) and returns it as
// frames. net/http writes each Read's bytes as one chunk, and flushes it.
type streamBody struct {
	ctx     context.Context
	p       *peer
	probe   *time.Ticker
	buf     []byte
	pending []byte // framed, not yet read
}

func (s *streamBody) Read(b []byte) (int, error) {
	if len(s.pending) == 0 {
		if err := s.next(); err != nil {
			return 0, err
		}
	}
	n := copy(b, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// next frames what queued for the peer, waiting for something or a probe.
func (s *streamBody) next() error {
	s.buf = s.buf[:0]
	probe := false
	var first encoded
	select {
	case <-s.ctx.Done():
		return context.Cause(s.ctx)
	case <-s.probe.C:
		probe = true
	case first = <-s.p.q:
	}
	if !probe {
		select {
		case <-s.probe.C:
			probe = true
		default:
		}
	}
	if probe {
		s.buf = append(s.buf, 0)
	}
	if first.n == 0 {
		s.pending = s.buf
		return nil
	}
	// Let the goroutines that are ready to run first (the other groups,
	// the persister) queue what they have: the frame then carries it too,
	// one write for all, where each would have cost a write and a wakeup
	// of the peer's reader. With nothing else to run, this returns at once.
	runtime.Gosched()
	// The frame's size goes first: leave room for the longest uvarint and
	// move the messages down once their size is known.
	head := len(s.buf)
	s.buf = append(s.buf, make([]byte, binary.MaxVarintLen64)...)
	s.buf = append(s.buf, first.b...)
	n := first.n
gather:
	for len(s.buf)-head < maxPostBytes {
		select {
		case e := <-s.p.q:
			s.buf = append(s.buf, e.b...)
			n += e.n
		default:
			break gather
		}
	}
	size := len(s.buf) - head - binary.MaxVarintLen64
	var sz [binary.MaxVarintLen64]byte
	w := binary.PutUvarint(sz[:], uint64(size))
	copy(s.buf[head+binary.MaxVarintLen64-w:], sz[:w])
	s.buf = slices.Delete(s.buf, head, head+binary.MaxVarintLen64-w)
	s.pending = s.buf
	s.p.sent.Add(uint64(n))
	return nil
}

// readAnswer reads one answer to a probe: the partitions whose leader
// says the sender is no member.
func readAnswer(r *bufio.Reader) ([]int, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > 1<<20 {
		return nil, fmt.Errorf("%w: answer of %d partitions", ErrBadMessage, n)
	}
	var parts []int
	for range n {
		p, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if p <= 1<<20 {
			parts = append(parts, int(p))
		}
	}
	return parts, nil
}

// receiveStream takes a POST to StreamPath: it hands each frame's messages
// to n as it arrives, and answers each probe, until the stream ends.
func receiveStream(n *Node, w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	// HTTP/1 reads the whole body before the handler may answer, unless
	// told otherwise (HTTP/2 always allows it); the stream is bounded by
	// its probes, not by the server's timeouts.
	_ = rc.EnableFullDuplex()
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	learnSender(n, w, r, nil)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	from := sender(r)
	body := bufio.NewReaderSize(r.Body, 64<<10)
	var frame, answer []byte
	var seen []Message // a message of each partition heard from since the last probe
	for {
		size, err := binary.ReadUvarint(body)
		if err != nil {
			return
		}
		if size == 0 {
			var parts []int
			if from != 0 {
				parts = n.notMemberOf(from, seen)
			}
			seen = seen[:0]
			answer = binary.AppendUvarint(answer[:0], uint64(len(parts)))
			for _, p := range parts {
				answer = binary.AppendUvarint(answer, uint64(p))
			}
			if _, err := w.Write(answer); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			continue
		}
		if size > maxPostBytes+maxMessageBytes {
			return
		}
		frame = slices.Grow(frame[:0], int(size))[:size]
		if _, err := io.ReadFull(body, frame); err != nil {
			return
		}
		msgs, err := DecodeMessages(frame)
		if err != nil {
			return
		}
		for _, m := range msgs {
			if !slices.ContainsFunc(seen, func(s Message) bool { return s.Partition == m.Partition }) {
				seen = append(seen, Message{Partition: m.Partition})
			}
		}
		n.Receive(msgs)
	}
}
