package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

const usageText = `usage: offsetd <command> [flags] [arguments]

Serving:
  offsetd [serve] [flags]           serve HTTP and Kafka clients (the default); offsetd serve -h lists the flags

Administering a running server (-addr, -token-file, -ca-file; OFFSETD_ADDR, ...):
  offsetd groups                    list the groups
  offsetd describe GROUP            show a group's offsets and Kafka members
  offsetd commit [-generation N] [-leader-epoch N] [-metadata S] GROUP TOPIC PARTITION OFFSET
  offsetd delete [-topic T [-partitions 0,1]] GROUP
                                    delete a group, or its offsets on a topic
  offsetd static create -scope S -queues N -brokers b1,b2 TOPIC
  offsetd static remap -scope S TOPIC QUEUE:BROKER:OLD_LEADER_MAX_OFFSET...
                                    move queues explicitly
  offsetd static remap -scope S -brokers b1,b2,b3 -dry-run TOPIC
  offsetd static remap -scope S -brokers b1,b2,b3 [-if-epoch E] [-max-offsets Q=N,...] TOPIC
                                    plan, then apply, the fewest moves that balance
                                    the queues over a broker set
  offsetd static describe [-scope S] [-groups] [TOPIC]
                                    -groups: per queue and item, the groups reading it
  offsetd static route -scope S [-role consumer|producer] TOPIC
  offsetd static export -scope S TOPIC
                                    print RocketMQ TopicQueueMappingDetail JSON, per broker
  offsetd static import [-force] FILE
                                    store such JSON; -force may rewrite sealed items
  offsetd static trim -scope S -below LOGIC_OFFSET [-queues 0,1] [-force] TOPIC
                                    drop old sealed items no group still reads
  offsetd global-read SCOPE on|off  the disaster switch of a scope

Changing a cluster's members (any node; each change goes to the partition's leader):
  offsetd cluster status            every voter, reachable or not (from the node asked and the
                                    leaders); every partition's leader, term, replicas and lag
  offsetd cluster add-node [-raft-addr HOST:PORT] ID
                                    add node ID (started with serve -join) to every partition
  offsetd cluster remove-node ID    remove node ID from every partition; then stop it
  offsetd cluster move [-raft-addr HOST:PORT] PARTITION FROM TO
                                    move a partition's replica from node FROM to node TO

Reading a data directory, changing nothing:
  offsetd verify DIR                check the meta file and every frame of every partition
  offsetd dump [-partition N] DIR   print every record as a JSON line

Flags go before arguments.
`

// run is offsetd with its arguments, environment and output; it returns
// the exit status: 0 done, 1 failed, 2 bad usage.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stdout, stderr)
	case "groups", "describe", "commit", "delete", "static", "global-read", "cluster":
		return admin(ctx, cmd, args, getenv, stdout, stderr)
	case "verify":
		return verify(args, stdout, stderr)
	case "dump":
		return dump(args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usageText)
		return 0
	}
	fmt.Fprintf(stderr, "offsetd: unknown command %q\n\n%s", cmd, usageText)
	return 2
}

// usageStatus reports a command-line error and returns its exit status.
func usageStatus(err error, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "offsetd: %v\n", err)
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}
