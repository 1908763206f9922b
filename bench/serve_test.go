package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/partitioner"
)

// offsetdServe1System is offsetd as an operator runs it on one machine:
// the offsetd binary, built from this checkout, started as `offsetd serve`
// in a process of its own on a loopback port, with its default options
// (but its Kafka listener off), and driven through client/ over
// keep-alive connections as offsetd-http is. Beside offsetd-serve3 it is
// one server process against three.
var offsetdServe1System = system{
	name:    "offsetd-serve1",
	durable: true,
	open: func(dir string, writers int) (committer, error) {
		return startServe(dir, 1, writers)
	},
}

// offsetdServe3System is offsetd-raft3 as an operator runs it: a cluster
// of three `offsetd serve` processes on loopback (the README's three
// commands, on ports free at the time), each with its own data directory
// on the same disk, their Raft messages going through the HTTP transport
// between processes. A commit goes, through a client of each node, to the
// node that leads its group's partition, as a consumer that asked
// /v1/coordinator commits, so that none pays for a 421.
var offsetdServe3System = system{
	name:    "offsetd-serve3",
	durable: true,
	open: func(dir string, writers int) (committer, error) {
		return startServe(dir, 3, writers)
	},
}

// How long a server process may take to start (listening, loaded and,
// in a cluster, every partition led by its preferred node) and to stop
// after SIGTERM before it is killed.
const (
	serveStartTimeout = time.Minute
	serveStopTimeout  = time.Minute
)

// offsetdBinary returns the offsetd binary the serve systems run, built
// once per process.
var offsetdBinary = sync.OnceValues(buildOffsetd)

// buildOffsetd builds cmd/offsetd of the module bench's go.mod replaces
// github.com/offsetd/offsetd with (this checkout), in that module as a user
// builds it, into dataRoot.
func buildOffsetd() (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("bench: building offsetd: %w", err)
	}
	root, err := exec.Command(goTool, "list", "-m", "-f", "{{.Dir}}", "github.com/offsetd/offsetd").Output()
	if err != nil {
		return "", fmt.Errorf("bench: finding the offsetd module: %w", err)
	}
	bin := filepath.Join(dataRoot, "offsetd")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/offsetd")
	build.Dir = strings.TrimSpace(string(root))
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: go build ./cmd/offsetd in %s: %w\n%s", build.Dir, err, out)
	}
	return bin, nil
}

// serveStore is offsetd serve on one node or a cluster of several, each
// in a process of its own, and a client of each node.
type serveStore struct {
	nodes   []*serveProcess  // node id i+1 at i
	clients []*client.Client // of nodes[i]
	// leader holds, in a cluster, the index in nodes of each internal
	// partition's leader, as settled before the run.
	leader []int
	part   partitioner.Partitioner
	hc     *http.Client // for /readyz and /metrics
	// journal holds every node's journal counters, summed, as last
	// scraped.
	journal syncStats
}

// startServe starts size offsetd serve processes in dir (one data
// directory and log file each), a cluster when size is above 1, and
// returns once every partition is led by its preferred node. callers is how
// many goroutines will commit at once.
func startServe(dir string, size, callers int) (*serveStore, error) {
	bin, err := offsetdBinary()
	if err != nil {
		return nil, err
	}
	addrs, err := freeLoopbackAddrs(2 * size)
	if err != nil {
		return nil, err
	}
	api, raft := addrs[:size], addrs[size:]
	var peers []string
	for i, a := range raft {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	s := &serveStore{hc: &http.Client{Timeout: 10 * time.Second}}
	for i := range size {
		args := []string{"-data", filepath.Join(dir, fmt.Sprint(i+1))}
		if size > 1 {
			args = append(args, "-node-id", fmt.Sprint(i+1), "-raft-listen", raft[i], "-peers", strings.Join(peers, ","))
		}
		p, err := startServeProcess(bin, api[i], filepath.Join(dir, fmt.Sprintf("node%d.log", i+1)), args...)
		if err != nil {
			return nil, errors.Join(err, s.Close())
		}
		s.nodes = append(s.nodes, p)
		// The client's own transport, as offsetd-http's: no retries, a
		// 503 fails the run.
		c, err := client.New("http://"+api[i], client.Options{MaxIdleConns: max(httpConns, callers), Retries: -1})
		if err != nil {
			return nil, errors.Join(err, s.Close())
		}
		s.clients = append(s.clients, c)
	}
	if err := s.settle(); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// freeLoopbackAddrs returns n distinct loopback addresses whose ports were
// free a moment ago.
func freeLoopbackAddrs(n int) ([]string, error) {
	var addrs []string
	var errs []error
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			errs = append(errs, err)
			break
		}
		defer l.Close() // all held at once: n distinct ports
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, errors.Join(errs...)
}

// settle waits until every node is ready (/readyz) and, in a cluster,
// sees every partition led by its preferred node (where the lead stays
// while that node is up), then records the leaders.
func (s *serveStore) settle() error {
	deadline := time.Now().Add(serveStartTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		why := s.settled()
		if why == nil {
			return nil
		}
		for _, p := range s.nodes {
			select {
			case <-p.exited:
				return p.failure("exited while starting")
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: offsetd serve not settled within %v: %w", serveStartTimeout, why)
		}
		<-tick.C
	}
}

// settled returns nil once every node is ready and, in a cluster, every
// node sees every partition led by its preferred node, and otherwise what
// is missing.
func (s *serveStore) settled() error {
	for i, p := range s.nodes {
		resp, err := s.hc.Get("http://" + p.addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("node %d: /readyz %d", i+1, resp.StatusCode)
		}
	}
	if len(s.nodes) == 1 {
		return nil
	}
	var leader []int
	for i, c := range s.clients {
		replicas, err := c.Replicas(context.Background())
		if err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
		if leader == nil {
			leader = make([]int, len(replicas))
		}
		for _, r := range replicas {
			voters := slices.Sorted(slices.Values(r.Voters))
			if len(voters) != len(s.nodes) || r.Partition < 0 || r.Partition >= len(leader) {
				return fmt.Errorf("node %d: partition %d has voters %v", i+1, r.Partition, r.Voters)
			}
			// The lead goes to the partition's preferred node: partitions
			// dealt out over their sorted voters (cluster's balance).
			if preferred := voters[r.Partition%len(voters)]; r.Leader != preferred {
				return fmt.Errorf("node %d: partition %d is led by node %d, not yet by node %d", i+1, r.Partition, r.Leader, preferred)
			}
			leader[r.Partition] = int(r.Leader) - 1
		}
	}
	part, err := partitioner.New(len(leader))
	if err != nil {
		return err
	}
	s.leader, s.part = leader, part
	return nil
}

// Commit sends the commit through the client of the node that leads its
// group's partition.
func (s *serveStore) Commit(ctx context.Context, group string, offsets []coordinator.OffsetCommit) error {
	node := 0
	if s.leader != nil {
		node = s.leader[s.part.Group(group)]
	}
	_, err := s.clients[node].Commit(ctx, group, -1, clientCommits(offsets))
	return err
}

// serverCPU is the CPU time the server processes have used so far,
// together.
func (s *serveStore) serverCPU() (time.Duration, error) {
	var sum time.Duration
	for _, p := range s.nodes {
		cpu, err := childCPU(p.cmd.Process.Pid)
		if err != nil {
			return 0, err
		}
		sum += cpu
	}
	return sum, nil
}

// syncStats returns the nodes' journal counters, summed, read from their
// /metrics now (as offsetd-raft3 counts its three nodes' journals
// together): the commit benchmark reports commits/fsync and the rest from
// them. A failed read leaves them as they were.
func (s *serveStore) syncStats() *syncStats {
	var sum syncCounts
	for _, p := range s.nodes {
		m, err := p.metrics(s.hc)
		if err != nil {
			return &s.journal
		}
		sum.batches += int64(m["offsetd_journal_append_duration_seconds_count"])
		sum.commits += int64(m["offsetd_journal_batch_records_sum"])
		sum.busy += int64(m["offsetd_journal_append_duration_seconds_sum"] * float64(time.Second))
	}
	s.journal.store(sum)
	return &s.journal
}

// rerouted is how many commits the nodes have refused so far as not
// theirs to lead (421 not_leader, 503 no_leader), each then sent again:
// after settle, only a leader that moved during the run makes one.
func (s *serveStore) rerouted() (int64, error) {
	var n float64
	for _, p := range s.nodes {
		m, err := p.metrics(s.hc)
		if err != nil {
			return 0, err
		}
		n += m[`offsetd_commits_total{result="not_leader"}`] + m[`offsetd_commits_total{result="no_leader"}`]
	}
	return int64(n), nil
}

// Close stops every node (at once, as an operator stops a cluster) and
// reports any that did not stop cleanly.
func (s *serveStore) Close() error {
	for _, c := range s.clients {
		c.CloseIdleConnections()
	}
	errs := make([]error, len(s.nodes))
	var wg sync.WaitGroup
	for i, p := range s.nodes {
		wg.Go(func() { errs[i] = p.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// serveProcess is one offsetd serve in a process of its own, its standard
// error going to a file.
type serveProcess struct {
	cmd    *exec.Cmd
	addr   string        // host:port of its HTTP API
	log    string        // the file of its standard error
	exited chan struct{} // closed once it has exited
	err    error         // how it exited, once exited is closed
}

// startServeProcess starts bin serve listening for clients on addr, with
// the Kafka listener off and the other flags args, its standard error
// going to logPath, and returns once it listens.
func startServeProcess(bin, addr, logPath string, args ...string) (*serveProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the process has its own
	cmd := exec.Command(bin, append([]string{"serve", "-listen", addr, "-kafka-listen="}, args...)...)
	// Without the benchmark's OFFSETD_ variables, which offsetd serve
	// would take as flags.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "OFFSETD_") })
	cmd.Stderr = logFile
	cmd.SysProcAttr = childAttributes()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serveProcess{cmd: cmd, addr: addr, log: logPath, exited: make(chan struct{})}
	listening := make(chan struct{})
	go func() {
		// The first line says where it listens; the rest is drained.
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			close(listening)
		}
		for sc.Scan() {
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	timer := time.NewTimer(serveStartTimeout)
	defer timer.Stop()
	select {
	case <-listening:
		return p, nil
	case <-p.exited:
		return nil, p.failure("exited before it listened")
	case <-timer.C:
		return nil, errors.Join(p.failure(fmt.Sprintf("did not listen within %v", serveStartTimeout)), p.Close())
	}
}

// metrics scrapes the process's /metrics.
func (p *serveProcess) metrics(hc *http.Client) (map[string]float64, error) {
	return scrapeMetrics(hc, "http://"+p.addr+"/metrics")
}

// Close stops the process as an operator does (SIGTERM: it finishes the
// requests in flight, hands off the lead of its partitions and closes its
// data directory), kills it if it has not exited within serveStopTimeout,
// and reports any exit but a clean one.
func (p *serveProcess) Close() error {
	select {
	case <-p.exited:
		return p.failure("had exited before it was stopped")
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return errors.Join(err, p.cmd.Process.Kill())
	}
	timer := time.NewTimer(serveStopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		if p.err != nil {
			return p.failure("stopped")
		}
		return nil
	case <-timer.C:
		err := p.cmd.Process.Kill()
		<-p.exited
		return errors.Join(err, p.failure(fmt.Sprintf("did not stop within %v of SIGTERM and was killed", serveStopTimeout)))
	}
}

// failure describes the process having done what, with how it exited and
// the end of its log.
func (p *serveProcess) failure(what string) error {
	status := "running"
	select {
	case <-p.exited:
		status = fmt.Sprint(p.err)
		if p.err == nil {
			status = "exit status 0"
		}
	default:
	}
	return fmt.Errorf("bench: offsetd serve on %s %s (%s); the end of its log, %s:\n%s", p.addr, what, status, p.log, logTail(p.log, 4<<10))
}

// logTail returns the whole lines in the last n bytes of the file at
// path, or why not.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	cut := false
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		if _, err := f.Seek(fi.Size()-n, io.SeekStart); err != nil {
			return err.Error()
		}
		cut = true
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	if i := bytes.IndexByte(b, '\n'); cut && i >= 0 {
		b = b[i+1:]
	}
	return string(b)
}
