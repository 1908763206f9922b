package coordinator

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestDiskFull fills a real file system: the data directory sits on a
// 1 MiB tmpfs, and writers commit offsets of new partitions (so that the
// live state, and with it the snapshots, grow), with snapshots asked for
// meanwhile, until writes fail with ENOSPC. A commit must then fail with
// ErrWriteFailed and stay invisible, and what was acknowledged must stay
// readable. Once the file system grows, commits and snapshots succeed
// again. After a reopen on the full disk and after one with room, every
// acknowledged offset is there and none of the failed ones. It needs the right to mount (root), and skips,
// saying so, without it.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v); it needs root", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	data := filepath.Join(dir, "data")
	opts := testOptions()
	opts.Partitions = 4
	opts.SegmentSize = 128 << 10
	opts.Retention = KeepForever
	opts.SnapshotInterval = -1
	c := mustOpen(t, data, opts)
	ctx := context.Background()
	meta := strings.Repeat("m", 200) // fills the disk sooner

	const writers, most = 8, 20000
	// ok[w][off]: writer w's commit of off (to partition off) was
	// acknowledged; tried[w]: the highest off it sent.
	ok := make([][]bool, writers)
	for w := range ok {
		ok[w] = make([]bool, most+1)
	}
	tried := make([]int64, writers)
	group := func(w int) string { return fmt.Sprintf("g%d", w) }
	var mu sync.Mutex
	var problems []string
	problem := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// commit commits off, to partition off, to writer w's group and
	// checks the outcome: an acknowledged commit reads back, a failed one
	// is ErrWriteFailed and does not show.
	commit := func(w int, off int64) error {
		tried[w] = off
		err := c.Commit(ctx, group(w), []OffsetCommit{{Topic: "t", Partition: int32(off), Offset: off, LeaderEpoch: -1, Metadata: fmt.Sprint(meta, off)}})
		if err == nil {
			ok[w][off] = true
		} else if !errors.Is(err, ErrWriteFailed) {
			problem("writer %d: commit %d: %v, want ErrWriteFailed", w, off, err)
		}
		if v, found, _ := c.Fetch(group(w), "t", int32(off)); found != (err == nil) || found && v.Offset != off {
			problem("writer %d: after commit %d (%v), Fetch = %d %v", w, off, err, v.Offset, found)
		}
		return err
	}

	// verify checks every offset the writers sent: there if it was
	// acknowledged, absent if not.
	verify := func(when string) {
		t.Helper()
		for w := range writers {
			for off := int64(1); off <= tried[w]; off++ {
				v, found, _ := c.Fetch(group(w), "t", int32(off))
				if found != ok[w][off] || found && v.Offset != off {
					t.Fatalf("writer %d %s: partition %d reads %d %v, acknowledged: %v", w, when, off, v.Offset, found, ok[w][off])
				}
			}
		}
	}

	failed := make([]int, writers)
	stopSnapshots := make(chan struct{})
	snapshots := make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stopSnapshots:
				snapshots <- n
				return
			default:
			}
			if err := c.Snapshot(ctx); err != nil {
				n++
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for off := int64(1); off <= most/2 && failed[w] < 20; off++ {
				if commit(w, off) != nil {
					failed[w]++
				}
			}
		})
	}
	wg.Wait()
	close(stopSnapshots)
	failedSnapshots := <-snapshots
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	total := 0
	for w := range writers {
		total += failed[w]
		if failed[w] < 20 {
			t.Fatalf("writer %d: only %d commits failed; the disk never filled", w, failed[w])
		}
	}
	t.Logf("disk full: %d commits and %d snapshots failed", total, failedSnapshots)

	// A restart on the full disk: every acknowledged offset is there,
	// none of the failed ones, and commits still fail cleanly.
	if err := c.Close(); err != nil {
		t.Logf("close on the full disk: %v", err)
	}
	c = mustOpen(t, data, opts)
	verify("after a reopen on the full disk")
	for w := range writers {
		if err := commit(w, tried[w]+1); err == nil {
			t.Logf("writer %d: a commit on the full disk went through", w)
		}
	}

	// Room again: even writers commit more, odd ones end on a failure
	// that must stay invisible after the reopen too.
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatal(err)
	}
	for w := 0; w < writers; w += 2 {
		if err := commit(w, most); err != nil {
			t.Fatalf("writer %d: commit once the disk has room: %v", w, err)
		}
	}
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	if err := c.Snapshot(ctx); err != nil {
		t.Fatalf("snapshot once the disk has room: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	c = mustOpen(t, data, opts)
	defer c.Close()
	verify("after a reopen with room")
}
