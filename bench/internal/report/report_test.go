package report

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; if the change is meant, run go test -update and review the diff.\ngot:\n%s", name, got)
	}
}

func parseFile(t *testing.T, name string) *Results {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestGolden(t *testing.T) {
	res := parseFile(t, "run.txt")
	var md, svg bytes.Buffer
	meta := Meta{
		Date:      "2026-01-02 03:04 UTC",
		Command:   "bench/run.sh --full",
		Raw:       "results/full.txt",
		Chart:     "commit-throughput.svg",
		Benchstat: "goos: linux\n(benchstat output)\n",
	}
	if err := WriteMarkdown(&md, res, meta); err != nil {
		t.Fatal(err)
	}
	if err := WriteChart(&svg, res); err != nil {
		t.Fatal(err)
	}
	golden(t, "RESULTS.md.golden", md.Bytes())
	golden(t, "commit-throughput.svg.golden", svg.Bytes())
}

func TestParse(t *testing.T) {
	in := strings.Join([]string{
		"keyspace: small",
		"cpu: AMD EPYC 7B13 64-Core Processor",
		"BenchmarkCommit/sys=pebble/writers=64/parts=1-2   100   2000 ns/op   500000 commits/s   12 allocs/op",
		"BenchmarkCommit/sys=pebble/writers=64/parts=1-2   100   1000 ns/op   1000000 commits/s   12 allocs/op",
		"BenchmarkCommit/sys=pebble/writers=64/parts=1-2   100   4000 ns/op   250000 commits/s   12 allocs/op",
		"BenchmarkCommit/sys=offsetd/writers=64/parts=1    100    500 ns/op   2000000 commits/s",
		"--- FAIL: BenchmarkCommit/sys=bbolt/writers=64/parts=1",
		"    commit_test.go:80: commit 3: disk full",
		"BenchmarkFetch/sys=memory/readers=1-16   --- SKIP",
		"PASS",
		"ok  \tgithub.com/offsetd/offsetd/bench\t12.3s",
	}, "\n")
	res, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Config["cpu"]; got != "AMD EPYC 7B13 64-Core Processor" {
		t.Errorf("cpu = %q", got)
	}
	if len(res.Benchmarks) != 2 {
		t.Fatalf("%d benchmarks, want 2", len(res.Benchmarks))
	}
	b := res.Lookup("Commit/writers=64/parts=1", "pebble")
	if b == nil || b.Name != "Commit/sys=pebble/writers=64/parts=1" || b.Runs() != 3 {
		t.Fatalf("pebble's benchmark: %+v", b)
	}
	if m, _ := b.Median("ns/op"); m != 2000 {
		t.Errorf("median ns/op = %v, want 2000", m)
	}
	if got := res.Systems(); strings.Join(got, ",") != "offsetd,pebble" {
		t.Errorf("systems = %v", got)
	}
	rows := Table(res)
	if len(rows) == 0 || rows[0].Metric != "commits/s" || rows[0].Ratios[0] != 4 {
		t.Errorf("first row = %+v, want commits/s with offsetd ÷ pebble = 4", rows[0])
	}

	if _, err := Parse(strings.NewReader("BenchmarkX-2  10  12x ns/op\n")); err == nil {
		t.Error("a result line with a bad value parsed")
	}
}

func TestMedianOfEvenCount(t *testing.T) {
	b := &Benchmark{Samples: map[string][]float64{"ns/op": {4, 1, 3, 2}}}
	if m, ok := b.Median("ns/op"); !ok || m != 2.5 {
		t.Errorf("median = %v %v, want 2.5", m, ok)
	}
	if _, ok := b.Median("B/op"); ok {
		t.Error("median of a unit with no samples")
	}
}

func TestFormats(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{formatRate(59123), "59.1k"},
		{formatRate(1234567), "1.23M"},
		{formatRate(812), "812"},
		{formatNanos(142), "142 ns"},
		{formatNanos(4100), "4.10 µs"},
		{formatNanos(361_000), "361 µs"},
		{formatNanos(7.2e9), "7.20 s"},
		{formatBytes(412), "412 B"},
		{formatBytes(3 << 20), "3.00 MiB"},
		{formatRatio(2.049), "2.05×"},
		{formatRatio(0.00412), "0.00412×"},
		{formatRatio(math.NaN()), "—"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestEveryKnownSystemHasItsColour(t *testing.T) {
	for _, sys := range systemOrder {
		if !slices.Contains(colourOrder, sys) {
			t.Errorf("%s has a column but no colour of its own", sys)
		}
	}
	if len(colourOrder) > len(palette) {
		t.Errorf("%d known systems, %d colours", len(colourOrder), len(palette))
	}
}

func TestPolls(t *testing.T) {
	in := strings.Join([]string{
		"BenchmarkPolledFetch/sys=offsetd-http/answer=not-modified-2   10   300 ns/op   4000 req/s   7 allocs/op",
		"BenchmarkPolledFetch/sys=offsetd-http/answer=other-2          10   900 ns/op   1000 req/s",
		"BenchmarkPolledFetch/sys=offsetd-http/answer=encoded-2        10   500 ns/op   2000 req/s   9 allocs/op",
		"BenchmarkPolledFetch/sys=offsetd-http/answer=cached-2         10   400 ns/op   3000 req/s   8 allocs/op",
	}, "\n")
	res, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	polls := Polls(res)
	var got []string
	for _, p := range polls {
		got = append(got, fmt.Sprintf("%s %.1f", p.Answer, p.VsEncoded))
	}
	if want := "cached 1.5,encoded 1.0,not-modified 2.0,other 0.5"; strings.Join(got, ",") != want {
		t.Errorf("polls = %v, want %s", got, want)
	}
	if !math.IsNaN(polls[3].BytesPerReq) || polls[3].Label != "other" {
		t.Errorf("an answer without B/op or a label: %+v", polls[3])
	}
	if rates := HTTPRates(res); len(rates) != 0 {
		t.Errorf("rates from a run without commits or fetches: %+v", rates)
	}
}
