package kafka

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/offsetd/offsetd/internal/conntest"
)

// TestBudget takes and gives back queued-frame memory: a take within what
// is free returns at once, one beyond it waits for a give, for its
// deadline or for the server to close, and a take refused takes nothing.
func TestBudget(t *testing.T) {
	far := time.Now().Add(time.Minute)
	b := newBudget(100)
	if err := b.take(60, far, nil); err != nil {
		t.Fatal(err)
	}

	got := make(chan error, 1)
	go func() { got <- b.take(60, far, nil) }()
	waitForWaiters(t, b, 1)
	b.give(60)
	if err := <-got; err != nil {
		t.Fatalf("a take woken by a give: %v", err)
	}
	if taken, waiting := b.state(); taken != 60 || waiting != 0 {
		t.Fatalf("taken %d with %d waiting, want 60 and 0", taken, waiting)
	}

	if err := b.take(60, time.Now().Add(10*time.Millisecond), nil); !errors.Is(err, errNoBudget) {
		t.Fatalf("a take past its deadline: %v, want errNoBudget", err)
	}
	done := make(chan struct{})
	go func() { got <- b.take(60, far, done) }()
	waitForWaiters(t, b, 1)
	close(done)
	if err := <-got; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a take while the server closes: %v, want net.ErrClosed", err)
	}
	b.give(60)
	if err := b.take(10, time.Now().Add(-time.Second), nil); err != nil {
		t.Fatalf("a take within what is free does not wait, whatever its deadline: %v", err)
	}
	if taken, waiting := b.state(); taken != 10 || waiting != 0 {
		t.Fatalf("taken %d with %d waiting, want 10 and 0: a refused take took bytes", taken, waiting)
	}
	var nobody *budget
	if err := nobody.take(1<<40, far, nil); err != nil {
		t.Fatalf("the nil budget refused: %v", err)
	}
}

func waitForWaiters(t *testing.T, b *budget, n int) {
	t.Helper()
	conntest.WaitFor(t, fmt.Sprintf("%d waiting", n), func() bool { _, waiting := b.state(); return waiting == n })
}
