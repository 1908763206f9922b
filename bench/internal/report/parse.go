package report

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Results holds every benchmark of a run, in the order they first appear,
// with the run's configuration.
type Results struct {
	// Config holds the configuration lines, the last value of each key.
	Config map[string]string
	// Benchmarks lists each distinct benchmark once, in order of first
	// appearance; repeated runs (-count) add samples to it.
	Benchmarks []*Benchmark
	byName     map[string]*Benchmark
}

// Benchmark is one benchmark and every sample the run took of it.
type Benchmark struct {
	// Name is the name without its "Benchmark" prefix and GOMAXPROCS
	// suffix, e.g. "Commit/sys=pebble/writers=64/parts=1".
	Name string
	// Family is the first part of the name, e.g. "Commit".
	Family string
	// Params holds the key=value parts of the name, in order.
	Params []Param
	// Samples holds one value per run for each unit, e.g. "ns/op".
	Samples map[string][]float64
}

// Param is one key=value part of a benchmark name.
type Param struct{ Key, Value string }

// Param returns the value of the name part key, or "".
func (b *Benchmark) Param(key string) string {
	for _, p := range b.Params {
		if p.Key == key {
			return p.Value
		}
	}
	return ""
}

// System returns the benchmark's sys= part: the system it measured.
func (b *Benchmark) System() string { return b.Param("sys") }

// Case returns the name without its sys= part: the benchmarks of one case
// differ only in the system they measured.
func (b *Benchmark) Case() string {
	parts := []string{b.Family}
	for _, p := range b.Params {
		if p.Key != "sys" {
			parts = append(parts, p.Key+"="+p.Value)
		}
	}
	return strings.Join(parts, "/")
}

// Median returns the median of the samples in unit.
func (b *Benchmark) Median(unit string) (float64, bool) {
	s := b.Samples[unit]
	if len(s) == 0 {
		return 0, false
	}
	s = slices.Clone(s)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2, true
	}
	return s[len(s)/2], true
}

// Runs returns how many samples the benchmark has of ns/op: how many times
// it ran.
func (b *Benchmark) Runs() int { return len(b.Samples["ns/op"]) }

var (
	configLine = regexp.MustCompile(`^([a-z][^\s:A-Z]*):\s*(.*)$`)
	procSuffix = regexp.MustCompile(`-\d+$`)
)

// Parse reads go test -bench output. Lines that are neither configuration
// nor results (PASS, ok, logs) are skipped; a result line whose values do
// not parse is an error.
func Parse(r io.Reader) (*Results, error) {
	res := &Results{Config: make(map[string]string), byName: make(map[string]*Benchmark)}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := configLine.FindStringSubmatch(line); m != nil {
			res.Config[m[1]] = strings.TrimSpace(m[2])
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || len(fields)%2 != 0 {
			continue // a log line or "--- FAIL" under a benchmark name
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue
		}
		if err := res.add(fields); err != nil {
			return nil, fmt.Errorf("report: line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return res, nil
}

// add records one result line, split into fields: name, iterations, then
// value and unit pairs.
func (res *Results) add(fields []string) error {
	name := procSuffix.ReplaceAllString(strings.TrimPrefix(fields[0], "Benchmark"), "")
	b := res.byName[name]
	if b == nil {
		b = newBenchmark(name)
		res.byName[name] = b
		res.Benchmarks = append(res.Benchmarks, b)
	}
	for i := 2; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return fmt.Errorf("benchmark %s: value %q: %w", name, fields[i], err)
		}
		unit := fields[i+1]
		b.Samples[unit] = append(b.Samples[unit], v)
	}
	return nil
}

func newBenchmark(name string) *Benchmark {
	b := &Benchmark{Name: name, Samples: make(map[string][]float64)}
	parts := strings.Split(name, "/")
	b.Family = parts[0]
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			k, v = p, ""
		}
		b.Params = append(b.Params, Param{k, v})
	}
	return b
}

// Lookup returns the benchmark of case c (as Benchmark.Case names it) run
// on sys, or nil.
func (res *Results) Lookup(c, sys string) *Benchmark {
	for _, b := range res.Benchmarks {
		if b.System() == sys && b.Case() == c {
			return b
		}
	}
	return nil
}

// Median returns the median in unit of case c run on sys.
func (res *Results) Median(c, sys, unit string) (float64, bool) {
	b := res.Lookup(c, sys)
	if b == nil {
		return 0, false
	}
	return b.Median(unit)
}

// Systems returns the systems in the run: the known ones in the report's
// order, then any others by name.
func (res *Results) Systems() []string {
	seen := make(map[string]bool)
	for _, b := range res.Benchmarks {
		if s := b.System(); s != "" {
			seen[s] = true
		}
	}
	var out []string
	for _, s := range systemOrder {
		if seen[s] {
			out = append(out, s)
			delete(seen, s)
		}
	}
	var rest []string
	for s := range seen {
		rest = append(rest, s)
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// Runs returns the most samples any benchmark has: the run's -count.
func (res *Results) Runs() int {
	n := 0
	for _, b := range res.Benchmarks {
		n = max(n, b.Runs())
	}
	return n
}
