package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/statictopic"
)

// brokerRemapFlags are the flags of static remap -brokers.
type brokerRemapFlags struct {
	brokers    string
	dryRun     bool
	maxOffsets string
	ifEpoch    int64
}

// cmdRemapToBrokers plans (-dry-run) or applies a remap of TOPIC to a
// broker set.
func cmdRemapToBrokers(ctx context.Context, c *client.Client, out io.Writer, scope string, f brokerRemapFlags, args []string, format string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: static remap -brokers takes TOPIC alone, not moves", errUsage)
	}
	brokers := splitList(f.brokers)
	if f.dryRun {
		if f.maxOffsets != "" || f.ifEpoch != 0 {
			return fmt.Errorf("%w: -dry-run takes no -max-offsets or -if-epoch", errUsage)
		}
		plan, err := c.PlanRemapToBrokers(ctx, args[0], scope, brokers)
		if err != nil {
			return err
		}
		if format == "json" {
			return printJSON(out, plan)
		}
		return printPlan(out, plan)
	}
	maxOffsets := map[int32]int64{}
	for _, kv := range splitList(f.maxOffsets) {
		q, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%w: -max-offsets entry %q is not QUEUE=OFFSET", errUsage, kv)
		}
		queue, err := parseInt32("queue", q)
		if err != nil {
			return err
		}
		offset, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: -max-offsets entry %q: offset is not an integer", errUsage, kv)
		}
		maxOffsets[queue] = offset
	}
	m, err := c.RemapToBrokers(ctx, args[0], scope, brokers, maxOffsets, f.ifEpoch)
	if err != nil {
		return err
	}
	return printMapping(out, format, m)
}

// printPlan shows a remap plan and how to apply it.
func printPlan(out io.Writer, plan statictopic.RemapPlan) error {
	fmt.Fprintf(out, "topic %s  scope %s  epoch %d  moves %d\n", strconv.Quote(plan.Topic), plan.Scope, plan.Epoch, len(plan.Moves))
	if len(plan.Moves) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tTO-BROKER\tOLD-LEADER-MAX-OFFSET")
	var need []string
	for _, mv := range plan.Moves {
		maxOffset := "needed"
		if mv.OldLeaderMaxOffset >= 0 {
			maxOffset = strconv.FormatInt(mv.OldLeaderMaxOffset, 10) + " (sealed)"
		} else {
			need = append(need, fmt.Sprintf("%d=N", mv.QueueID))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", mv.QueueID, mv.ToBroker, maxOffset)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "apply with: -if-epoch %d", plan.Epoch)
	if len(need) > 0 {
		fmt.Fprintf(out, " -max-offsets %s", strings.Join(need, ","))
	}
	_, err := fmt.Fprintln(out)
	return err
}

// cmdImport stores the mapping of a file of RocketMQ
// TopicQueueMappingDetail JSON: an array of them, as static export writes,
// or an object {"details": [...]}.
func cmdImport(ctx context.Context, c *client.Client, out io.Writer, path string, force bool, format string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var details []statictopic.Detail
	if err := json.Unmarshal(b, &details); err != nil {
		var wrapped struct {
			Details []statictopic.Detail `json:"details"`
		}
		if err2 := json.Unmarshal(b, &wrapped); err2 != nil || wrapped.Details == nil {
			return fmt.Errorf("%s: not an array of TopicQueueMappingDetail: %v", path, err)
		}
		details = wrapped.Details
	}
	if len(details) == 0 {
		return fmt.Errorf("%s: no TopicQueueMappingDetail", path)
	}
	m, err := c.ImportStaticTopic(ctx, details[0].Topic, details, force)
	if err != nil {
		return err
	}
	return printMapping(out, format, m)
}

// cmdTrim drops old sealed items of a static topic.
func cmdTrim(ctx context.Context, c *client.Client, out io.Writer, topic, scope string, below int64, queueList string, force bool, format string) error {
	var queues []int32
	for _, q := range splitList(queueList) {
		v, err := parseInt32("queue", q)
		if err != nil {
			return err
		}
		queues = append(queues, v)
	}
	m, err := c.TrimStaticTopic(ctx, topic, scope, queues, below, force)
	if err != nil {
		return err
	}
	return printMapping(out, format, m)
}

// cmdStaticReaders is static describe -groups TOPIC: every item of every
// logic queue with the consumer groups that read it.
func cmdStaticReaders(ctx context.Context, c *client.Client, out io.Writer, scope, topic, format string) error {
	if scope == "" {
		var err error
		if scope, err = onlyScopeOf(ctx, c, topic); err != nil {
			return err
		}
	}
	queues, err := c.StaticTopicReaders(ctx, topic, scope)
	if err != nil {
		return err
	}
	if format == "json" {
		return printJSON(out, queues)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tGEN\tBROKER\tPHYSICAL-QUEUE\tLOGIC-START\tLOGIC-END\tGROUPS")
	for _, q := range queues {
		for i, it := range q.Items {
			start, end := "undecided", "open"
			if it.IsDecided() {
				start = strconv.FormatInt(it.LogicOffset, 10)
			}
			if e, ok := it.LogicEnd(); ok {
				end = strconv.FormatInt(e, 10)
			} else if it.IsSealed() {
				end = "sealed"
			}
			if i < len(q.Items)-1 && !it.IsSealed() {
				end = "open (old leader)"
			}
			groups := make([]string, len(it.Groups))
			for j, g := range it.Groups {
				groups[j] = fmt.Sprintf("%s@%d", g.Group, g.Offset)
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\t%s\n", q.QueueID, it.Gen, it.Broker, it.QueueID, start, end, strings.Join(groups, " "))
		}
	}
	return tw.Flush()
}
