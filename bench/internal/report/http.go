package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// pollFamily is the benchmark of a poller re-reading a group that has not
// changed, over HTTP.
const pollFamily = "PolledFetch"

// httpClients are the client counts the HTTP rates table shows.
var httpClients = []string{"1", "64"}

// httpRates are the families of the HTTP rates table, the name part that
// counts their clients, and the rate each reports.
var httpRates = []struct {
	family, clients, unit, label string
}{
	{"Commit", "writers", "commits/s", "commits/s"},
	{"Fetch", "readers", "fetches/s", "fetches/s"},
	{"FetchGroup", "readers", "fetches/s", "groups/s"},
}

// pollAnswers describe the answers of the polled-fetch benchmark, in the
// order the table shows them.
var pollAnswers = []struct{ answer, label string }{
	{"cached", "200 from the response cache"},
	{"encoded", "200 encoded afresh (cache off)"},
	{"not-modified", "304 Not Modified (If-None-Match)"},
}

// HTTPRate is one row of the HTTP rates table: a case at one client count,
// through the HTTP path, the Kafka path and embedded.
type HTTPRate struct {
	Case  string
	Label string
	// HTTP, Kafka and Embedded are offsetd-http's, offsetd-kafka's and
	// offsetd's medians; NaN when the run lacks one.
	HTTP, Kafka, Embedded float64
}

// HTTPRates returns the rows of the HTTP rates table: every case
// offsetd-http or offsetd-kafka ran at 1 or 64 clients, commits then
// fetches then group fetches.
func HTTPRates(res *Results) []HTTPRate {
	var out []HTTPRate
	for _, r := range httpRates {
		for _, c := range cases(res, r.family) {
			b := res.Lookup(c, httpSystem)
			if b == nil {
				b = res.Lookup(c, kafkaSystem)
			}
			if b == nil || !slices.Contains(httpClients, b.Param(r.clients)) {
				continue
			}
			row := HTTPRate{Case: c, Label: r.label, HTTP: math.NaN(), Kafka: math.NaN(), Embedded: math.NaN()}
			if v, ok := res.Median(c, httpSystem, r.unit); ok {
				row.HTTP = v
			}
			if v, ok := res.Median(c, kafkaSystem, r.unit); ok {
				row.Kafka = v
			}
			if v, ok := res.Median(c, subject, r.unit); ok {
				row.Embedded = v
			}
			out = append(out, row)
		}
	}
	return out
}

// Poll is one row of the polled-fetch table.
type Poll struct {
	// Answer is the benchmark's answer= part; Label says what it is.
	Answer, Label string
	// ReqPerSec, NsPerReq, AllocsPerReq and BytesPerReq are medians; NaN
	// when the run lacks one.
	ReqPerSec, NsPerReq, AllocsPerReq, BytesPerReq float64
	// VsEncoded is ReqPerSec over the encoded answer's; NaN without it.
	VsEncoded float64
}

// Polls returns the rows of the polled-fetch table, the known answers
// first.
func Polls(res *Results) []Poll {
	var bs []*Benchmark
	for _, b := range res.Benchmarks {
		if b.Family == pollFamily && b.System() == httpSystem {
			bs = append(bs, b)
		}
	}
	rank := func(b *Benchmark) int {
		i := slices.IndexFunc(pollAnswers, func(a struct{ answer, label string }) bool { return a.answer == b.Param("answer") })
		if i < 0 {
			return len(pollAnswers)
		}
		return i
	}
	slices.SortStableFunc(bs, func(a, b *Benchmark) int { return rank(a) - rank(b) })
	median := func(b *Benchmark, unit string) float64 {
		if v, ok := b.Median(unit); ok {
			return v
		}
		return math.NaN()
	}
	encoded := math.NaN()
	for _, b := range bs {
		if b.Param("answer") == "encoded" {
			encoded = median(b, "req/s")
		}
	}
	var out []Poll
	for _, b := range bs {
		p := Poll{
			Answer:       b.Param("answer"),
			Label:        b.Param("answer"),
			ReqPerSec:    median(b, "req/s"),
			NsPerReq:     median(b, "ns/op"),
			AllocsPerReq: median(b, "allocs/op"),
			BytesPerReq:  median(b, "B/op"),
		}
		if i := rank(b); i < len(pollAnswers) {
			p.Label = pollAnswers[i].label
		}
		p.VsEncoded = quotient(p.ReqPerSec, encoded)
		out = append(out, p)
	}
	return out
}

// WriteHTTP writes the HTTP path's tables as Markdown: offsetd-http's rates
// beside offsetd's at 1 and 64 clients, and the polled fetch. It writes
// nothing when the run has neither.
func WriteHTTP(w io.Writer, res *Results) error {
	var b strings.Builder
	if rates := HTTPRates(res); len(rates) > 0 {
		b.WriteString("| benchmark | rate | offsetd-http | offsetd-kafka | offsetd | offsetd-http ÷ offsetd | offsetd-kafka ÷ offsetd |\n|---|---|--:|--:|--:|--:|--:|\n")
		for _, r := range rates {
			fmt.Fprintf(&b, "| %s | %s ↑ | %s | %s | %s | %s | %s |\n", strings.ReplaceAll(r.Case, "/", " "), r.Label,
				orDash(r.HTTP, formatRate), orDash(r.Kafka, formatRate), orDash(r.Embedded, formatRate),
				formatRatio(quotient(r.HTTP, r.Embedded)), formatRatio(quotient(r.Kafka, r.Embedded)))
		}
	}
	if polls := Polls(res); len(polls) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString("| polled fetch, answered | req/s ↑ | time/req ↓ | allocs/req ↓ | B/req ↓ | req/s ÷ encoded |\n|---|--:|--:|--:|--:|--:|\n")
		for _, p := range polls {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", p.Label, orDash(p.ReqPerSec, formatRate),
				orDash(p.NsPerReq, formatNanos), orDash(p.AllocsPerReq, formatCount), orDash(p.BytesPerReq, formatBytes),
				formatRatio(p.VsEncoded))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// quotient returns a / b, or NaN when b is zero.
func quotient(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// orDash formats v, or a dash for NaN.
func orDash(v float64, format func(float64) string) string {
	if math.IsNaN(v) {
		return "—"
	}
	return format(v)
}
