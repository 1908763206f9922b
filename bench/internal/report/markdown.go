package report

import (
	"fmt"
	"io"
	"strings"
)

// Meta is what the report needs to know beyond the benchmark output.
type Meta struct {
	// Date is when the run was made.
	Date string
	// Command is the command that made the run, to reproduce it.
	Command string
	// Raw is the path of the raw go test output, relative to RESULTS.md.
	Raw string
	// Chart is the path of the SVG chart, relative to RESULTS.md; empty
	// to leave the chart out.
	Chart string
	// Benchstat is benchstat's output for the run, shown as it is; empty to
	// leave it out.
	Benchstat string
}

// WriteMarkdown writes RESULTS.md for a run.
func WriteMarkdown(w io.Writer, res *Results, meta Meta) error {
	cfg := func(key string) string {
		if v := res.Config[key]; v != "" {
			return v
		}
		return "unknown"
	}
	var b strings.Builder
	b.WriteString("# offsetd benchmark results\n\n")
	fmt.Fprintf(&b, "Written by `bench/run.sh` from the raw output in [`%s`](%s): do not edit by hand, run it again.\n\n", meta.Raw, meta.Raw)
	fmt.Fprintf(&b, "- **Command:** `%s`\n", meta.Command)
	fmt.Fprintf(&b, "- **Date:** %s\n", meta.Date)
	fmt.Fprintf(&b, "- **Key space:** %s: %s groups × 8 topics × 16 partitions = %s keys\n", cfg("keyspace"), cfg("groups"), cfg("keys"))
	fmt.Fprintf(&b, "- **Repeats:** every figure is the median of %d runs\n\n", res.Runs())

	b.WriteString("## Machine\n\n| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| CPU | %s |\n", cfg("cpu"))
	fmt.Fprintf(&b, "| cores | %s |\n", cfg("cpus"))
	fmt.Fprintf(&b, "| kernel | %s (%s/%s) |\n", cfg("kernel"), cfg("goos"), cfg("goarch"))
	fmt.Fprintf(&b, "| filesystem of the data | %s |\n", cfg("fs"))
	fmt.Fprintf(&b, "| Go | %s |\n\n", cfg("go"))

	b.WriteString("## Medians and ratios\n\n")
	b.WriteString("Each row is one metric of one case; ↑ marks a metric where more is better, ↓ one where less is. ")
	b.WriteString("A ratio is offsetd's median divided by the other system's on that row: on a ↑ row above 1 means offsetd is ahead, on a ↓ row below 1 does. ")
	b.WriteString("The floor is floor-group for commits (one flusher appends everything waiting, one fdatasync per batch) and memory (a Go map) for reads. ")
	b.WriteString("Commit throughput counts every committer together; p50 and p99 latency are what one committer waits for its ack. ")
	b.WriteString("For offsetd and the group floors, which append to one log, a batch is one append with its fsync: commits per fsync is what one carried, append + fsync how long it took, and log idle between fsyncs how long the log waited between the end of one batch and the start of the next (the run's time not spent appending, per batch). ")
	b.WriteString("offsetd-http ÷ offsetd and offsetd-kafka ÷ offsetd are what the HTTP and Kafka paths keep of the embedded figure. ")
	b.WriteString("ClusterCommit runs offsetd on one node and offsetd-raft3 (three nodes of a cluster in one process, on the same cores and disk: a commit is acknowledged once two nodes have fsynced it) in the same run; offsetd-raft3 ÷ offsetd is what replication keeps of the single-node figure, and floor-raft3 (every commit appended and fdatasynced to three files of the same disk at once, acknowledged once the first and one other have it) is what the disk allows three replicas at all. ")
	b.WriteString("offsetd-serve3 is the same cluster as an operator runs it, three `offsetd serve` processes on loopback, and offsetd-serve1 one such process, in the same run: both are driven through the Go client over HTTP, each commit sent to the node that leads its group's partition, and their server CPU per commit is the server processes' own (the three together), apart from the client's; offsetd-serve3 ÷ offsetd-serve1 is what three processes keep of one. For the clusters, commits per fsync counts the records of the three nodes' journals together, a commit being a record on each node.\n\n")
	if err := WriteTable(&b, res); err != nil {
		return err
	}

	b.WriteString("\n## Targets\n\n")
	if ks := res.Config["keyspace"]; ks != "large" {
		fmt.Fprintf(&b, "This run used the %s key space; the targets are set for the large one (`bench/run.sh --full`), so read these as hints.\n\n", cfg("keyspace"))
	}
	if err := WriteTargets(&b, res); err != nil {
		return err
	}

	var httpTables strings.Builder
	if err := WriteHTTP(&httpTables, res); err != nil {
		return err
	}
	if httpTables.Len() > 0 {
		b.WriteString("\n## The HTTP and Kafka paths\n\n")
		b.WriteString("offsetd-http is offsetd behind its HTTP server (default options, response cache on) on a loopback listener, driven through the Go client over keep-alive connections, in the benchmark's process: its allocations count the client's and the server's. ")
		b.WriteString("offsetd-kafka is offsetd behind its Kafka listener on loopback, in a process of its own, driven by franz-go clients, one connection per concurrent caller: a commit is one OffsetCommit to the coordinator on the client's open connection, as a group consumer sends it (no Metadata request per commit), group reads go through kadm, point reads as one OffsetFetch. Its server CPU per commit is the server process's own, apart from the clients'; kafka-floor, a bare Kafka-protocol server (kmsg) that answers OffsetCommit at once without storing it, is driven the same way in the same run. ")
		b.WriteString("Rates count every client together; a commit is acknowledged once fsynced, as embedded. ")
		b.WriteString("A polled fetch is one poller re-reading, through the Go client, a group of 128 offsets that has not changed: answered 200 from the response cache or encoded afresh (cache off), both decoded by the client, or a conditional GET answered 304.\n\n")
		b.WriteString(httpTables.String())
	}

	if meta.Chart != "" {
		b.WriteString("\n## Commit throughput against concurrency\n\n")
		fmt.Fprintf(&b, "![Durable commits per second against concurrent committers, per system](%s)\n", meta.Chart)
	}

	b.WriteString("\n## How each system is made durable\n\n")
	b.WriteString("- **offsetd**: default options; every internal partition hands its waiting commits to the one journal, which appends everything queued from every partition as one batch and fsyncs it before any of it is acknowledged. Its Observer counts the journal's batches (commits per fsync and the rows below it).\n")
	b.WriteString("- **offsetd-http**: offsetd as above behind its HTTP server on loopback; a commit is answered once offsetd has fsynced it.\n")
	b.WriteString("- **offsetd-kafka**: offsetd as above behind its Kafka listener on loopback, in a process of its own; an OffsetCommit is answered once offsetd has fsynced it.\n")
	b.WriteString("- **kafka-floor**: not durable: a bare Kafka-protocol server (kmsg) in a process of its own, answering every OffsetCommit at once and storing nothing; the floor of offsetd-kafka.\n")
	b.WriteString("- **pebble**: default options; each commit is a batch committed with `pebble.Sync` (Pebble syncs its WAL before returning, sharing one sync among concurrent commits).\n")
	b.WriteString("- **bbolt**: default options (each transaction fdatasyncs its pages, then its meta page); one committer uses `db.Update`, several use `db.Batch` (default 1000 calls or 10 ms per batch).\n")
	b.WriteString("- **floor-group**: the batch floor: one flusher appends everything waiting with one write and one fdatasync, then acks it all.\n")
	b.WriteString("- **offsetd-raft3**: three nodes of a cluster in one process, each with its own journal on the same disk, talking HTTP over loopback; a commit goes to its partition's leader and is acknowledged once two nodes have fsynced it and the leader applied it.\n")
	b.WriteString("- **offsetd-serve3**: three `offsetd serve` processes of a cluster on loopback (the binary built from the checkout, default options, Kafka off), each with its own data directory on the same disk; a commit is acknowledged as on offsetd-raft3.\n")
	b.WriteString("- **offsetd-serve1**: one `offsetd serve` process as above, without a cluster; a commit is answered once it has fsynced it.\n")
	b.WriteString("- **floor-raft3**: the replication floor: each commit appended to three floor-group files of the same disk at once and acknowledged once the first and one other have synced it; no network, no consensus.\n")
	b.WriteString("- **floor-prealloc**: floor-group overwriting preallocated, already-synced space instead of appending (as Pebble recycles its WAL files): the most any log with one flusher can do on this disk.\n")
	b.WriteString("- **floor-sync**: each commit is appended to a file and fdatasynced before the next (committers take turns).\n")
	b.WriteString("- **memory**: a Go map under a mutex; not durable, the bound for reads and for work done in memory.\n")

	if meta.Benchstat != "" {
		b.WriteString("\n## benchstat\n\n<details><summary>benchstat output for the same run</summary>\n\n```\n")
		b.WriteString(strings.TrimRight(meta.Benchstat, "\n"))
		b.WriteString("\n```\n\n</details>\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
