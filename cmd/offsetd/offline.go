package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/log"
)

// openDataDir parses the arguments of verify and dump (DIR after the
// flags) and returns the directory and where its files are.
func openDataDir(fs *flag.FlagSet, args []string, stderr io.Writer) (string, coordinator.Layout, error) {
	dir, err := parseDataDir(fs, args, stderr)
	if err != nil {
		return "", coordinator.Layout{}, err
	}
	layout, err := coordinator.ReadLayout(dir)
	if errors.Is(err, coordinator.ErrNotDataDir) {
		return "", coordinator.Layout{}, err
	}
	if err != nil {
		return "", coordinator.Layout{}, fmt.Errorf("%s is not a readable offsetd data directory: %w", dir, err)
	}
	return dir, layout, nil
}

// parseDataDir parses the arguments of verify and dump and returns DIR.
func parseDataDir(fs *flag.FlagSet, args []string, stderr io.Writer) (string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", err
		}
		return "", fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		return "", fmt.Errorf("%w: %s needs one data directory", errUsage, fs.Name())
	}
	dir := fs.Arg(0)
	if inUse(dir) {
		fmt.Fprintf(stderr, "offsetd: note: a server has %s open; its newest entries may be mid-write\n", dir)
	}
	return dir, nil
}

// inUse reports whether a coordinator holds dir's lock.
func inUse(dir string) bool {
	l, err := coordinator.LockDir(dir, false)
	if err != nil {
		return errors.Is(err, coordinator.ErrLocked)
	}
	l.Close()
	return false
}

// verify checks every frame of every partition of a data directory,
// prints what it found, and then runs offsetd's own open planning on it
// (coordinator.Check): its verdict is the one serve would reach. It exits
// 0 if serve opens the directory, 1 if it refuses it.
func verify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		if helpRequested(args) {
			printHelp(stderr, commandNamed("verify"), fs)
		}
	}
	dir, err := parseDataDir(fs, args, stderr)
	if err != nil {
		return usageStatus(err, stderr)
	}
	layout, metaErr := coordinator.ReadLayout(dir)
	switch {
	case errors.Is(metaErr, iofs.ErrNotExist):
		return usageStatus(fmt.Errorf("%s is not an offsetd data directory: it holds no %s, journal or snapshots", dir, "offsetd.meta"), stderr)
	case errors.Is(metaErr, coordinator.ErrNotDataDir):
		return usageStatus(metaErr, stderr)
	}
	problems := 0
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if metaErr != nil {
		// Open refuses such a directory; the files found on disk are
		// still checked.
		problems++
		fmt.Fprintf(out, "META: %v\n", metaErr)
		if layout, err = coordinator.LayoutOnDisk(dir); err != nil {
			fmt.Fprintf(out, "verify: %v\n", err)
			return 1
		}
		fmt.Fprintf(out, "%s: format %d, %s found on disk\n", dir, layout.Format, plural(layout.Partitions, "partition"))
	} else {
		fmt.Fprintf(out, "%s: format %d, %s\n", dir, layout.Format, plural(layout.Partitions, "partition"))
	}
	replicated := false
	for _, ld := range layout.Logs {
		counts := map[byte]int{}
		var recErr error
		rep, err := log.Inspect(ld.Dir, ld.Partition, func(index uint64, e log.Entry) error {
			counts[e.Type]++
			if recErr == nil {
				problem := checkRecord(e.Type, e.Payload)
				if e.Partition >= layout.Partitions {
					problem = fmt.Sprintf("partition %d of %d", e.Partition, layout.Partitions)
				}
				if problem != "" {
					recErr = fmt.Errorf("index %d: %s", index, problem)
				}
			}
			return nil
		})
		for typ := range counts {
			replicated = replicated || cluster.RecordTypeName(typ) != ""
		}
		fmt.Fprintf(out, "%s: %s, %s, %s", filepath.Base(ld.Dir), plural(rep.Segments, "segment"), plural(rep.Batches, "batch"), plural(rep.Records, "record"))
		if rep.Records > 0 && rep.LastIndex >= rep.FirstIndex {
			fmt.Fprintf(out, " (indexes %d-%d)", rep.FirstIndex, rep.LastIndex)
		}
		fmt.Fprintf(out, ", %s%s", humanize.IBytes(uint64(rep.Bytes)), typeCounts(counts))
		if rep.Clean {
			fmt.Fprint(out, ", closed cleanly")
		}
		fmt.Fprintln(out)
		switch {
		case rep.RingBatches > 0:
			fmt.Fprintf(out, "  the sync ring holds %s the last segment lost in a crash (restored when the directory is opened", plural(rep.RingBatches, "batch"))
			if rep.TornTailBytes > 0 {
				fmt.Fprintf(out, ", in place of %d bytes from byte %d of segment %s", rep.TornTailBytes, rep.TornTailOffset, rep.TornTailSegment)
			}
			fmt.Fprintln(out, ")")
		case rep.TornTailBytes > 0:
			fmt.Fprintf(out, "  torn tail: %d bytes from byte %d of segment %s (a batch a crash tore, never acknowledged; cut when the directory is opened)\n",
				rep.TornTailBytes, rep.TornTailOffset, rep.TornTailSegment)
		}
		if len(rep.Leftovers) > 0 {
			fmt.Fprintf(out, "  an interrupted truncation left %v (finished when the directory is opened)\n", rep.Leftovers)
		}
		if err != nil {
			problems++
			fmt.Fprintf(out, "  DAMAGED: %v\n", err)
		}
		if recErr != nil {
			problems++
			fmt.Fprintf(out, "  BAD RECORD: %v\n", recErr)
		}
	}
	damagedSnaps := 0
	none := -1 // the first of a run of partitions without snapshots
	endRun := func(i int) {
		switch {
		case none < 0:
		case none == i-1:
			fmt.Fprintf(out, "partition %d: no snapshots\n", none)
		default:
			fmt.Fprintf(out, "partitions %d-%d: no snapshots\n", none, i-1)
		}
		none = -1
	}
	for i, sdir := range layout.Snapshots {
		if list, err := log.ListSnapshots(sdir); err == nil && len(list) == 0 || errors.Is(err, iofs.ErrNotExist) {
			if none < 0 {
				none = i
			}
			continue
		}
		endRun(i)
		fmt.Fprintf(out, "partition %d snapshots:\n", i)
		damagedSnaps += verifySnapshots(out, sdir)
	}
	endRun(len(layout.Snapshots))
	if metaErr != nil || layout.Format == 1 {
		// No plan to run: serve refuses a damaged meta file, and converts
		// a directory of format 1 before it plans. The frames checked are
		// the verdict.
		problems += damagedSnaps
		if problems > 0 {
			fmt.Fprintf(out, "verify: %s found\n", plural(problems, "problem"))
			return 1
		}
		fmt.Fprintln(out, "verify: ok")
		return 0
	}
	return reportPlan(out, dir, damagedSnaps, replicated)
}

// reportPlan runs offsetd's open planning on dir (coordinator.Check, or
// cluster.Check for a cluster node's directory, whose journal holds Raft
// records), says what serve would do, and returns verify's exit status: 0
// if it opens the directory, 1 if it refuses it. damagedSnaps counts the
// snapshot files that did not read back, which serve passes over.
func reportPlan(out io.Writer, dir string, damagedSnaps int, replicated bool) int {
	opts := coordinator.DefaultOptions()
	opts.Partitions = 0 // the directory's own
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	check := coordinator.Check
	if replicated {
		check = cluster.Check
	}
	rep, err := check(dir, opts)
	if err != nil {
		fmt.Fprintf(out, "verify: offsetd refuses to open this directory, and changes nothing in it:\n  %v\n", err)
		return 1
	}
	var repairs []string
	if rep.NewID {
		repairs = append(repairs, "writes the data directory's identifier to offsetd.meta")
	}
	if j := rep.Journal; j.RingBatches > 0 {
		repairs = append(repairs, fmt.Sprintf("restores %s from the sync ring", plural(j.RingBatches, "batch")))
	} else if j.TornTailBytes > 0 {
		repairs = append(repairs, fmt.Sprintf("cuts the torn tail of segment %s", j.TornTailSegment))
	}
	if len(rep.Journal.Leftovers) > 0 {
		repairs = append(repairs, "finishes an interrupted truncation")
	}
	for _, p := range rep.Parts {
		if len(p.Stale) > 0 {
			repairs = append(repairs, fmt.Sprintf("removes partition %d's %s ahead of the journal", p.Partition, plural(len(p.Stale), "snapshot")))
		}
		for _, s := range p.Skipped {
			fmt.Fprintf(out, "partition %d does not load %s\n", p.Partition, s)
		}
	}
	if len(repairs) > 0 {
		fmt.Fprintf(out, "when opened, offsetd %s\n", strings.Join(repairs, ", "))
	}
	if damagedSnaps > 0 {
		fmt.Fprintf(out, "verify: ok: offsetd opens this directory, passing over %s\n", plural(damagedSnaps, "damaged snapshot"))
		return 0
	}
	fmt.Fprintln(out, "verify: ok")
	return 0
}

// verifySnapshots reads every snapshot file of a partition and returns how
// many are damaged.
func verifySnapshots(out io.Writer, pdir string) int {
	snaps, err := log.ListSnapshots(pdir)
	if err != nil {
		fmt.Fprintf(out, "  DAMAGED: listing snapshots: %v\n", err)
		return 1
	}
	damaged := 0
	for _, index := range snaps {
		counts := map[byte]int{}
		var recErr error
		path := log.SnapshotPath(pdir, index)
		covers, records, err := log.ReadSnapshotFile(path, func(typ byte, payload []byte) error {
			counts[typ]++
			if problem := checkRecord(typ, payload); problem != "" && recErr == nil {
				recErr = fmt.Errorf("record %d: %s", counts[typ], problem)
			}
			return nil
		})
		var size int64
		if fi, err := os.Stat(path); err == nil {
			size = fi.Size()
		}
		if err != nil && covers == 0 {
			fmt.Fprintf(out, "  snapshot %s: %s\n", filepath.Base(path), humanize.IBytes(uint64(size)))
		} else {
			fmt.Fprintf(out, "  snapshot %s: state as of index %d, %s, %s%s\n",
				filepath.Base(path), covers, plural(records, "record"), humanize.IBytes(uint64(size)), typeCounts(counts))
		}
		switch {
		case err != nil:
			damaged++
			fmt.Fprintf(out, "  DAMAGED: %v\n", err)
		case recErr != nil:
			damaged++
			fmt.Fprintf(out, "  BAD RECORD in %s: %v\n", filepath.Base(path), recErr)
		}
	}
	return damaged
}

// typeCounts formats record counts by type: ", commit 3, mapping 1".
func typeCounts(counts map[byte]int) string {
	var b strings.Builder
	for typ := range 256 {
		if n := counts[byte(typ)]; n > 0 {
			name := coordinator.RecordTypeName(byte(typ))
			if name == "" {
				name = cluster.RecordTypeName(byte(typ))
			}
			if name == "" {
				name = fmt.Sprintf("type%d", typ)
			}
			fmt.Fprintf(&b, ", %s %d", name, n)
		}
	}
	return b.String()
}

// checkRecord decodes a record with the coordinator's own decoder (or a
// cluster node's, for its Raft records) and says what is wrong with it, if
// anything.
func checkRecord(typ byte, payload []byte) string {
	var err error
	if cluster.RecordTypeName(typ) != "" {
		_, err = cluster.DecodeRecord(typ, payload)
	} else {
		_, err = coordinator.DecodeRecord(typ, payload)
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// dumpLine is one record of offsetd dump: a log entry (Index) or a record
// of a snapshot file (Snapshot), decoded; a record that does not decode is
// printed as Error and its Payload (base64).
type dumpLine struct {
	Partition int    `json:"partition"`
	Index     uint64 `json:"index,omitempty"`    // a log entry's index
	Snapshot  uint64 `json:"snapshot,omitempty"` // for a snapshot's record, the index the snapshot covers
	TypeCode  byte   `json:"typeCode"`
	Bytes     int    `json:"bytes"`
	coordinator.Record
	// Raft is a cluster node's Raft record, decoded.
	Raft    *cluster.Record `json:"raft,omitempty"`
	Error   string          `json:"error,omitempty"`
	Payload []byte          `json:"payload,omitempty"`
}

// dump prints every record of a data directory as a JSON line.
func dump(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	only := fs.Int("partition", -1, "dump only this partition")
	snapshots := fs.Bool("snapshots", false, "also dump the records of every snapshot file (lines with \"snapshot\": the index it covers)")
	fs.Usage = func() {
		if helpRequested(args) {
			printHelp(stderr, commandNamed("dump"), fs)
		}
	}
	dir, layout, err := openDataDir(fs, args, stderr)
	if err != nil {
		return usageStatus(err, stderr)
	}
	n := layout.Partitions
	if *only >= n {
		fmt.Fprintf(stderr, "offsetd: %s has partitions 0-%d, not %d\n", dir, n-1, *only)
		return 2
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	status := 0
	if *snapshots {
		for i, sdir := range layout.Snapshots {
			if *only >= 0 && i != *only {
				continue
			}
			snaps, err := log.ListSnapshots(sdir)
			if err != nil {
				fmt.Fprintf(stderr, "offsetd: partition %d: %v\n", i, err)
				status = 1
			}
			for _, index := range slices.Backward(snaps) { // oldest first
				_, _, err := log.ReadSnapshotFile(log.SnapshotPath(sdir, index), func(typ byte, payload []byte) error {
					return enc.Encode(newDumpLine(i, 0, index, typ, payload))
				})
				if err != nil {
					fmt.Fprintf(stderr, "offsetd: partition %d: %v\n", i, err)
					status = 1
				}
			}
		}
	}
	for _, ld := range layout.Logs {
		_, err := log.Inspect(ld.Dir, ld.Partition, func(index uint64, e log.Entry) error {
			if *only >= 0 && e.Partition != *only {
				return nil
			}
			return enc.Encode(newDumpLine(e.Partition, index, 0, e.Type, e.Payload))
		})
		if err != nil {
			fmt.Fprintf(stderr, "offsetd: %s: %v\n", filepath.Base(ld.Dir), err)
			status = 1
		}
	}
	return status
}

func newDumpLine(partition int, index, snapshot uint64, typ byte, payload []byte) dumpLine {
	line := dumpLine{Partition: partition, Index: index, Snapshot: snapshot, TypeCode: typ, Bytes: len(payload)}
	if cluster.RecordTypeName(typ) != "" {
		rec, err := cluster.DecodeRecord(typ, payload)
		line.Type, line.Raft = rec.Type, &rec
		if err != nil {
			line.Error = err.Error()
			line.Payload = payload
		}
		return line
	}
	rec, err := coordinator.DecodeRecord(typ, payload)
	if err != nil {
		line.Type = coordinator.RecordTypeName(typ)
		if line.Type == "" {
			line.Type = "unknown"
		}
		line.Error = err.Error()
		line.Payload = payload
		return line
	}
	line.Record = rec
	return line
}

func plural(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case noun == "entry":
		return fmt.Sprintf("%d entries", n)
	case noun == "batch":
		return fmt.Sprintf("%d batches", n)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
