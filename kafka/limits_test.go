package kafka

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/offsetd/offsetd/internal/conntest"
)

// openConns is how many connections s is serving.
func (s *Server) openConns() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.conns))
}

// commitAndFetch commits offset for group through adm and reads it back.
func commitAndFetch(t *testing.T, adm *kadm.Client, group string, offset int64) {
	t.Helper()
	ctx := testContext(t)
	var os kadm.Offsets
	os.AddOffset("orders", 0, offset, -1)
	if err := adm.CommitAllOffsets(ctx, group, os); err != nil {
		t.Fatalf("commit %d: %v", offset, err)
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if o, ok := fetched.Lookup("orders", 0); !ok || o.At != offset {
		t.Fatalf("fetched %+v, want offset %d", o, offset)
	}
}

// halfFrame is the start of a frame of size bytes of which sent arrive.
func halfFrame(size, sent int) []byte {
	b := make([]byte, 4+sent)
	binary.BigEndian.PutUint32(b, uint32(size))
	return b
}

// TestDeadlines holds connections that stall at each point of a request:
// each is closed by the idle or the frame deadline, not before it, and a
// Kafka client is served meanwhile.
func TestDeadlines(t *testing.T) {
	c := openCoordinator(t, t.TempDir())
	const idle, rest = 300 * time.Millisecond, 200 * time.Millisecond
	s, addr := startServer(t, newHandler(t, c, testHandlerOptions()), ServerOptions{IdleTimeout: idle, FrameTimeout: rest})
	adm := newAdmin(t, addr)
	commitAndFetch(t, adm, "deadlines", 1)

	answered := frameOf(kmsg.NewPtrApiVersionsRequest(), 3)
	cases := []struct {
		name string
		send []byte
		// least is how long the server must keep the connection: the
		// deadline that closes it. The frame deadline starts after the
		// idle one when a size arrives late, so a frame's least is its
		// own deadline alone.
		least time.Duration
	}{
		{"silent", nil, idle},
		{"two bytes of a size", []byte{0, 0}, idle},
		{"a size alone", halfFrame(1<<20, 0), rest},
		{"half of a large frame", halfFrame(1<<20, 512<<10), rest},
		{"most of a small frame", halfFrame(100, 90), rest},
		{"a request, then silent", answered, idle},
	}
	// The cases run at once, each on its connection; the server closes
	// each by itself.
	errs := make([]chan error, len(cases))
	for i, tc := range cases {
		start := time.Now() // the server's deadline starts after this
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		errs[i] = make(chan error, 1)
		go func() {
			if _, err := conn.Write(tc.send); err != nil {
				errs[i] <- fmt.Errorf("write: %w", err)
				return
			}
			if _, err := conntest.ReadUntilClosed(conn); err != nil {
				errs[i] <- fmt.Errorf("not closed: %w", err)
				return
			}
			if took := time.Since(start); took < tc.least {
				errs[i] <- fmt.Errorf("closed after %s, before its deadline %s", took, tc.least)
				return
			}
			errs[i] <- nil
		}()
	}
	for i, tc := range cases {
		if err := <-errs[i]; err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// The Kafka client's own connections are idle too, and reconnect.
	commitAndFetch(t, adm, "deadlines", 2)
	conntest.WaitFor(t, "the budget back", func() bool { taken, _ := s.budget.state(); return taken == 0 })
}

// TestStalledFramesMemory opens 300 connections that each send most of a
// 1 MiB frame and stall, as in a slow-client attack, while a Kafka client
// keeps committing; then the clients go. Twice: the server's heap stays
// within the queued-bytes budget while they are held, and each time
// returns to within 20% of where it was before them.
func TestStalledFramesMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("holds about 300 MiB of socket buffers")
	}
	const (
		conns  = 300
		frame  = 1 << 20
		sent   = frame - 64<<10
		budget = 64 << 20
	)
	c := openCoordinator(t, t.TempDir())
	s, addr := startServer(t, newHandler(t, c, testHandlerOptions()), ServerOptions{
		MaxFrameBytes: frame, MaxQueuedBytes: budget, FrameTimeout: time.Minute, IdleTimeout: time.Minute,
	})
	adm := newAdmin(t, addr, kgo.ConnIdleTimeout(15*time.Minute)) // its connections stay while counted
	commitAndFetch(t, adm, "memory", 1)
	clientConns := s.openConns()
	stall := halfFrame(frame, sent)
	// A round runs two goroutines per connection: the server's and the
	// client's writer.
	conntest.WarmGoroutines(2 * conns)
	before := conntest.LiveHeap()

	offset := int64(2)
	for round := 1; round <= 2; round++ {
		closeAll := conntest.Stall(t, addr, conns, stall)
		conntest.WaitFor(t, "the queued-bytes budget taken", func() bool {
			taken, waiting := s.budget.state()
			return taken > budget-frame && waiting > 0 && s.openConns() >= clientConns+conns
		})
		held := conntest.LiveHeap()
		commitAndFetch(t, adm, "memory", offset)
		offset++
		_, waiting := s.budget.state()
		closeAll()
		// Every connection's bytes are held: those in the budget, and
		// each connection's read buffer, goroutine and state (a
		// generous 64 KiB).
		if held < before+budget/2 || held > before+budget+conns*64<<10 {
			t.Fatalf("round %d: heap %s while the frames stall, from %s: want the %s budget, and at most %s above it",
				round, conntest.MiB(held), conntest.MiB(before), conntest.MiB(budget), conntest.MiB(conns*64<<10))
		}
		if waiting == 0 {
			t.Fatalf("round %d: the stalled frames were let go before the Kafka client's requests were answered", round)
		}

		conntest.WaitFor(t, "the stalled connections gone", func() bool {
			taken, waiting := s.budget.state()
			return taken == 0 && waiting == 0 && s.openConns() <= clientConns
		})
		after := conntest.LiveHeap()
		t.Logf("round %d: heap %s before, %s with %d frames of %d of %d bytes stalled (budget %s), %s after they closed",
			round, conntest.MiB(before), conntest.MiB(held), conns, sent, frame, conntest.MiB(budget), conntest.MiB(after))
		if float64(after) > 1.2*float64(before) {
			t.Fatalf("round %d: heap %s after the stalled connections closed, more than 20%% above %s before them", round, conntest.MiB(after), conntest.MiB(before))
		}
	}
	commitAndFetch(t, adm, "memory", offset)
	runtime.KeepAlive(stall)
}

// metadataFrame is a Metadata request for n topics: a frame of a few KiB,
// above smallFrameBytes.
func metadataFrame(n int) []byte {
	req := kmsg.NewPtrMetadataRequest()
	for i := range n {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(fmt.Sprintf("topic-%04d", i))
		req.Topics = append(req.Topics, t)
	}
	return frameOf(req, 12)
}

// TestQueuedBytesWait fills the queued-bytes budget with one stalled frame:
// another large frame waits for memory (small ones do not), and is read and
// answered once the stalled one's connection closes.
func TestQueuedBytesWait(t *testing.T) {
	const budget = 256 << 10
	c := openCoordinator(t, t.TempDir())
	s, addr := startServer(t, newHandler(t, c, testHandlerOptions()), ServerOptions{
		MaxFrameBytes: budget, MaxQueuedBytes: budget, FrameTimeout: time.Minute,
	})
	staller, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer staller.Close()
	if _, err := staller.Write(halfFrame(budget, 200<<10)); err != nil {
		t.Fatal(err)
	}
	conntest.WaitFor(t, "the stalled frame to take the budget", func() bool { taken, _ := s.budget.state(); return taken == budget })

	waiter, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	req := metadataFrame(1000)
	if len(req) <= smallFrameBytes {
		t.Fatalf("a frame of %d bytes takes no budget", len(req))
	}
	if _, err := waiter.Write(req); err != nil {
		t.Fatal(err)
	}
	conntest.WaitFor(t, "the second frame to wait for memory", func() bool { _, waiting := s.budget.state(); return waiting == 1 })
	commitAndFetch(t, newAdmin(t, addr), "small", 1)

	staller.Close()
	waiter.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(waiter, size[:]); err != nil {
		t.Fatalf("no answer once memory came back: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(waiter, body); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	if err := resp.ReadFrom(body[4+1:]); err != nil { // correlation ID, header tags
		t.Fatal(err)
	}
	if len(resp.Topics) != 1000 {
		t.Fatalf("answered %d topics, want 1000", len(resp.Topics))
	}
}

// TestMaxConnections opens MaxConnections connections: the next is closed
// at once without an answer, and once one of them has gone a new one is
// served; then a Kafka client (a seed and a broker connection) is.
func TestMaxConnections(t *testing.T) {
	const max = 3
	c := openCoordinator(t, t.TempDir())
	s, addr := startServer(t, newHandler(t, c, testHandlerOptions()), ServerOptions{MaxConnections: max})
	conntest.CheckCap(t, addr, max, frameOf(kmsg.NewPtrApiVersionsRequest(), 3), askApiVersions, s.openConns)
	commitAndFetch(t, newAdmin(t, addr), "capped", 1)
}

// syncBuffer is a bytes.Buffer for a logger shared by goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestApiVersionsNegotiationQuiet connects franz-go, which asks ApiVersions
// at a version newer than offsetd serves: the answer is logged at debug and
// not counted as an error; the retry at a served version is counted.
func TestApiVersionsNegotiationQuiet(t *testing.T) {
	c := openCoordinator(t, t.TempDir())
	var logged syncBuffer
	logger := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	seen := newCounter()
	addr := listen(t, newHandler(t, c, testHandlerOptions()), ServerOptions{Logger: logger, Observer: seen})
	commitAndFetch(t, newAdmin(t, addr), "negotiated", 1)

	seen.mu.Lock()
	unsupported := seen.counts[[2]string{"ApiVersions", "UNSUPPORTED_VERSION"}]
	seen.mu.Unlock()
	if unsupported != 0 || seen.ok(int16(kmsg.ApiVersions)) == 0 {
		t.Errorf("counted ApiVersions %d times UNSUPPORTED_VERSION and %d times NONE; want 0 and at least 1", unsupported, seen.ok(int16(kmsg.ApiVersions)))
	}
	out := logged.String()
	if !strings.Contains(out, "level=DEBUG msg=\"kafka: ApiVersions newer than served") {
		t.Errorf("no debug line for the negotiation in:\n%s", out)
	}
	for _, level := range []string{"level=WARN", "level=ERROR"} {
		if strings.Contains(out, level) {
			t.Errorf("logged %s:\n%s", level, out)
		}
	}
}

// askApiVersions sends an ApiVersions request on conn and reads the whole
// answer.
func askApiVersions(conn net.Conn) error {
	if _, err := conn.Write(frameOf(kmsg.NewPtrApiVersionsRequest(), 3)); err != nil {
		return err
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return err
	}
	_, err := io.CopyN(io.Discard, conn, int64(binary.BigEndian.Uint32(size[:])))
	return err
}

// BenchmarkIdleConnection measures what an open, idle connection costs the
// server after one request: heap and goroutine stack, per connection
// (the client's side, in the same process, adds a few hundred bytes). It
// is what DefaultServerOptions' MaxConnections is sized by.
func BenchmarkIdleConnection(b *testing.B) {
	c := openCoordinator(b, b.TempDir())
	s, addr := startServer(b, newHandler(b, c, testHandlerOptions()), ServerOptions{})
	conntest.IdleCost(b, addr, 500, askApiVersions, s.openConns)
}

// outOfFilesOnce is a listener whose first Accept fails as it does when the
// process has no file descriptor left.
type outOfFilesOnce struct {
	net.Listener
	failed bool
}

func (l *outOfFilesOnce) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptOutOfFiles runs out of file descriptors while accepting: the
// server waits and accepts again, instead of ending Serve.
func TestAcceptOutOfFiles(t *testing.T) {
	c := openCoordinator(t, t.TempDir())
	s, err := NewServer(newHandler(t, c, testHandlerOptions()), ServerOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(&outOfFilesOnce{Listener: ln}) }()
	defer func() {
		s.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	conn := conntest.Open(t, ln.Addr().String(), 1, askApiVersions)[0]
	conn.Close()
}
