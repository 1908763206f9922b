package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Target is one goal of the benchmark issue (#5), checked against a run.
type Target struct {
	// Goal says what offsetd should reach.
	Goal string
	// Measured is what the run measured, or "not measured".
	Measured string
	// Status is "met", "missed" or "n/a".
	Status string
}

// Targets checks the run against the goals of the benchmark issue. They are
// set for the full run (1.28M keys); a quick run only hints at them.
func Targets(res *Results) []Target {
	const (
		commit64 = "Commit/writers=64/parts=1"
		commit1  = "Commit/writers=1/parts=1"
		fetch    = "Fetch/readers=1"
		// httpFloor is BenchmarkHTTPFloor's case beside fetch.
		httpFloor = "HTTPFloor/readers=1"
	)
	restart := ""
	for _, c := range cases(res, "Restart") {
		restart = c // the one restart case there is
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

	o, ok1 := med(commit64, subject, "commits/s")
	p, ok2 := med(commit64, "pebble", "commits/s")
	r := o / p
	check("commits at 64 concurrent committers ≥ 2× Pebble", ok1 && ok2 && p > 0,
		fmt.Sprintf("%s× (%s vs %s commits/s)", sig3(r), formatRate(o), formatRate(p)), r >= 2)

	f, ok3 := med(commit64, "floor-group", "commits/s")
	r = o / f
	check("commits at 64 concurrent committers ≥ 80% of the batch floor (floor-group)", ok1 && ok3 && f > 0,
		fmt.Sprintf("%.0f%% (%s vs %s commits/s)", 100*r, formatRate(o), formatRate(f)), r >= 0.8)

	// Latency is the median a committer waits: the mean (ns/op) of a
	// single committer is dragged up by the disk's rare slow syncs.
	o, ok1 = med(commit1, subject, "p50-ns")
	f, ok2 = med(commit1, "floor-sync", "p50-ns")
	s, ok3 := med(commit1, "floor-prealloc", "p50-ns")
	r = o / f
	measured := fmt.Sprintf("%s× (p50 %s vs %s for an append + fdatasync", sig3(r), formatNanos(o), formatNanos(f))
	if ok3 {
		measured += fmt.Sprintf("; %s for an overwrite of preallocated space + fdatasync", formatNanos(s))
	}
	check("single-committer commit latency within 1.2× of one fdatasync", ok1 && ok2 && f > 0, measured+")", r <= 1.2)

	o, ok1 = med(fetch, subject, "ns/op")
	check("point fetch ≤ 150 ns", ok1, formatNanos(o), o <= 150)
	p, ok2 = med(fetch, "pebble", "ns/op")
	r = p / o
	check("point fetch ≥ 25× faster than Pebble", ok1 && ok2 && o > 0,
		fmt.Sprintf("%s× (%s vs %s)", sig3(r), formatNanos(o), formatNanos(p)), r >= 25)
	a, ok1 := med(fetch, subject, "allocs/op")
	check("point fetch allocates nothing", ok1, formatCount(a)+" allocs/op", a == 0)

	// The HTTP path (issue #11): a round trip against the bare net/http
	// floor measured in the same run, commits against embedded ones.
	o, ok1 = med(fetch, httpSystem, "ns/op")
	f, ok2 = med(httpFloor, httpFloorSystem, "ns/op")
	r = o / f
	check("HTTP point-fetch round trip ≤ 1.5× a bare net/http handler answering the same bytes", ok1 && ok2 && f > 0,
		fmt.Sprintf("%s× (%s vs %s)", sig3(r), formatNanos(o), formatNanos(f)), r <= 1.5)
	o, ok1 = med(commit64, httpSystem, "commits/s")
	e, ok2 := med(commit64, subject, "commits/s")
	r = o / e
	check("HTTP commits at 64 clients ≥ 0.5× the embedded rate", ok1 && ok2 && e > 0,
		fmt.Sprintf("%s× (%s vs %s commits/s)", sig3(r), formatRate(o), formatRate(e)), r >= 0.5)

	o, ok1 = med(restart, subject, "ns/op")
	p, ok2 = med(restart, "pebble", "ns/op")
	r = o / p
	check("restart (open → first correct fetch) no slower than Pebble, once snapshots exist", ok1 && ok2 && p > 0,
		fmt.Sprintf("%s× (%s vs %s)", sig3(r), formatNanos(o), formatNanos(p)), r <= 1)
	check("stretch: restart within 1/5 of Pebble's", ok1 && ok2 && p > 0, sig3(r)+"×", r <= 0.2)

	h, ok1 := med(restart, subject, "heap-B/key")
	keyBytes, err := strconv.Atoi(res.Config["keybytes"])
	bound := 200 + float64(keyBytes)
	check(fmt.Sprintf("heap after restart ≤ 200 B per live key plus the key strings (%d B here)", keyBytes),
		ok1 && err == nil, fmt.Sprintf("%s/key (bound %s)", formatBytes(h), formatBytes(bound)), h <= bound)
	return out
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
