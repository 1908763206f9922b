package report

import (
	"fmt"
	"io"
	"strings"
)

// Target is one goal set for offsetd's figures, checked against a run.
type Target struct {
	// Goal says what offsetd should reach.
	Goal string
	// Measured is what the run measured, or "not measured".
	Measured string
	// Status is "met", "missed" or "n/a".
	Status string
}

// Targets checks the run against the goals of the shared commit journal
// (commits) and of the compact state and HTTP path (reads, restart,
// HTTP). They are set for the full run (1.28M keys); a quick run only
// hints at them.
func Targets(res *Results) []Target {
	const (
		commit1   = "Commit/writers=1/parts=1"
		commit64  = "Commit/writers=64/parts=1"
		commit256 = "Commit/writers=256/parts=1"
		fetch     = "Fetch/readers=1"
		// httpFloor is BenchmarkHTTPFloor's case beside fetch.
		httpFloor = "HTTPFloor/readers=1"
	)
	// The restart of the large key space, written over as the other
	// systems' is; not the 10M-key case, which only offsetd runs.
	restart := ""
	for _, c := range cases(res, "Restart") {
		if !strings.Contains(c, "keys=") {
			restart = c
		}
	}
	med := func(c, sys, unit string) (float64, bool) { return res.Median(c, sys, unit) }
	var out []Target

	// check adds a target: ok says whether the run measured it.
	check := func(goal string, ok bool, measured string, met bool) {
		t := Target{Goal: goal, Measured: "not measured", Status: "n/a"}
		if ok {
			t.Measured = measured
			t.Status = map[bool]string{true: "met", false: "missed"}[met]
		}
		out = append(out, t)
	}
	// against checks offsetd's figure on case c against another system's.
	against := func(goal, c, other, unit string, bound float64, atLeast bool) {
		o, ok1 := med(c, subject, unit)
		f, ok2 := med(c, other, unit)
		r := o / f
		met := r <= bound
		if atLeast {
			met = r >= bound
		}
		check(goal, ok1 && ok2 && f > 0, fmt.Sprintf("%s× (%s vs %s)", sig3(r), format(unit, o), format(unit, f)), met)
	}

	against("64 committers in 64 groups ≥ 1× Pebble", commit64, "pebble", "commits/s", 1, true)
	against("64 committers in 64 groups ≥ 0.9× the batch floor (floor-group)", commit64, "floor-group", "commits/s", 0.9, true)
	against("256 committers ≥ 0.8× the batch floor (floor-group)", commit256, "floor-group", "commits/s", 0.8, true)
	// Latency is the median a committer waits: the mean (ns/op) of a
	// single committer is dragged up by the disk's rare slow syncs.
	against("one committer's p50 within 1.1× of one append + fdatasync (floor-sync)", commit1, "floor-sync", "p50-ns", 1.1, false)

	against("point fetch at or below a bare Go map of the same keys (memory)", fetch, "memory", "ns/op", 1, false)
	a, ok := med(fetch, subject, "allocs/op")
	check("point fetch allocates nothing", ok, formatCount(a)+" allocs/op", a == 0)

	// The HTTP path: a round trip against the bare net/http floor
	// measured in the same run, commits against embedded ones.
	o, ok1 := med(fetch, httpSystem, "ns/op")
	f, ok2 := med(httpFloor, httpFloorSystem, "ns/op")
	r := o / f
	check("HTTP point-fetch round trip ≤ 1.5× a bare net/http handler answering the same bytes", ok1 && ok2 && f > 0,
		fmt.Sprintf("%s× (%s vs %s)", sig3(r), formatNanos(o), formatNanos(f)), r <= 1.5)
	o, ok1 = med(commit64, httpSystem, "commits/s")
	e, ok2 := med(commit64, subject, "commits/s")
	r = o / e
	check("HTTP commits at 64 clients ≥ 0.5× the embedded rate", ok1 && ok2 && e > 0,
		fmt.Sprintf("%s× (%s vs %s commits/s)", sig3(r), formatRate(o), formatRate(e)), r >= 0.5)

	// The Kafka path (issue #31): offsetd's server process against the
	// bare kmsg floor's, in the same run, and the embedded engine's CPU.
	o, ok1 = med(commit64, kafkaSystem, "server-cpu-ns")
	f, ok2 = med(commit64, kafkaFloorSystem, "server-cpu-ns")
	e, ok3 := med(commit64, subject, "cpu-ns")
	check("Kafka server CPU per commit at 64 committers ≤ the kmsg floor's + 2× embedded offsetd's", ok1 && ok2 && ok3,
		fmt.Sprintf("%s vs %s + 2 × %s = %s", formatNanos(o), formatNanos(f), formatNanos(e), formatNanos(f+2*e)), o <= f+2*e)
	o, ok1 = med(commit64, kafkaSystem, "commits/s")
	f, ok2 = med(commit64, kafkaFloorSystem, "commits/s")
	r = o / f
	check("Kafka commits/s at 64 committers ≥ 0.8× the kmsg floor's", ok1 && ok2 && f > 0,
		fmt.Sprintf("%s× (%s vs %s commits/s)", sig3(r), formatRate(o), formatRate(f)), r >= 0.8)

	// The cluster (issue #30): three nodes in one process against one
	// node, in the same run (BenchmarkClusterCommit), and the replication
	// floor: three files of the same disk synced at once.
	const (
		cluster1  = "ClusterCommit/writers=1/parts=1"
		cluster64 = "ClusterCommit/writers=64/parts=1"
	)
	o, ok1 = med(cluster64, clusterSystem, "commits/s")
	e, ok2 = med(cluster64, subject, "commits/s")
	floor := "not measured"
	if f, ok := med(cluster64, clusterFloorSystem, "commits/s"); ok {
		floor = formatRate(f) + " commits/s"
	}
	r = o / e
	check("3 nodes ≥ 0.30× one node's commits/s at 64 committers", ok1 && ok2 && e > 0,
		fmt.Sprintf("%s× (%s vs %s commits/s; the replication floor %s)", sig3(r), formatRate(o), formatRate(e), floor), r >= 0.3)
	o, ok1 = med(cluster1, clusterSystem, "p50-ns")
	e, ok2 = med(cluster1, subject, "p50-ns")
	floor = "not measured"
	if f, ok := med(cluster1, clusterFloorSystem, "p50-ns"); ok {
		floor = formatNanos(f)
	}
	r = o / e
	check("3 nodes' p50 at 1 committer ≤ 2× one node's", ok1 && ok2 && e > 0,
		fmt.Sprintf("%s× (%s vs %s; the replication floor %s)", sig3(r), formatNanos(o), formatNanos(e), floor), r <= 2)
	o, ok1 = med(cluster64, clusterSystem, "cpu-ns")
	e, ok2 = med(cluster64, subject, "cpu-ns")
	r = o / e
	check("3 nodes' CPU per commit (all three) ≤ 4× one node's at 64 committers", ok1 && ok2 && e > 0,
		fmt.Sprintf("%s× (%s vs %s)", sig3(r), formatNanos(o), formatNanos(e)), r <= 4)

	o, ok1 = med(restart, subject, "ns/op")
	check("restart of the 1.28M live keys (open → first correct fetch) ≤ 0.3 s", ok1, formatNanos(o), o <= 0.3e9)
	h, ok1 := med(restart, subject, "heap-B/key")
	check("heap after restart ≤ 80 B per live key", ok1, formatBytes(h)+"/key", h <= 80)
	against("data directory ≤ 2× Pebble's bytes per live key", restart, "pebble", "disk-B/key", 2, false)
	return out
}

// format formats a median of unit as the report's tables do.
func format(unit string, v float64) string {
	switch unit {
	case "commits/s":
		return formatRate(v) + " commits/s"
	case "ns/op", "p50-ns":
		return formatNanos(v)
	case "disk-B/key", "heap-B/key":
		return formatBytes(v)
	}
	return sig3(v)
}

// WriteTargets writes the targets as a Markdown table.
func WriteTargets(w io.Writer, res *Results) error {
	var b strings.Builder
	b.WriteString("| target | measured | |\n|---|---|---|\n")
	for _, t := range Targets(res) {
		mark := map[string]string{"met": "✅ met", "missed": "❌ missed", "n/a": "n/a"}[t.Status]
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.Goal, t.Measured, mark)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
