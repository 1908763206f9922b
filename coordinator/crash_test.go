package coordinator

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var crashCycles = flag.Int("crash.cycles", 20, "kill cycles of TestCrash")

const (
	crashDirEnv     = "OFFSETD_CRASH_DIR"
	crashWriters    = 16
	crashPartitions = 4
	// Each commit writes the same offset to crashParts partitions of one
	// topic, so a torn commit would show as partitions that disagree.
	crashParts = 3
)

func crashOptions() Options {
	o := testOptions()
	o.Partitions = crashPartitions
	o.SegmentSize = 64 << 10 // segments roll over during the test
	return o
}

// TestCrash re-runs the test binary as a child that commits from many
// goroutines and prints every acknowledged commit, SIGKILLs it after a random
// number of acknowledgements, reopens the data directory and checks that
// every acknowledged commit is there and that no commit is torn.
func TestCrash(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("child")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 7))
	acked := map[int]int64{} // writer → last acknowledged offset
	for cycle := range *crashCycles {
		killAfter := 1 + rng.IntN(1500)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
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
			w, off, ok := parseAck(sc.Text())
			if !ok {
				continue
			}
			if off < acked[w] {
				t.Fatalf("cycle %d: writer %d acknowledged %d after %d", cycle, w, off, acked[w])
			}
			acked[w] = off
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
			var first int64
			for part := range int32(crashParts) {
				v, ok, err := c.Fetch(crashGroup(w), "orders", part)
				if err != nil {
					t.Fatal(err)
				}
				if acked[w] > 0 && !ok {
					t.Fatalf("cycle %d: writer %d acknowledged %d, store has nothing", cycle, w, acked[w])
				}
				if v.Offset < acked[w] {
					t.Fatalf("cycle %d: writer %d acknowledged %d, store has %d", cycle, w, acked[w], v.Offset)
				}
				if part == 0 {
					first = v.Offset
				} else if v.Offset != first {
					t.Fatalf("cycle %d: writer %d: torn commit: partition 0 at %d, partition %d at %d", cycle, w, first, part, v.Offset)
				}
			}
			acked[w] = first // a later, unacknowledged commit may have survived
		}
		c.Close()
	}
}

func crashGroup(w int) string { return fmt.Sprintf("group-%02d", w) }

func parseAck(line string) (writer int, offset int64, ok bool) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "ack" {
		return 0, 0, false
	}
	w, err1 := strconv.Atoi(f[1])
	o, err2 := strconv.ParseInt(f[2], 10, 64)
	return w, o, err1 == nil && err2 == nil
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
	for w := range crashWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := crashGroup(w)
			v, _, err := c.Fetch(group, "orders", 0)
			if err != nil {
				panic(err)
			}
			for off := v.Offset + 1; ; off++ {
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
