package coordinator

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/offsetd/offsetd/log"
	"github.com/offsetd/offsetd/statictopic"
)

var crashCycles = flag.Int("crash.cycles", 20, "kill cycles of TestCrash")

const (
	crashDirEnv     = "OFFSETD_CRASH_DIR"
	crashBaseEnv    = "OFFSETD_CRASH_BASE"   // first offset of the cycle, above all earlier ones
	crashNoSyncEnv  = "OFFSETD_CRASH_NOSYNC" // set: the child commits with UnsafeNoSync
	crashTopic      = "crash-topic"
	crashWriters    = 16
	crashPartitions = 4
	// Each commit writes the same offset to crashParts partitions of one
	// topic, so a torn commit would show as partitions that disagree.
	crashParts = 3
)

func crashOptions() Options {
	o := testOptions()
	o.Partitions = crashPartitions
	o.SegmentSize = 16 << 10  // segments roll over during the test
	o.SnapshotBytes = 8 << 10 // and snapshots and truncations happen often
	o.SnapshotInterval = -1
	return o
}

// crashState is what the parent knows a writer had acknowledged.
type crashState struct {
	offset  int64 // last acknowledged commit
	deleted bool  // a delete of the group was acknowledged after it
	// nextDeletes: the writer's next operation after the commit was a
	// delete, which may have survived the kill unacknowledged.
	nextDeletes bool
	// maxWritten is the highest offset the writer may have committed,
	// acknowledged or not: the store holding more is a phantom.
	maxWritten int64
}

// errAckedLost marks a check that found an acknowledged operation missing
// after a restart.
var errAckedLost = errors.New("acknowledged operation lost")

// crashRun is what the parent has seen the children of TestCrashChild
// acknowledge, cycle after cycle, on one data directory.
type crashRun struct {
	acked    [crashWriters]crashState
	mapEpoch int64 // the newest acknowledged static-topic epoch
}

// TestCrash re-runs the test binary as a child that commits and deletes
// from many goroutines and prints every acknowledged operation, SIGKILLs it
// after a random number of acknowledgements, reopens the data directory and
// checks that every acknowledged commit is there, nothing acknowledged as
// deleted came back, and no commit is torn. Snapshots and log truncations
// run throughout, so kills land before, during and after them.
func TestCrash(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("child")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 7))
	var run crashRun
	for cycle := range *crashCycles {
		run.runChild(t, dir, cycle, 1+rng.IntN(1500), nil)
		c := mustOpen(t, dir, crashOptions())
		if err := run.check(c, cycle); err != nil {
			t.Fatal(err)
		}
		if cycle == *crashCycles-1 {
			// The kills must have met snapshots and truncations.
			if c.d.journal.FirstIndex() <= 1 {
				t.Fatal("the journal was never truncated after snapshots during the test")
			}
			if run.mapEpoch == 0 {
				t.Fatal("no static-topic change was acknowledged during the test")
			}
			t.Logf("the journal starts at index %d of %d", c.d.journal.FirstIndex(), c.d.journal.LastIndex())
		}
		c.Close()
	}
}

// runChild runs TestCrashChild on dir, with env added to its environment,
// records what it acknowledges, SIGKILLs it after killAfter
// acknowledgements (calling beforeKill, if set, just before) and returns
// once it has exited.
func (r *crashRun) runChild(t *testing.T, dir string, cycle, killAfter int, beforeKill func(), env ...string) {
	t.Helper()
	base := int64(cycle+1) * 1_000_000
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, fmt.Sprintf("%s=%d", crashBaseEnv, base))
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for w := range r.acked {
		r.acked[w].maxWritten = base // each writer's first commit
	}
	sc := bufio.NewScanner(stdout)
	seen, killed := 0, false
	for sc.Scan() {
		op, w, off, ok := parseAck(sc.Text())
		if !ok {
			continue
		}
		if op == "map" {
			if off <= r.mapEpoch {
				t.Fatalf("cycle %d: epoch %d acknowledged after %d", cycle, off, r.mapEpoch)
			}
			r.mapEpoch = off
			continue
		}
		if off < r.acked[w].offset {
			t.Fatalf("cycle %d: writer %d acknowledged %d after %d", cycle, w, off, r.acked[w].offset)
		}
		// After a commit the next operation commits the next offset or
		// deletes; after the delete that follows the commit of off, the
		// writer commits off+2.
		r.acked[w] = crashState{offset: off, deleted: op == "del", nextDeletes: op == "ack" && (off-base)%7 == 5, maxWritten: off + 1}
		if op == "del" {
			r.acked[w].maxWritten = off + 2
		}
		if seen++; seen == killAfter && !killed {
			if beforeKill != nil {
				beforeKill()
			}
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("cycle %d: child exited before the kill: %v\n%s", cycle, err, stderr.String())
	}
}

// check compares the store after a restart with what was acknowledged, and
// from then on expects what the store holds: a later, unacknowledged
// operation may have survived, but never a torn commit nor a phantom.
func (r *crashRun) check(c *Coordinator, cycle int) error {
	for w := range r.acked {
		got, err := checkCrashWriter(c, cycle, w, r.acked[w])
		if err != nil {
			return err
		}
		r.acked[w] = got
	}
	if r.mapEpoch == 0 {
		return nil
	}
	m, ok, err := c.StaticTopic(crashTopic, "clusterA")
	if err != nil || !ok || m.Epoch < r.mapEpoch {
		return fmt.Errorf("cycle %d: %w: static topic epoch %d acknowledged, store has %v %v %v", cycle, errAckedLost, r.mapEpoch, m.Epoch, ok, err)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("cycle %d: replayed mapping is invalid: %w", cycle, err)
	}
	r.mapEpoch = m.Epoch
	return nil
}

// checkCrashWriter compares a writer's group after a restart with what was
// acknowledged, and returns the state to expect from now on.
func checkCrashWriter(c *Coordinator, cycle, w int, want crashState) (crashState, error) {
	var first int64
	var found int
	for part := range int32(crashParts) {
		v, ok, err := c.Fetch(crashGroup(w), "orders", part)
		if err != nil {
			return want, err
		}
		if !ok {
			continue
		}
		found++
		if part == 0 {
			first = v.Offset
		} else if v.Offset != first {
			return want, fmt.Errorf("cycle %d: writer %d: torn commit: partition 0 at %d, partition %d at %d", cycle, w, first, part, v.Offset)
		}
	}
	switch {
	case found != 0 && found != crashParts:
		return want, fmt.Errorf("cycle %d: writer %d: torn commit: %d of %d partitions present", cycle, w, found, crashParts)
	case found == 0 && !want.deleted && !want.nextDeletes && want.offset > 0:
		return want, fmt.Errorf("cycle %d: writer %d: %w: commit of %d, store has nothing", cycle, w, errAckedLost, want.offset)
	case found > 0 && want.deleted && first <= want.offset:
		return want, fmt.Errorf("cycle %d: writer %d: %w: offset %d came back after a delete", cycle, w, errAckedLost, first)
	case found > 0 && first < want.offset:
		return want, fmt.Errorf("cycle %d: writer %d: %w: commit of %d, store has %d", cycle, w, errAckedLost, want.offset, first)
	case found > 0 && first > want.maxWritten:
		return want, fmt.Errorf("cycle %d: writer %d: phantom: store has %d, never written (at most %d)", cycle, w, first, want.maxWritten)
	}
	if found == 0 {
		return crashState{offset: want.offset, deleted: true}, nil
	}
	return crashState{offset: first}, nil
}

func crashGroup(w int) string { return fmt.Sprintf("group-%02d", w) }

// parseAck reads a child's line "ack W OFFSET" (commit of OFFSET), "del W
// OFFSET" (delete of the group after committing OFFSET) or "map 0 EPOCH"
// (a remap of the static topic).
func parseAck(line string) (op string, writer int, offset int64, ok bool) {
	f := strings.Fields(line)
	if len(f) != 3 || (f[0] != "ack" && f[0] != "del" && f[0] != "map") {
		return "", 0, 0, false
	}
	w, err1 := strconv.Atoi(f[1])
	o, err2 := strconv.ParseInt(f[2], 10, 64)
	return f[0], w, o, err1 == nil && err2 == nil
}

// TestCrashChild is the child of TestCrash: it commits until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCrash")
	}
	o := crashOptions()
	o.UnsafeNoSync = os.Getenv(crashNoSyncEnv) != ""
	c, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	// Static-topic records ride the same partitions as the offsets: a few
	// remaps per cycle, each acknowledged with its epoch.
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx := context.Background()
		// Created by the first cycle; the remaps of later cycles have
		// moved its queues, so creating it again would be a conflict.
		if _, ok, err := c.StaticTopic(crashTopic, "clusterA"); err != nil {
			panic(err)
		} else if !ok {
			if _, err := c.CreateStaticTopic(ctx, crashTopic, "clusterA", 4, []string{"b1", "b2"}); err != nil {
				panic(err)
			}
		}
		for i := range 10 {
			m, _, err := c.StaticTopic(crashTopic, "clusterA")
			if err != nil {
				panic(err)
			}
			q := int32(i % 4)
			leader, _ := m.Leader(q)
			to := map[string]string{"b1": "b2", "b2": "b3", "b3": "b1"}[leader.Broker]
			m, err = c.RemapStaticTopic(ctx, crashTopic, "clusterA", []statictopic.QueueMove{{QueueID: q, ToBroker: to, OldLeaderMaxOffset: leader.StartOffset + 100}})
			if err != nil {
				panic(err)
			}
			out.Lock()
			fmt.Printf("map 0 %d\n", m.Epoch)
			out.Unlock()
		}
	}()
	for w := range crashWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := crashGroup(w)
			base, err := strconv.ParseInt(os.Getenv(crashBaseEnv), 10, 64)
			if err != nil {
				panic(err)
			}
			for i, off := 0, base; ; i, off = i+1, off+1 {
				if i%7 == 6 {
					if err := c.DeleteGroup(context.Background(), group); err != nil {
						panic(err)
					}
					out.Lock()
					fmt.Printf("del %d %d\n", w, off-1)
					out.Unlock()
					continue
				}
				offs := make([]OffsetCommit, crashParts)
				for p := range offs {
					offs[p] = OffsetCommit{Topic: "orders", Partition: int32(p), Offset: off, LeaderEpoch: -1, Metadata: "crash"}
				}
				if i%7 == 3 {
					// The same commit twice in one CommitMany: the
					// second joins the first's batch, or follows it.
					gc := GroupCommit{Group: group, Generation: NoGeneration, Offsets: offs}
					for _, r := range c.CommitMany(context.Background(), []GroupCommit{gc, gc}) {
						if r.Err != nil {
							panic(r.Err)
						}
					}
				} else if err := c.Commit(context.Background(), group, offs); err != nil {
					panic(err)
				}
				out.Lock()
				fmt.Printf("ack %d %d\n", w, off)
				out.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestOpenSyncsNewDirectories checks what a SIGKILL cannot show: Open syncs
// the parent of every directory it creates, so a machine crash right after
// creation cannot lose the data directory's entry.
func TestOpenSyncsNewDirectories(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "data")
	var synced []string
	opts := testOptions()
	opts.Partitions = 1
	opts.syncDir = func(d string) error {
		synced = append(synced, d)
		return log.SyncDir(d)
	}
	c := mustOpen(t, dir, opts)
	defer c.Close()
	for _, parent := range []string{root, filepath.Join(root, "a")} {
		if !slices.Contains(synced, parent) {
			t.Errorf("%s was not synced after its new entry was created (synced: %v)", parent, synced)
		}
	}
}
