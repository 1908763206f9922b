package coordinator

import (
	"context"
	"testing"
)

// waitSnapshots waits, on each partition's writer goroutine, until no
// snapshot is running: it finishes a running one as the writer loop would
// (truncation included), and the one its end may start. No commit runs
// meanwhile, so the data directory holds no file about to be renamed or
// removed until the next commit. It returns the size of each partition's
// newest snapshot (0 if none), which only the writer goroutine may read.
func (c *Coordinator) waitSnapshots(t testing.TB) []int64 {
	t.Helper()
	sizes := make([]int64, len(c.parts))
	for i, p := range c.parts {
		_, err := c.submit(context.Background(), p, &request{control: func(p *partition) {
			for p.snapshotting {
				p.finishSnapshot(<-p.snapDone, c.stop)
			}
			sizes[i] = p.lastSnapSize
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return sizes
}
