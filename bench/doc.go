// Package bench measures offsetd side by side with the stores a user might
// put offsets in instead (Pebble, bbolt) and with what the disk and memory
// allow at all (the floors), in one run, under one workload.
//
// The package is test-only: the benchmarks, the systems they drive and the
// workload live in _test.go files, and run.sh turns a run into RESULTS.md
// with the report writer in internal/report.
//
// Every system is measured at the same durability: a commit is on stable
// storage before it is acknowledged. One workload serves all of them: an
// offset commit is group g-NNNNNN, topic orders-N, partitions 0-15 of each
// topic, and a value of offset, leader epoch, commit time and 16 bytes of
// metadata. BENCH_FULL=1 selects the large key space (10,000 groups × 8 topics
// × 16 partitions = 1.28M keys) instead of the small one (1,000 groups);
// BENCH_GROUPS=N sets the group count directly.
//
// Sub-benchmarks are named the same way for every system, so that benchstat
// and the report can put them side by side:
//
//	BenchmarkCommit/sys=pebble/writers=64/parts=1
//	BenchmarkFetch/sys=offsetd/readers=1
//	BenchmarkFetchGroup/sys=bbolt/readers=8
//	BenchmarkRestart/sys=offsetd/writes=6
//	BenchmarkPolledFetch/sys=offsetd-http/answer=cached
//
// sys=offsetd-http is offsetd's HTTP path: the server on a loopback
// listener, called through the Go client.
//
// Usage:
//
//	./run.sh           # quick run, small key space
//	./run.sh --full    # the real run, large key space
//	./ci.sh            # every benchmark once, tiny key space (CI)
package bench
