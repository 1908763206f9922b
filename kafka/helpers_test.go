package kafka

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/offsetd/offsetd/coordinator"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// openCoordinator opens a coordinator on dir, closed with the test.
func openCoordinator(t testing.TB, dir string) *coordinator.Coordinator {
	t.Helper()
	o := coordinator.DefaultOptions()
	o.Partitions = 4
	o.Logger = quiet
	c, err := coordinator.Open(dir, o)
	if err != nil {
		t.Fatalf("coordinator.Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testHandlerOptions allow the short session timeouts tests use.
func testHandlerOptions() Options {
	o := DefaultOptions()
	o.MinSessionTimeout = time.Millisecond
	o.Logger = quiet
	return o
}

func newHandler(t testing.TB, c *coordinator.Coordinator, o Options) *Handler {
	t.Helper()
	h, err := NewHandler(c, o)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	t.Cleanup(h.Close)
	return h
}

// listen serves h on a loopback port and returns its address.
func listen(t testing.TB, h *Handler, o ServerOptions) string {
	t.Helper()
	_, addr := startServer(t, h, o)
	return addr
}

// startServer serves h on a loopback port until the test ends.
func startServer(t testing.TB, h *Handler, o ServerOptions) (*Server, string) {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet
	}
	s, err := NewServer(h, o)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

// newAdmin returns a kadm client of addr, closed with the test.
func newAdmin(t testing.TB, addr string, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(2)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// logged is a slog.Handler that sends the value of attribute key of every
// record whose message is msg to to, so that a test waits for an event
// the handler logs.
type logged struct {
	msg, key string
	to       chan<- string
}

func (l logged) Enabled(context.Context, slog.Level) bool { return true }
func (l logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logged) WithGroup(string) slog.Handler            { return l }
func (l logged) Handle(_ context.Context, r slog.Record) error {
	if r.Message != l.msg {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == l.key {
			l.to <- a.Value.String()
			return false
		}
		return true
	})
	return nil
}
