package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/offsetd/offsetd/coordinator"
)

// commitWriters and commitParts are the grid every system is measured on:
// how many goroutines commit at once, and how many partitions one commit
// carries.
var (
	commitWriters = []int{1, 8, 64, 256}
	commitParts   = []int{1, 16}
)

// BenchmarkCommit measures durable commits. writers goroutines commit at
// once, each waiting for its acknowledgement before sending the next; a
// commit carries parts partitions of one topic of one group, and consecutive
// commits go to different groups (keySpace.commit). The store starts empty.
//
// ns/op is wall time per commit (the inverse of throughput); commits/s and
// records/s (offsets) say the same as rates. p50-ns and p99-ns are the
// latency a committer sees, for the durable systems. cpu-ns is the CPU
// time the whole process spent per commit (user and system, every
// goroutine: committers, the system's own, the client's and server's for
// the HTTP path), where the platform tells it. For a system whose server
// runs in a process of its own (offsetd-kafka and the Kafka floor) or in
// several (offsetd serve, BenchmarkClusterCommit), server-cpu-ns is those
// processes' CPU time per commit and client-cpu-ns the benchmark process's
// (the clients'), measured over the same interval, and cpu-ns is their
// sum. For a cluster of processes, rerouted is how many commits its nodes
// refused as not theirs to lead in the timed run.
//
// The systems of one case run one after the other, before the next case: the
// disk's speed drifts over minutes, and systems compared in the same minutes
// are compared on the same disk.
func BenchmarkCommit(b *testing.B) {
	for _, writers := range commitWriters {
		for _, parts := range commitParts {
			for _, sys := range systems {
				b.Run(fmt.Sprintf("sys=%s/writers=%d/parts=%d", sys.name, writers, parts), func(b *testing.B) {
					benchCommit(b, sys, writers, parts)
				})
			}
		}
	}
}

func benchCommit(b *testing.B, sys system, writers, parts int) {
	s, err := sys.open(b.TempDir(), writers)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	}()
	ctx := context.Background()
	// Writer w sends commits w, w+writers, w+2×writers, ... of the stream:
	// b.N commits in all, without a shared counter.
	timed := sys.durable || sys.network // commits slow enough to time one by one
	latencies := make([][]time.Duration, writers)
	commits := make([][]coordinator.OffsetCommit, writers)
	for w := range writers {
		commits[w] = make([]coordinator.OffsetCommit, parts)
		if timed {
			latencies[w] = make([]time.Duration, 0, b.N/writers+1)
		}
	}
	var wg sync.WaitGroup
	b.ReportAllocs()
	counter, counts := s.(syncCounter)
	var before syncCounts
	if counts {
		before = counter.syncStats().load()
	}
	remote, split := s.(remoteServer)
	var serverBefore time.Duration
	if split {
		if serverBefore, err = remote.serverCPU(); err != nil {
			b.Fatal(err)
		}
	}
	moves, rerouting := s.(rerouter)
	var reroutedBefore int64
	if rerouting {
		if reroutedBefore, err = moves.rerouted(); err != nil {
			b.Fatal(err)
		}
	}
	cpu := processCPU()
	b.ResetTimer()
	for w := range writers {
		wg.Go(func() {
			dst := commits[w]
			for n := w; n < b.N; n += writers {
				group := workload.commit(dst, n)
				var start time.Time
				if timed {
					start = time.Now()
				}
				if err := s.Commit(ctx, group, dst); err != nil {
					b.Errorf("commit %d: %v", n, err)
					return
				}
				if timed {
					latencies[w] = append(latencies[w], time.Since(start))
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if cpu > 0 {
		client := processCPU() - cpu
		if split {
			serverAfter, err := remote.serverCPU()
			if err != nil {
				b.Fatal(err)
			}
			server := serverAfter - serverBefore
			b.ReportMetric(float64(server)/float64(b.N), "server-cpu-ns")
			b.ReportMetric(float64(client)/float64(b.N), "client-cpu-ns")
			client += server
		}
		b.ReportMetric(float64(client)/float64(b.N), "cpu-ns")
	}
	if counts {
		counter.syncStats().report(b, before, b.Elapsed())
	}
	if rerouting {
		after, err := moves.rerouted()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(after-reroutedBefore), "rerouted")
	}
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "commits/s")
	b.ReportMetric(rate*float64(parts), "records/s")
	if timed {
		all := slices.Concat(latencies...)
		slices.Sort(all)
		b.ReportMetric(float64(percentile(all, 0.50)), "p50-ns")
		b.ReportMetric(float64(percentile(all, 0.99)), "p99-ns")
	}
}

// remoteServer is a system whose server runs in a process of its own.
type remoteServer interface {
	// serverCPU returns the CPU time the server's process has used so far.
	serverCPU() (time.Duration, error)
}

// rerouter is a cluster whose nodes refuse a commit for a partition
// they do not lead; the client sends it again to the leader. The commit
// benchmark reports how many were refused in the timed run ("rerouted"):
// commits go to their leader, so none should be, unless a leader moved.
type rerouter interface {
	// rerouted returns how many commits the nodes refused so far.
	rerouted() (int64, error)
}

// percentile returns the p-th quantile of sorted samples (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
