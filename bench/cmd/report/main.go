// Command report turns the raw output of bench/run.sh (go test -bench in
// bench/) into RESULTS.md and an SVG chart of commit throughput, and prints
// the medians table, the HTTP path's tables and the targets.
//
// Usage:
//
//	go run ./cmd/report -in results/full.txt -benchstat results/full-benchstat.txt \
//		-out RESULTS.md -chart commit-throughput.svg -command "bench/run.sh --full"
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/offsetd/offsetd/bench/internal/report"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run() error {
	in := flag.String("in", "", "raw go test -bench output to read (required)")
	out := flag.String("out", "RESULTS.md", "Markdown file to write")
	chart := flag.String("chart", "commit-throughput.svg", "SVG chart to write; empty for none")
	benchstat := flag.String("benchstat", "", "benchstat output to include, if any")
	command := flag.String("command", "bench/run.sh", "the command that made the run")
	date := flag.String("date", time.Now().UTC().Format("2006-01-02 15:04 MST"), "date of the run")
	flag.Parse()
	if *in == "" || flag.NArg() > 0 {
		flag.Usage()
		return fmt.Errorf("-in is required, and there are no arguments")
	}

	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	res, err := report.Parse(f)
	f.Close()
	if err != nil {
		return err
	}
	if len(res.Benchmarks) == 0 {
		return fmt.Errorf("%s holds no benchmark results", *in)
	}

	meta := report.Meta{Date: *date, Command: *command}
	outDir := filepath.Dir(*out)
	if meta.Raw, err = filepath.Rel(outDir, *in); err != nil {
		meta.Raw = *in
	}
	if *benchstat != "" {
		b, err := os.ReadFile(*benchstat)
		if err != nil {
			return err
		}
		meta.Benchstat = string(b)
	}
	if *chart != "" {
		var svg bytes.Buffer
		if err := report.WriteChart(&svg, res); err != nil {
			return err
		}
		if err := os.WriteFile(*chart, svg.Bytes(), 0o644); err != nil {
			return err
		}
		if meta.Chart, err = filepath.Rel(outDir, *chart); err != nil {
			meta.Chart = *chart
		}
	}
	var md bytes.Buffer
	if err := report.WriteMarkdown(&md, res, meta); err != nil {
		return err
	}
	if err := os.WriteFile(*out, md.Bytes(), 0o644); err != nil {
		return err
	}

	fmt.Println("Medians and ratios (offsetd ÷ other; ↑ more is better, ↓ less is):")
	fmt.Println()
	if err := report.WriteTable(os.Stdout, res); err != nil {
		return err
	}
	var httpTables bytes.Buffer
	if err := report.WriteHTTP(&httpTables, res); err != nil {
		return err
	}
	if httpTables.Len() > 0 {
		fmt.Println()
		fmt.Println("The HTTP path (offsetd-http: the server on loopback, through client/):")
		fmt.Println()
		if _, err := os.Stdout.Write(httpTables.Bytes()); err != nil {
			return err
		}
	}
	fmt.Println()
	fmt.Println("Targets:")
	fmt.Println()
	if err := report.WriteTargets(os.Stdout, res); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s", *out)
	if *chart != "" {
		fmt.Printf(" and %s", *chart)
	}
	fmt.Println()
	return nil
}
