package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/offsetd/offsetd/client"
)

// parseNodeID parses a node id argument.
func parseNodeID(what, s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: %s %q is not a node id (an integer above 0)", errUsage, what, s)
	}
	return id, nil
}

func cmdClusterStatus(ctx context.Context, c *client.Client, out io.Writer, _ []string) error {
	all, err := c.Replicas(ctx)
	if err != nil {
		return err
	}
	return printReplicas(out, all)
}

// printReplicas prints partitions' configurations as a table.
func printReplicas(out io.Writer, all []client.Replicas) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tVOTERS\tLEARNERS\tLEAVING")
	for _, r := range all {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", r.Partition, r.Leader, ids(r.Voters), ids(r.Learners), ids(r.Outgoing))
	}
	return tw.Flush()
}

// ids prints a list of node ids, "-" when empty.
func ids(list []uint64) string {
	if len(list) == 0 {
		return "-"
	}
	s := make([]string, len(list))
	for i, id := range list {
		s[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ",")
}

func cmdAddNode(ctx context.Context, c *client.Client, out io.Writer, arg, raftAddr string) error {
	id, err := parseNodeID("node", arg)
	if err != nil {
		return err
	}
	all, err := c.AddNode(ctx, id, raftAddr)
	if err != nil {
		return err
	}
	return printReplicas(out, all)
}

func cmdRemoveNode(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
	id, err := parseNodeID("node", args[0])
	if err != nil {
		return err
	}
	all, err := c.RemoveNode(ctx, id)
	if err != nil {
		return err
	}
	return printReplicas(out, all)
}

func cmdMoveReplica(ctx context.Context, c *client.Client, out io.Writer, args []string, raftAddr string) error {
	p, err := strconv.Atoi(args[0])
	if err != nil || p < 0 {
		return fmt.Errorf("%w: partition %q is not a partition number", errUsage, args[0])
	}
	from, err := parseNodeID("FROM", args[1])
	if err != nil {
		return err
	}
	to, err := parseNodeID("TO", args[2])
	if err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("%w: FROM and TO are both node %d", errUsage, from)
	}
	r, err := c.ChangeReplicas(ctx, p, client.ReplicaChange{Add: to, AddAddress: raftAddr, Remove: from})
	if err != nil {
		return err
	}
	return printReplicas(out, []client.Replicas{r})
}
