package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

const writeFailMixDirEnv = "OFFSETD_WRITEFAILMIX_DIR"

// TestWriteFailureMix is TestWriteFailure with everything that meets on
// the commit pipeline at once: commits made alone, CommitMany calls (a group
// twice in one), deletes that settle the partition, snapshots, and callers
// that give up. While appends fail, every call must end with the
// journal's error, its ctx's, or its own; none may hang; a failed commit
// must never show, then or after a reopen.
func TestWriteFailureMix(t *testing.T) {
	runChild(t, "TestWriteFailureMixChild", writeFailMixDirEnv)
}

func TestWriteFailureMixChild(t *testing.T) {
	dir := childDir(t, writeFailMixDirEnv)
	opts := testOptions()
	opts.Partitions = 2
	opts.SegmentSize = 4 << 20 // the limit is hit inside one segment
	opts.Retention = KeepForever
	c := mustOpen(t, dir, opts)
	bg := context.Background()

	lift := limitFileSize(t)

	const workers, groups = 6, 2
	// acked: the offset of the last acknowledged commit of each group;
	// tried: the highest offset sent to it.
	acked := make([][groups]int64, workers)
	tried := make([][groups]int64, workers)
	failures := make([]int, workers)
	var wg sync.WaitGroup
	problems := make(chan string, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			group := func(k int) string { return fmt.Sprintf("w%d-g%d", w, k) }
			meta := strings.Repeat("m", 64)
			// answered checks the outcomes of the commits of one call to
			// group k, all of offset off; false stops the worker.
			answered := func(k int, off int64, errs ...error) bool {
				written, mayBe := false, false
				for _, err := range errs {
					switch {
					case err == nil:
						acked[w][k], written = off, true
					case errors.Is(err, ErrWriteFailed):
						failures[w]++
					case errors.Is(err, context.Canceled):
						mayBe = true
					default:
						problems <- fmt.Sprintf("worker %d: commit of %s: %v", w, group(k), err)
						return false
					}
				}
				o, ok, _ := c.Fetch(group(k), "t", int32(k))
				switch {
				case acked[w][k] > 0 && (!ok || o.Offset < acked[w][k] || o.Offset > tried[w][k]):
					problems <- fmt.Sprintf("worker %d: %s reads %+v %v; acknowledged %d", w, group(k), o, ok, acked[w][k])
					return false
				case !written && !mayBe && ok && o.Offset == off:
					problems <- fmt.Sprintf("worker %d: %s reads %+v: its commit failed (%v)", w, group(k), o, errs)
					return false
				}
				return true
			}
			for off := int64(1); off <= 600 && failures[w] < 8; off++ {
				ctx, cancel := context.WithCancel(bg)
				if rng.IntN(5) == 0 {
					go cancel()
				}
				offsets := func(k int) []OffsetCommit {
					tried[w][k] = off
					return []OffsetCommit{{Topic: "t", Partition: int32(k), Offset: off, LeaderEpoch: -1, Metadata: meta}}
				}
				ok := true
				switch op := rng.IntN(10); {
				case op < 4:
					k := rng.IntN(groups)
					ok = answered(k, off, c.Commit(ctx, group(k), offsets(k)))
				case op < 8:
					ks := []int{rng.IntN(groups), rng.IntN(groups), rng.IntN(groups)}
					var commits []GroupCommit
					for _, k := range ks {
						commits = append(commits, GroupCommit{Group: group(k), Generation: NoGeneration, Offsets: offsets(k)})
					}
					errs := make(map[int][]error)
					for j, r := range c.CommitMany(ctx, commits) {
						errs[ks[j]] = append(errs[ks[j]], r.Err)
					}
					for k, e := range errs {
						if ok = answered(k, off, e...); !ok {
							break
						}
					}
				case op == 8:
					victim := fmt.Sprintf("victim%d", w)
					_ = c.Commit(ctx, victim, []OffsetCommit{{Topic: "t", Offset: off}})
					err := c.DeleteGroup(ctx, victim)
					if err != nil && !errors.Is(err, ErrWriteFailed) && !errors.Is(err, ErrNotFound) && !errors.Is(err, context.Canceled) {
						problems <- fmt.Sprintf("worker %d: delete: %v", w, err)
						ok = false
					}
				default:
					_ = c.Snapshot(ctx) // may fail to write its file: the limit
				}
				cancel()
				if !ok {
					return
				}
			}
		})
	}
	wg.Wait()
	close(problems)
	for p := range problems {
		t.Error(p)
	}
	total := 0
	for _, f := range failures {
		total += f
	}
	if total == 0 {
		t.Fatal("no commit failed under a 64 KiB file-size limit")
	}
	t.Logf("%d commits failed under the limit", total)

	lift()
	if err := c.Commit(bg, "after", []OffsetCommit{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatalf("commit after the limit was lifted: %v", err)
	}
	check := func(c *Coordinator) {
		for w := range workers {
			for k := range groups {
				g := fmt.Sprintf("w%d-g%d", w, k)
				o, ok, err := c.Fetch(g, "t", int32(k))
				if err != nil || acked[w][k] > 0 && !ok || ok && (o.Offset < acked[w][k] || o.Offset > tried[w][k]) {
					t.Errorf("%s: %+v %v %v; acknowledged %d, sent up to %d", g, o, ok, err, acked[w][k], tried[w][k])
				}
			}
		}
	}
	check(c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, dir, opts)
	defer c.Close()
	check(c)
}
