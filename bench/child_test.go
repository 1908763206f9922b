package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"sync"
	"time"
)

// The Kafka servers the benchmarks drive (offsetd's listener and the bare
// kmsg floor) run in a process of their own, this test binary started
// again in server mode, so that their CPU time is measured apart from the
// clients': getrusage of the child, asked for over its standard input,
// against the benchmark process's own. Both sides share the machine's cores
// as they would on one host.

// Environment variables that start the test binary as a server: the
// server to run (childOffsetdKafka or childKafkaFloor) and, for offsetd,
// its data directory. childProfileEnv, set by whoever runs the
// benchmarks, names a file each server process writes its CPU profile to
// (the last one to stop wins): where the server's time goes.
const (
	childServerEnv  = "OFFSETD_BENCH_SERVER"
	childDirEnv     = "OFFSETD_BENCH_DIR"
	childProfileEnv = "BENCH_SERVER_CPUPROFILE"
)

// The servers a child runs.
const (
	childOffsetdKafka = "offsetd-kafka"
	childKafkaFloor   = "kafka-floor"
)

// serverChild is a server running in a child process. The child prints its
// listener's address as its first line; after that, each line "stats" sent
// to it is answered with the CPU time it has used (nanoseconds, user and
// system) and its journal's counters (batches, commits, nanoseconds
// appending and syncing; zeros for a server without a journal), and
// closing its standard input stops it.
type serverChild struct {
	cmd  *exec.Cmd
	addr string

	mu  sync.Mutex
	in  io.WriteCloser // guarded by mu
	out *bufio.Reader  // guarded by mu
}

// startChild starts this test binary as server name, with dir as its data
// directory, and returns once it listens.
func startChild(name, dir string) (*serverChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childServerEnv+"="+name, childDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childAttributes()
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &serverChild{cmd: cmd, in: in, out: bufio.NewReader(out)}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%s server: no address: %w", name, err), c.Close())
	}
	c.addr = strings.TrimSpace(line)
	return c, nil
}

// stats returns the CPU time the child has used so far (0 where the
// platform does not tell) and its journal's counters.
func (c *serverChild) stats() (time.Duration, syncCounts, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.in, "stats\n"); err != nil {
		return 0, syncCounts{}, err
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return 0, syncCounts{}, err
	}
	var cpu int64
	var sc syncCounts
	if _, err := fmt.Sscan(line, &cpu, &sc.batches, &sc.commits, &sc.busy); err != nil {
		return 0, syncCounts{}, fmt.Errorf("bench: server child answered %q: %w", line, err)
	}
	return time.Duration(cpu), sc, nil
}

// Close stops the child (it closes its server and store, then exits) and
// waits for it.
func (c *serverChild) Close() error {
	c.mu.Lock()
	err := c.in.Close()
	c.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case werr := <-done:
		return errors.Join(err, werr)
	case <-time.After(time.Minute):
		return errors.Join(err, c.cmd.Process.Kill(), errors.New("bench: server child did not stop within a minute"))
	}
}

// childServer is what runChild serves until its standard input closes.
type childServer interface {
	addr() net.Addr
	// journal returns the counters of the server's journal, or zeros.
	journal() syncCounts
	Close() error
}

// runChild is main for a child: it starts server name, prints its address,
// answers "cpu" lines and stops at the end of its standard input. It
// returns the process's exit status.
func runChild(name, dir string) int {
	var srv childServer
	var err error
	switch name {
	case childOffsetdKafka:
		srv, err = serveOffsetdKafka(dir)
	case childKafkaFloor:
		srv, err = serveKafkaFloor()
	default:
		err = fmt.Errorf("unknown server %q", name)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s server: %v\n", name, err)
		return 1
	}
	if path := os.Getenv(childProfileEnv); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s server: profile: %v\n", name, err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	fmt.Println(srv.addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "stats" {
			j := srv.journal()
			fmt.Println(int64(processCPU()), j.batches, j.commits, j.busy)
		}
	}
	if err := srv.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s server: %v\n", name, err)
		return 1
	}
	return 0
}
