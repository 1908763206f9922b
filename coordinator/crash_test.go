package coordinator

import (
	"bufio"
	"context"
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

	"github.com/offsetd/offsetd/statictopic"
)

var crashCycles = flag.Int("crash.cycles", 20, "kill cycles of TestCrash")

const (
	crashDirEnv     = "OFFSETD_CRASH_DIR"
	crashBaseEnv    = "OFFSETD_CRASH_BASE" // first offset of the cycle, above all earlier ones
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
	return o
}

// crashState is what the parent knows a writer had acknowledged.
type crashState struct {
	offset  int64 // last acknowledged commit
	deleted bool  // a delete of the group was acknowledged after it
	// nextDeletes: the writer's next operation after the commit was a
	// delete, which may have survived the kill unacknowledged.
	nextDeletes bool
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
	acked := make([]crashState, crashWriters)
	var mapEpoch int64 // the newest acknowledged static-topic epoch
	for cycle := range *crashCycles {
		killAfter := 1 + rng.IntN(1500)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, fmt.Sprintf("%s=%d", crashBaseEnv, int64(cycle+1)*1_000_000))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		seen, killed := 0, false
		for sc.Scan() {
			op, w, off, ok := parseAck(sc.Text())
			if !ok {
				continue
			}
			if op == "map" {
				if off <= mapEpoch {
					t.Fatalf("cycle %d: epoch %d acknowledged after %d", cycle, off, mapEpoch)
				}
				mapEpoch = off
				continue
			}
			if off < acked[w].offset {
				t.Fatalf("cycle %d: writer %d acknowledged %d after %d", cycle, w, off, acked[w].offset)
			}
			base := int64(cycle+1) * 1_000_000
			acked[w] = crashState{offset: off, deleted: op == "del", nextDeletes: op == "ack" && (off-base)%7 == 5}
			if seen++; seen == killAfter && !killed {
				cmd.Process.Signal(syscall.SIGKILL)
				killed = true
			}
		}
		err = cmd.Wait()
		if !killed {
			t.Fatalf("cycle %d: child exited before the kill: %v\n%s", cycle, err, stderr.String())
		}
		c := mustOpen(t, dir, crashOptions())
		for w := range crashWriters {
			acked[w] = checkCrashWriter(t, c, cycle, w, acked[w])
		}
		if mapEpoch > 0 {
			m, ok, err := c.StaticTopic(crashTopic, "clusterA")
			if err != nil || !ok || m.Epoch < mapEpoch {
				t.Fatalf("cycle %d: static topic epoch %d acknowledged, store has %v %v %v", cycle, mapEpoch, m.Epoch, ok, err)
			}
			if err := m.Validate(); err != nil {
				t.Fatalf("cycle %d: replayed mapping is invalid: %v", cycle, err)
			}
			mapEpoch = m.Epoch
		}
		if cycle == *crashCycles-1 {
			// The kills must have met snapshots and truncations.
			truncated := 0
			for _, p := range c.parts {
				if p.log.FirstIndex() > 1 && p.lastSnapshot > 0 {
					truncated++
				}
			}
			if truncated == 0 {
				t.Fatal("no partition wrote a snapshot and truncated its log during the test")
			}
			if mapEpoch == 0 {
				t.Fatal("no static-topic change was acknowledged during the test")
			}
			t.Logf("%d of %d partitions snapshotted and truncated", truncated, len(c.parts))
		}
		c.Close()
	}
}

// checkCrashWriter compares a writer's group after a restart with what was
// acknowledged, and returns the state to expect from now on: a later,
// unacknowledged commit may have survived, but never a torn one.
func checkCrashWriter(t *testing.T, c *Coordinator, cycle, w int, want crashState) crashState {
	t.Helper()
	var first int64
	var found int
	for part := range int32(crashParts) {
		v, ok, err := c.Fetch(crashGroup(w), "orders", part)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		found++
		if part == 0 {
			first = v.Offset
		} else if v.Offset != first {
			t.Fatalf("cycle %d: writer %d: torn commit: partition 0 at %d, partition %d at %d", cycle, w, first, part, v.Offset)
		}
	}
	switch {
	case found != 0 && found != crashParts:
		t.Fatalf("cycle %d: writer %d: torn commit: %d of %d partitions present", cycle, w, found, crashParts)
	case found == 0 && !want.deleted && !want.nextDeletes && want.offset > 0:
		t.Fatalf("cycle %d: writer %d acknowledged %d, store has nothing", cycle, w, want.offset)
	case found > 0 && want.deleted && first <= want.offset:
		t.Fatalf("cycle %d: writer %d: offset %d came back after an acknowledged delete", cycle, w, first)
	case found > 0 && first < want.offset:
		t.Fatalf("cycle %d: writer %d acknowledged %d, store has %d", cycle, w, want.offset, first)
	}
	if found == 0 {
		return crashState{offset: want.offset, deleted: true}
	}
	return crashState{offset: first}
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
	c, err := Open(dir, crashOptions())
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
				if err := c.Commit(context.Background(), group, offs); err != nil {
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
		return syncDir(d)
	}
	c := mustOpen(t, dir, opts)
	defer c.Close()
	for _, parent := range []string{root, filepath.Join(root, "a")} {
		if !slices.Contains(synced, parent) {
			t.Errorf("%s was not synced after its new entry was created (synced: %v)", parent, synced)
		}
	}
}
