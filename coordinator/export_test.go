package coordinator

import (
	"context"
	"testing"
)

// snapshotState is a partition's writer-owned snapshot state, read on its
// writer goroutine.
type snapshotState struct {
	index uint64 // of the newest good snapshot, 0 if none
	size  int64  // its size in bytes
}

// waitSnapshots waits, on each partition's writer goroutine, until no
// snapshot is running: it finishes a running one as the writer loop would
// (truncation included), and the one its end may start. No commit runs
// meanwhile, so the data directory holds no file about to be renamed or
// removed until the next commit. It returns each partition's snapshot state.
func (c *Coordinator) waitSnapshots(t testing.TB) []snapshotState {
	t.Helper()
	out := make([]snapshotState, len(c.parts))
	for i, p := range c.parts {
		_, err := c.submit(context.Background(), p, &request{control: func(p *partition) {
			for p.snapshotting {
				p.finishSnapshot(<-p.snapDone, c.stop)
			}
			out[i] = snapshotState{index: p.lastSnapshot, size: p.lastSnapSize}
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
