package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/statictopic"
)

// outputFlag is -o of the static-topic commands: a short table for
// people, or the whole JSON document for programs, as kubectl's -o.
func outputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", "table", "output: table, or json for the whole document")
}

func checkOutput(format string) error {
	if format != "table" && format != "json" {
		return fmt.Errorf("%w: -o %s: want table or json", errUsage, format)
	}
	return nil
}

// printMapping prints a static topic's mapping: as JSON, or as one line
// per logic queue with its leader item (where it is read and written
// now) and how many items its history holds.
func printMapping(out io.Writer, format string, m statictopic.Mapping) error {
	if format == "json" {
		return printJSON(out, m)
	}
	fmt.Fprintf(out, "topic %s  scope %s  epoch %d  queues %d\n", strconv.Quote(m.Topic), m.Scope, m.Epoch, m.TotalQueues)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tBROKER\tPHYSICAL-QUEUE\tLOGIC-START\tITEMS")
	for _, id := range slices.Sorted(maps.Keys(m.Queues)) {
		items := m.Queues[id]
		if len(items) == 0 {
			continue
		}
		leader := items[len(items)-1]
		start := "undecided"
		if leader.IsDecided() {
			start = strconv.FormatInt(leader.LogicOffset, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\n", id, leader.Broker, leader.QueueID, start, len(items))
	}
	return tw.Flush()
}

// onlyScopeOf returns the scope of topic when it is in exactly one.
func onlyScopeOf(ctx context.Context, c *client.Client, topic string) (string, error) {
	all, err := c.StaticTopics(ctx, "")
	if err != nil {
		return "", err
	}
	var scopes []string
	for _, m := range all {
		if m.Topic == topic {
			scopes = append(scopes, m.Scope)
		}
	}
	switch len(scopes) {
	case 0:
		return "", fmt.Errorf("no static topic %q in any scope", topic)
	case 1:
		return scopes[0], nil
	}
	return "", fmt.Errorf("%w: static topic %q is in scopes %s: choose one with -scope", errUsage, topic, strings.Join(scopes, ", "))
}
