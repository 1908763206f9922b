package coordinator

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// writerWaitsForLock waits until p's writer goroutine, having taken a
// request from its queue, is blocked on the partition's lock.
func writerWaitsForLock(t *testing.T, p *partition) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if len(p.reqs) == 0 {
			n := runtime.Stack(buf, true)
			for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
				if strings.Contains(g, "[chan send") && strings.Contains(g, "(*partition).run(") && strings.Contains(g, "writeLock.lock") {
					return
				}
			}
		}
		runtime.Gosched()
	}
	t.Fatal("the writer never waited for the partition's lock")
}

// A CommitMany whose first commit is lone (its caller appends it, later,
// in wait) and whose next commit waits for the partition's lock, held by
// the writer settling before a delete, which waits for that lone batch:
// the writer must not wait for a lone caller that is itself waiting.
func TestCommitManyLoneAndSettle(t *testing.T) {
	gate := newGateClock()
	opts := testOptions()
	opts.Partitions = 1
	opts.Now = gate.now
	opts.Retention = KeepForever // the sweeper would read the clock too
	c := mustOpen(t, t.TempDir(), opts)
	defer c.Close()
	bg := context.Background()
	if err := c.Commit(bg, "old", []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	// The partition's writer is up and idle once the snapshot is answered,
	// and so is the journal.
	if err := c.Snapshot(bg); err != nil {
		t.Fatal(err)
	}
	p := c.parts[0]

	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	gate.armed.Store(true)
	results := make(chan []CommitResult, 1)
	go func() {
		results <- c.CommitMany(ctx, []GroupCommit{
			{Group: "a", Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Offset: 10}}},
			{Group: "b", Generation: NoGeneration, Offsets: []OffsetCommit{{Topic: "t", Offset: 20}}},
		})
	}()
	<-gate.entered // the first commit is being built, under the lock
	deleted := make(chan error, 1)
	go func() { deleted <- c.DeleteGroup(ctx, "old") }()
	writerWaitsForLock(t, p)
	// The first commit is handed to the journal alone; the writer takes
	// the lock next and settles, and the second commit waits for it.
	close(gate.release)
	for i, r := range <-results {
		if r.Err != nil {
			t.Errorf("commit %d: %v", i, r.Err)
		}
	}
	if err := <-deleted; err != nil {
		t.Errorf("delete: %v", err)
	}
	for _, g := range []string{"a", "b"} {
		if _, ok, _ := c.Fetch(g, "t", 0); !ok {
			t.Errorf("group %s not committed", g)
		}
	}
	if _, ok, _ := c.Fetch("old", "t", 0); ok {
		t.Error("group old not deleted")
	}
}
