package report

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// systemOrder is the order of the known systems' columns.
var systemOrder = []string{"offsetd", "offsetd-http", "offsetd-kafka", "kafka-floor", "offsetd-raft3", "offsetd-serve3", "offsetd-serve1", "floor-raft3", "pebble", "bbolt", "floor-group", "floor-prealloc", "floor-sync", "memory"}

// httpSystem is offsetd behind its HTTP server, driven by its Go client on
// loopback.
const httpSystem = "offsetd-http"

// kafkaSystem is offsetd behind its Kafka listener, driven by franz-go
// clients (kadm) on loopback.
const kafkaSystem = "offsetd-kafka"

// kafkaFloorSystem is the bare Kafka-protocol server (kmsg) under
// offsetd-kafka's commits, answering OffsetCommit without storing it.
const kafkaFloorSystem = "kafka-floor"

// clusterSystem is offsetd on three nodes of a cluster in one process
// (BenchmarkClusterCommit), run beside offsetd on one node.
const clusterSystem = "offsetd-raft3"

// serveClusterSystem is offsetd-raft3 as an operator runs it: three
// offsetd serve processes of a cluster on loopback, driven through the Go
// client (BenchmarkClusterCommit).
const serveClusterSystem = "offsetd-serve3"

// serveSystem is one offsetd serve process, driven as serveClusterSystem
// is, in the same run: the cluster's processes against one.
const serveSystem = "offsetd-serve1"

// clusterFloorSystem is the replication floor under offsetd-raft3: every
// commit appended and fdatasynced to three files of the same disk at once,
// acknowledged once the first and one other have it.
const clusterFloorSystem = "floor-raft3"

// httpFloorSystem is the bare net/http handler under offsetd-http's point
// fetch (BenchmarkHTTPFloor).
const httpFloorSystem = "net-http"

// subject is the system whose ratios to the others the table shows.
const subject = "offsetd"

// ratioColumns are the ratios the table shows: offsetd's median over
// Pebble's, bbolt's and the floor's, and offsetd-http's, offsetd-kafka's
// and offsetd-raft3's over offsetd's (what the HTTP and Kafka paths and a
// 3-node cluster keep of the embedded figure), and offsetd-serve3's over
// offsetd-serve1's (what three server processes keep of one). "floor" is
// the floor that
// does what the row measures: the batch floor (append + fdatasync per batch
// of everything waiting) for commits, the Go map for reads.
var ratioColumns = []struct {
	title string
	// of and over return the systems whose medians are divided, in a
	// family.
	of, over func(family string) string
}{
	{"offsetd ÷ pebble", always(subject), always("pebble")},
	{"offsetd ÷ bbolt", always(subject), always("bbolt")},
	{"offsetd ÷ floor", always(subject), floorFor},
	{"offsetd-http ÷ offsetd", always(httpSystem), always(subject)},
	{"offsetd-kafka ÷ offsetd", always(kafkaSystem), always(subject)},
	{"offsetd-raft3 ÷ offsetd", always(clusterSystem), always(subject)},
	{"offsetd-raft3 ÷ floor-raft3", always(clusterSystem), always(clusterFloorSystem)},
	{"offsetd-serve3 ÷ offsetd-serve1", always(serveClusterSystem), always(serveSystem)},
}

// always returns a ratio column's system that is the same in every family.
func always(sys string) func(string) string { return func(string) string { return sys } }

// floorFor returns the floor offsetd is compared with in a family.
func floorFor(family string) string {
	switch family {
	case "Commit":
		return "floor-group"
	case "Fetch", "FetchGroup":
		return "memory"
	}
	return ""
}

// metric is one measure a table row shows.
type metric struct {
	family string
	unit   string
	label  string
	higher bool // higher is better
	format func(float64) string
}

// metrics are the rows of the table, per family, in order: all cases of a
// metric, then the next metric.
var metrics = []metric{
	{"Commit", "commits/s", "commits/s", true, formatRate},
	{"Commit", "p50-ns", "p50 latency", false, formatNanos},
	{"Commit", "p99-ns", "p99 latency", false, formatNanos},
	{"Commit", "cpu-ns", "CPU per commit", false, formatNanos},
	{"Commit", "server-cpu-ns", "server CPU per commit", false, formatNanos},
	{"Commit", "client-cpu-ns", "client CPU per commit", false, formatNanos},
	{"Commit", "commits/fsync", "commits per fsync", true, formatShare},
	{"Commit", "fsync-ns", "append + fsync", false, formatNanos},
	{"Commit", "gap-ns", "log idle between fsyncs", false, formatNanos},
	{"ClusterCommit", "commits/s", "commits/s", true, formatRate},
	{"ClusterCommit", "p50-ns", "p50 latency", false, formatNanos},
	{"ClusterCommit", "p99-ns", "p99 latency", false, formatNanos},
	{"ClusterCommit", "cpu-ns", "CPU per commit", false, formatNanos},
	{"ClusterCommit", "server-cpu-ns", "server CPU per commit", false, formatNanos},
	{"ClusterCommit", "client-cpu-ns", "client CPU per commit", false, formatNanos},
	{"ClusterCommit", "commits/fsync", "commits per fsync", true, formatShare},
	{"Fetch", "ns/op", "time/fetch", false, formatNanos},
	{"Fetch", "allocs/op", "allocs/fetch", false, formatCount},
	{"FetchGroup", "ns/op", "time/group", false, formatNanos},
	{"FetchGroup", "allocs/op", "allocs/group", false, formatCount},
	{"Restart", "ns/op", "open → first fetch", false, formatNanos},
	{"Restart", "heap-B/key", "heap B/key", false, formatBytes},
	{"Restart", "disk-B/key", "disk B/key", false, formatBytes},
}

// Row is one line of the medians table: one metric of one case, for every
// system.
type Row struct {
	Case   string
	Metric string
	// Higher says that a higher value is better.
	Higher bool
	// Values holds the median of each system that ran the case.
	Values map[string]float64
	// Ratios holds each ratio column's ratio of medians, where both exist
	// and the divisor is not zero.
	Ratios []float64
	format func(float64) string
}

// Table returns the rows of the medians table.
func Table(res *Results) []Row {
	var rows []Row
	for _, m := range metrics {
		for _, c := range cases(res, m.family) {
			row := Row{Case: c, Metric: m.label, Higher: m.higher, Values: make(map[string]float64), format: m.format}
			for _, sys := range res.Systems() {
				if v, ok := res.Median(c, sys, m.unit); ok {
					row.Values[sys] = v
				}
			}
			if len(row.Values) == 0 {
				continue
			}
			family := strings.SplitN(c, "/", 2)[0]
			for _, col := range ratioColumns {
				row.Ratios = append(row.Ratios, ratio(row.Values, col.of(family), col.over(family)))
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// cases returns the distinct cases of a family, in order of appearance.
func cases(res *Results, family string) []string {
	var out []string
	seen := make(map[string]bool)
	for _, b := range res.Benchmarks {
		if c := b.Case(); b.Family == family && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// ratio returns values[a] / values[b], or NaN when either is missing or b is
// zero.
func ratio(values map[string]float64, a, b string) float64 {
	va, okA := values[a]
	vb, okB := values[b]
	if !okA || !okB || vb == 0 {
		return math.NaN()
	}
	return va / vb
}

// WriteTable writes the medians table as Markdown.
func WriteTable(w io.Writer, res *Results) error {
	rows := Table(res)
	// A system only measured outside the table's families (net-http, the
	// floor of BenchmarkHTTPFloor) gets no column.
	var systems []string
	for _, s := range res.Systems() {
		for _, row := range rows {
			if _, ok := row.Values[s]; ok {
				systems = append(systems, s)
				break
			}
		}
	}
	var b strings.Builder
	b.WriteString("| benchmark | metric |")
	for _, s := range systems {
		fmt.Fprintf(&b, " %s |", s)
	}
	for _, col := range ratioColumns {
		fmt.Fprintf(&b, " %s |", col.title)
	}
	b.WriteString("\n|---|---|")
	for range len(systems) + len(ratioColumns) {
		b.WriteString("--:|")
	}
	b.WriteString("\n")
	for _, row := range rows {
		arrow := "↓"
		if row.Higher {
			arrow = "↑"
		}
		fmt.Fprintf(&b, "| %s | %s %s |", strings.ReplaceAll(row.Case, "/", " "), row.Metric, arrow)
		for _, s := range systems {
			if v, ok := row.Values[s]; ok {
				fmt.Fprintf(&b, " %s |", row.format(v))
			} else {
				b.WriteString(" — |")
			}
		}
		for _, r := range row.Ratios {
			fmt.Fprintf(&b, " %s |", formatRatio(r))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatRate formats an events-per-second rate with three significant
// digits and a k or M suffix.
func formatRate(v float64) string {
	switch {
	case v >= 1e6:
		return sig3(v/1e6) + "M"
	case v >= 1e3:
		return sig3(v/1e3) + "k"
	}
	return sig3(v)
}

// formatNanos formats a duration given in nanoseconds.
func formatNanos(ns float64) string {
	switch {
	case ns >= 1e9:
		return sig3(ns/1e9) + " s"
	case ns >= 1e6:
		return sig3(ns/1e6) + " ms"
	case ns >= 1e3:
		return sig3(ns/1e3) + " µs"
	}
	return sig3(ns) + " ns"
}

// formatBytes formats a byte count.
func formatBytes(v float64) string {
	switch {
	case v >= 1<<30:
		return sig3(v/(1<<30)) + " GiB"
	case v >= 1<<20:
		return sig3(v/(1<<20)) + " MiB"
	case v >= 1<<10:
		return sig3(v/(1<<10)) + " KiB"
	}
	return fmt.Sprintf("%.0f B", v)
}

// formatCount formats a count, such as allocations per operation.
func formatCount(v float64) string {
	if v >= 1e4 {
		return formatRate(v)
	}
	return fmt.Sprintf("%.0f", v)
}

// formatShare formats a mean count, such as commits per fsync.
func formatShare(v float64) string {
	if v >= 1e4 {
		return formatRate(v)
	}
	return sig3(v)
}

// formatRatio formats a ratio, or a dash for NaN.
func formatRatio(r float64) string {
	if math.IsNaN(r) {
		return "—"
	}
	return sig3(r) + "×"
}

// sig3 formats v with about three significant digits, never in exponent
// form.
func sig3(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	}
	// Below 1: keep three significant digits.
	digits := int(math.Ceil(-math.Log10(a))) + 2
	return fmt.Sprintf("%.*f", digits, v)
}
