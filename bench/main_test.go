package bench

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
)

var (
	// workload is the run's key space, chosen by the environment.
	workload *keySpace
	// dataRoot holds the stores that several benchmarks share (each
	// loaded once per process); removed when the run ends.
	dataRoot string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if name := os.Getenv(childServerEnv); name != "" {
		return runChild(name, os.Getenv(childDirEnv))
	}
	flag.Parse()
	ks, err := workloadKeySpace()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	workload = ks
	dataRoot, err = os.MkdirTemp("", "offsetd-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dataRoot)
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		printConfiguration(ks)
	}
	return m.Run()
}

// printConfiguration prints what the run measured on as Go benchmark
// configuration lines ("key: value"), which benchstat shows and the report
// writer puts in RESULTS.md.
func printConfiguration(ks *keySpace) {
	fs := filesystem(os.TempDir())
	fmt.Printf("keyspace: %s\n", ks.name)
	fmt.Printf("groups: %d\n", len(ks.groups))
	fmt.Printf("keys: %d\n", ks.keys())
	fmt.Printf("keybytes: %d\n", ks.keyBytes())
	fmt.Printf("cpus: %d\n", runtime.NumCPU())
	fmt.Printf("kernel: %s\n", kernelRelease())
	fmt.Printf("fs: %s\n", fs)
	fmt.Printf("go: %s\n", runtime.Version())
	if fs == "tmpfs" || fs == "ramfs" {
		fmt.Fprintf(os.Stderr, "warning: %s is on %s: fsync costs nothing there, so the durable figures mean nothing; set TMPDIR (or BENCH_TMPDIR for run.sh) to a directory on a disk\n", os.TempDir(), fs)
	}
}
