package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

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

// peerStatusTimeout bounds the wait for each other node's status: a node
// that is down must not hold the command up for its whole -timeout.
const peerStatusTimeout = 3 * time.Second

// cmdClusterStatus prints the cluster as the node asked sees it, and as
// each other node it knows the address of sees itself: every voter, with
// whether the node asked reaches it and whether the partitions' leaders
// hear from it, and every partition's leader, term, replicas and how far
// each replica's applied index is behind its leader's commit index.
func cmdClusterStatus(ctx context.Context, c *client.Client, out io.Writer, _ []string) error {
	asked, err := c.ClusterStatus(ctx)
	if err != nil {
		return err
	}
	views := map[uint64]client.ClusterStatus{asked.Node: asked}
	failed := map[uint64]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	members := map[uint64]bool{}
	for _, p := range asked.Partitions {
		for _, id := range slices.Concat(p.Voters, p.Learners, p.Outgoing) {
			members[id] = true
		}
	}
	for _, p := range asked.Peers {
		if !members[p.ID] {
			continue
		}
		if p.Address == "" {
			mu.Lock()
			failed[p.ID] = fmt.Errorf("node %d does not know where it serves clients (nodes learn it from each other's Raft messages)", asked.Node)
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := peerStatus(ctx, c, p.Address)
			if err == nil && st.Node != p.ID {
				err = fmt.Errorf("%s answers as node %d", p.Address, st.Node)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[p.ID] = err
				return
			}
			views[p.ID] = st
		}()
	}
	wg.Wait()
	return printClusterStatus(out, asked, views, failed)
}

// peerStatus asks the node serving clients at addr for its status, as c
// would.
func peerStatus(ctx context.Context, c *client.Client, addr string) (client.ClusterStatus, error) {
	pc, err := c.At(addr)
	if err != nil {
		return client.ClusterStatus{}, err
	}
	defer pc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, peerStatusTimeout)
	defer cancel()
	return pc.ClusterStatus(ctx)
}

// printClusterStatus prints the voters, then the partitions, then the
// nodes that did not answer.
func printClusterStatus(out io.Writer, asked client.ClusterStatus, views map[uint64]client.ClusterStatus, failed map[uint64]error) error {
	var voters []uint64
	for _, p := range asked.Partitions {
		voters = append(voters, p.Voters...)
		voters = append(voters, p.Outgoing...)
	}
	slices.Sort(voters)
	voters = slices.Compact(voters)
	peers := map[uint64]client.PeerStatus{}
	for _, p := range asked.Peers {
		peers[p.ID] = p
	}
	fmt.Fprintf(out, "node %d (asked): %s\n\n", asked.Node, asked.Membership)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NODE\tADDRESS\tREACHABLE FROM %d\tAS LEADERS SEE IT\tMEMBERSHIP\n", asked.Node)
	for _, id := range voters {
		addr, reach := peers[id].Address, "no"
		switch {
		case id == asked.Node:
			addr, reach = "(asked)", "-"
		case peers[id].Reachable:
			reach = "yes"
		}
		membership := "?"
		if v, ok := views[id]; ok {
			membership = v.Membership
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", id, orDash(addr), reach, seenByLeaders(id, views), membership)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tTERM\tVOTERS\tLEARNERS\tLEAVING\tAPPLIED BEHIND THE LEADER'S COMMIT")
	for i, p := range asked.Partitions {
		term, commit := p.Term, p.Commit
		if lv, ok := views[p.Leader]; ok && i < len(lv.Partitions) {
			term, commit = lv.Partitions[i].Term, lv.Partitions[i].Commit // the leader's own word
		}
		var behind []string
		for _, id := range append(slices.Clone(p.Voters), p.Learners...) {
			b := "?"
			if v, ok := views[id]; ok && i < len(v.Partitions) && p.Leader != 0 {
				b = strconv.FormatUint(commit-min(commit, v.Partitions[i].Applied), 10)
			}
			behind = append(behind, fmt.Sprintf("%d:%s", id, b))
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", p.Partition, leaderName(p.Leader), term, ids(p.Voters), ids(p.Learners), ids(p.Outgoing), strings.Join(behind, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(failed)) {
		fmt.Fprintf(out, "\nnode %d did not answer: %v", id, failed[id])
	}
	if len(failed) > 0 {
		fmt.Fprintln(out)
	}
	return nil
}

// seenByLeaders says whether the leaders that answered hear from node id:
// "active" when each that has it as a follower does, otherwise which do
// not, and "-" when none has it as a follower.
func seenByLeaders(id uint64, views map[uint64]client.ClusterStatus) string {
	seen := false
	var inactive []string
	for _, leader := range slices.Sorted(maps.Keys(views)) {
		var parts []string
		for _, p := range views[leader].Partitions {
			if p.Leader != leader {
				continue
			}
			for _, f := range p.Followers {
				if f.ID != id {
					continue
				}
				seen = true
				if !f.Active {
					parts = append(parts, strconv.Itoa(p.Partition))
				}
			}
		}
		if len(parts) > 0 {
			inactive = append(inactive, fmt.Sprintf("node %d (partitions %s)", leader, strings.Join(parts, ",")))
		}
	}
	switch {
	case len(inactive) > 0:
		return "inactive on " + strings.Join(inactive, ", ")
	case seen:
		return "active"
	}
	return "-"
}

func leaderName(id uint64) string {
	if id == 0 {
		return "none"
	}
	return strconv.FormatUint(id, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
