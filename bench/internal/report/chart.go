package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	panelWidth  = 420.0
	panelHeight = 300.0
	marginLeft  = 70.0
	marginTop   = 84.0
	panelGap    = 90.0
	legendRow   = 22.0
)

// palette gives each system a colour, in colourOrder; other systems take
// the colours after them, then reuse the last one.
var palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#7f7f7f", "#17becf", "#bcbd22", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#aec7e8", "#98df8a", "#ffbb78", "#ff9896"}

// colourOrder is the known systems in the order of their colours: a
// system added later takes the next colour, so no other's changes.
var colourOrder = []string{"offsetd", "pebble", "bbolt", "floor-group", "floor-prealloc", "floor-sync", "memory", httpSystem, kafkaSystem, clusterSystem, kafkaFloorSystem, clusterFloorSystem, serveClusterSystem, serveSystem}

// WriteChart writes an SVG chart of commit throughput (median commits/s)
// against concurrent committers, one panel per commit size and one line per
// system, both axes logarithmic.
func WriteChart(w io.Writer, res *Results) error {
	panels := commitPanels(res)
	// Only systems that committed get a line (and a legend entry).
	var systems []string
	for _, sys := range res.Systems() {
		if slices.ContainsFunc(res.Benchmarks, func(b *Benchmark) bool { return b.Family == "Commit" && b.System() == sys }) {
			systems = append(systems, sys)
		}
	}
	n := float64(max(1, len(panels)))
	width := marginLeft + n*panelWidth + (n-1)*panelGap + 30
	legendTop := marginTop + panelHeight + 60
	height := legendTop + legendRow*math.Ceil(float64(len(systems))/3) + 20

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif" font-size="12">`+"\n",
		num(width), num(height), num(width), num(height))
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%s" y="24" font-size="16" font-weight="bold">Durable commits per second against concurrent committers</text>`+"\n", num(marginLeft))
	fmt.Fprintf(&b, `<text x="%s" y="42" fill="#555">median of each run; both axes logarithmic; floors dashed</text>`+"\n", num(marginLeft))
	if len(panels) == 0 {
		fmt.Fprintf(&b, `<text x="%s" y="%s">no commit benchmarks in this run</text>`+"\n", num(marginLeft), num(marginTop+20))
	}

	lo, hi := rateRange(res)
	colour := colours(systems)
	for i, p := range panels {
		x0 := marginLeft + float64(i)*(panelWidth+panelGap)
		p.draw(&b, res, systems, colour, x0, lo, hi)
	}

	for i, sys := range systems {
		x := marginLeft + float64(i%3)*200
		y := legendTop + float64(i/3)*legendRow
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2.5"%s/>`+"\n",
			num(x), num(y-4), num(x+28), num(y-4), colour[sys], dash(sys))
		fmt.Fprintf(&b, `<text x="%s" y="%s">%s</text>`+"\n", num(x+36), num(y), html.EscapeString(sys))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// panel is one commit size: its title and the writer counts it has.
type panel struct {
	parts   string
	writers []int
}

// commitPanels returns a panel per distinct parts= value of the Commit
// benchmarks, in order of appearance.
func commitPanels(res *Results) []panel {
	var out []panel
	for _, b := range res.Benchmarks {
		if b.Family != "Commit" {
			continue
		}
		parts := b.Param("parts")
		writers, err := strconv.Atoi(b.Param("writers"))
		if err != nil || writers < 1 {
			continue
		}
		i := slices.IndexFunc(out, func(p panel) bool { return p.parts == parts })
		if i < 0 {
			out = append(out, panel{parts: parts})
			i = len(out) - 1
		}
		if !slices.Contains(out[i].writers, writers) {
			out[i].writers = append(out[i].writers, writers)
		}
	}
	for i := range out {
		slices.Sort(out[i].writers)
	}
	return out
}

// rateRange returns the decades that hold every median commits/s.
func rateRange(res *Results) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, b := range res.Benchmarks {
		if b.Family != "Commit" {
			continue
		}
		if v, ok := b.Median("commits/s"); ok && v > 0 {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		return 1, 10
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi
}

func (p panel) draw(b *strings.Builder, res *Results, systems []string, colour map[string]string, x0, lo, hi float64) {
	y0 := marginTop
	title := p.parts + " partitions per commit"
	if p.parts == "1" {
		title = "1 partition per commit"
	}
	fmt.Fprintf(b, `<text x="%s" y="%s" font-weight="bold" text-anchor="middle">%s</text>`+"\n",
		num(x0+panelWidth/2), num(y0-8), html.EscapeString(title))
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#333"/>`+"\n",
		num(x0), num(y0), num(panelWidth), num(panelHeight))

	ypos := func(v float64) float64 {
		return y0 + panelHeight*(1-(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))
	}
	first, last := float64(p.writers[0]), float64(p.writers[len(p.writers)-1])
	xpos := func(writers int) float64 {
		if first == last {
			return x0 + panelWidth/2
		}
		const pad = 24.0
		return x0 + pad + (panelWidth-2*pad)*(math.Log2(float64(writers))-math.Log2(first))/(math.Log2(last)-math.Log2(first))
	}

	// Decade grid lines with their labels, and one tick per writer count.
	for v := lo; v <= hi*1.0001; v *= 10 {
		y := ypos(v)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", num(x0), num(y), num(x0+panelWidth), num(y))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" fill="#333">%s</text>`+"\n", num(x0-6), num(y+4), decade(v))
	}
	for _, wr := range p.writers {
		x := xpos(wr)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", num(x), num(y0), num(x), num(y0+panelHeight))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" fill="#333">%d</text>`+"\n", num(x), num(y0+panelHeight+16), wr)
	}
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">concurrent committers</text>`+"\n",
		num(x0+panelWidth/2), num(y0+panelHeight+36))
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" transform="rotate(-90 %s %s)">commits/s</text>`+"\n",
		num(x0-52), num(y0+panelHeight/2), num(x0-52), num(y0+panelHeight/2))

	for _, sys := range systems {
		var points []string
		var dots strings.Builder
		for _, wr := range p.writers {
			c := fmt.Sprintf("Commit/writers=%d/parts=%s", wr, p.parts)
			v, ok := res.Median(c, sys, "commits/s")
			if !ok || v <= 0 {
				continue
			}
			x, y := num(xpos(wr)), num(ypos(v))
			points = append(points, x+","+y)
			fmt.Fprintf(&dots, `<circle cx="%s" cy="%s" r="3.5" fill="%s"><title>%s, %d committers: %s commits/s</title></circle>`+"\n",
				x, y, colour[sys], html.EscapeString(sys), wr, formatRate(v))
		}
		if len(points) == 0 {
			continue
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>`+"\n",
			strings.Join(points, " "), colour[sys], dash(sys))
		b.WriteString(dots.String())
	}
}

// colours gives each system of a run its colour: the known systems keep
// theirs whichever others ran, the rest take the remaining ones in turn.
func colours(systems []string) map[string]string {
	out := make(map[string]string)
	extra := len(colourOrder)
	for _, sys := range systems {
		if i := slices.Index(colourOrder, sys); i >= 0 {
			out[sys] = palette[i]
			continue
		}
		out[sys] = palette[min(extra, len(palette)-1)]
		extra++
	}
	return out
}

// dash draws the floors with dashed lines: they are bounds, not rivals.
func dash(sys string) string {
	if strings.HasPrefix(sys, "floor") || sys == "memory" || sys == kafkaFloorSystem {
		return ` stroke-dasharray="6 4"`
	}
	return ""
}

// decade labels a power of ten: 100, 1k, 10k, 100k, 1M.
func decade(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// num formats a coordinate with at most one decimal.
func num(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }
