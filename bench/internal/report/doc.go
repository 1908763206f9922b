// Package report turns the output of offsetd's side-by-side benchmarks
// (go test -bench in bench/) into RESULTS.md: the machine, the date, the
// command, one table of medians with offsetd's ratios to the other systems
// (and offsetd-http's to offsetd's), the HTTP path's rates and polled
// fetches, the targets of the benchmark issue, and an SVG chart of commit
// throughput against concurrency.
//
// It reads the Go benchmark format: configuration lines ("key: value") and
// result lines whose names carry key=value parts, sys=NAME among them:
//
//	BenchmarkCommit/sys=pebble/writers=64/parts=1-2   100   12345 ns/op   81000 commits/s
//
// Lifecycle:
//
//	res, err := report.Parse(f)
//	err = report.WriteMarkdown(out, res, report.Meta{Command: "bench/run.sh --full", ...})
//	err = report.WriteChart(svg, res)
package report
