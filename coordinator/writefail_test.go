package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	ossignal "os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const writeFailDirEnv = "OFFSETD_WRITEFAIL_DIR"

// TestWriteFailure makes writes fail for real: a child process lowers its own
// file-size limit (RLIMIT_FSIZE), so the log's appends fail with EFBIG. The
// commits in flight must fail, none of them may appear later, and once the
// limit is raised commits must succeed and read back right, also after a
// reopen.
func TestWriteFailure(t *testing.T) {
	runChild(t, "TestWriteFailureChild", writeFailDirEnv)
}

// runChild runs the test named child in a child process of this test
// binary, with env naming a fresh directory, and fails unless it passes.
// In the child itself (env is set) it skips the calling test.
func runChild(t *testing.T, child, env string) {
	t.Helper()
	if os.Getenv(env) != "" {
		t.Skip("child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+child) {
		t.Fatalf("child did not pass:\n%s", out)
	}
}

// limitFileSize lowers the process's file-size limit (RLIMIT_FSIZE) to
// 64 KiB, so that appends past it fail with EFBIG rather than kill the
// process, and returns what lifts the limit again. Only a child process
// may call it.
func limitFileSize(t *testing.T) (lift func()) {
	t.Helper()
	ossignal.Ignore(syscall.SIGXFSZ) // get EFBIG instead of being killed
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &orig); err != nil {
		t.Fatal(err)
	}
	limited := orig
	limited.Cur = 64 << 10
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limited); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &orig); err != nil {
			t.Fatal(err)
		}
	}
}

// childDir returns the directory of a child test that runChild runs, and
// skips the test when it runs as an ordinary one.
func childDir(t *testing.T, env string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		t.Skip("run in a child process by its parent test")
	}
	return dir
}

func TestWriteFailureChild(t *testing.T) {
	dir := childDir(t, writeFailDirEnv)
	opts := testOptions()
	opts.Partitions = 1
	opts.SegmentSize = 4 << 20 // the limit is hit inside one segment
	c := mustOpen(t, dir, opts)
	ctx := context.Background()
	lift := limitFileSize(t)

	const writers = 8
	acked := make([]int64, writers)
	failed := make([]int, writers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := fmt.Sprintf("g%d", w)
			for off := int64(1); off <= 2000 && failed[w] < 5; off++ {
				err := c.Commit(ctx, group, []OffsetCommit{{Topic: "t", Partition: 0, Offset: off, LeaderEpoch: -1, Metadata: "0123456789abcdef"}})
				if err == nil {
					acked[w] = off
					continue
				}
				if !errors.Is(err, ErrWriteFailed) {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("writer %d: commit %d: %v, want ErrWriteFailed", w, off, err))
					mu.Unlock()
					return
				}
				failed[w]++
				// The failed commit must not be visible.
				v, _, _ := c.Fetch(group, "t", 0)
				if v.Offset != acked[w] {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("writer %d: after failed commit %d, Fetch = %d, want last acked %d", w, off, v.Offset, acked[w]))
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	total := 0
	for _, f := range failed {
		total += f
	}
	if total == 0 {
		t.Fatal("no commit failed under a 64 KiB file-size limit")
	}
	t.Logf("%d commits failed under the limit", total)

	// Writing is possible again: commits succeed and reads are right. Odd
	// writers commit nothing more, so their last attempt was a failure that
	// must stay invisible after the reopen too.
	lift()
	for w := 0; w < writers; w += 2 {
		off := acked[w] + 1000
		group := fmt.Sprintf("g%d", w)
		if err := c.Commit(ctx, group, []OffsetCommit{{Topic: "t", Partition: 0, Offset: off, LeaderEpoch: -1}}); err != nil {
			t.Fatalf("commit after the limit was lifted: %v", err)
		}
		acked[w] = off
	}
	check := func(c *Coordinator) {
		for w := range writers {
			v, ok, err := c.Fetch(fmt.Sprintf("g%d", w), "t", 0)
			if err != nil || !ok || v.Offset != acked[w] {
				t.Fatalf("writer %d: Fetch = %v %v %v, want %d", w, v.Offset, ok, err, acked[w])
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
