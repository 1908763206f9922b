package main

import (
	"context"
	"io"
	"strings"

	"github.com/offsetd/offsetd/client"
)

// command is one offsetd command: what help says of it and, for a command
// that talks to a server, its flags and action.
type command struct {
	name     string // "commit", "static create"
	synopsis string // what follows the name: "[flags] GROUP TOPIC PARTITION OFFSET"
	summary  string // one line, for the command list
	about    string // what it does, in a few lines; may be empty
	args     []argHelp
	section  string // the heading of the command list it goes under
}

// argHelp explains one argument.
type argHelp struct{ name, meaning string }

// adminCommand is a command that talks to a server, once its flags are
// defined.
type adminCommand struct {
	nargs    []int    // accepted argument counts; nil means at least one
	required []string // flags that must be given
	// check, if set, checks the flags and arguments before the server
	// is called.
	check  func(given map[string]bool, args []string) error
	action func(ctx context.Context, c *client.Client, out io.Writer, args []string) error
}

// Sections of the command list, in order.
const (
	sectionServe   = "Serving"
	sectionGroups  = "Consumer groups, against a running server"
	sectionStatic  = "Static topics, against a running server"
	sectionCluster = "A cluster's members, against any node (each change goes to the partition's leader)"
	sectionOffline = "Data directories, offline, changing nothing"
	sectionOther   = "Other"
)

var sections = []string{sectionServe, sectionGroups, sectionStatic, sectionCluster, sectionOffline, sectionOther}

// groups are the commands that only gather subcommands.
var groups = map[string]string{
	"static":  "create, change, show and translate static topics (RocketMQ's logic queues)",
	"cluster": "show and change which nodes hold each partition of a cluster",
}

// commands is every command, in the order the list shows them. Those that
// talk to a server have their flags and action in adminSetups.
var commands = []*command{
	{name: "serve", section: sectionServe, synopsis: "[flags]",
		summary: "serve HTTP and Kafka clients (the default when the first argument is a flag)",
		about: "Serve offsetd's HTTP API and, unless -kafka-listen is empty, Kafka clients' group\n" +
			"coordination, until SIGINT or SIGTERM; then stop gracefully.\n\n" +
			"Every flag can also be set with its OFFSETD_ environment variable\n" +
			"(-segment-size is OFFSETD_SEGMENT_SIZE); a flag wins over its variable."},
	{name: "groups", section: sectionGroups, synopsis: "[flags]", summary: "list the consumer groups"},
	{name: "describe", section: sectionGroups, synopsis: "[flags] GROUP", summary: "show a group's offsets and Kafka members",
		args: []argHelp{{"GROUP", "the consumer group"}}},
	{name: "commit", section: sectionGroups, synopsis: "[flags] GROUP TOPIC PARTITION OFFSET",
		summary: "commit one offset of a group, as a consumer would",
		args: []argHelp{{"GROUP", "the consumer group"}, {"TOPIC", "the topic"}, {"PARTITION", "the topic's partition (or logic queue)"},
			{"OFFSET", "the next offset to consume"}}},
	{name: "delete", section: sectionGroups, synopsis: "[flags] GROUP",
		summary: "delete a group, or its offsets on a topic",
		args:    []argHelp{{"GROUP", "the consumer group"}}},
	{name: "static create", section: sectionStatic, synopsis: "-scope S -queues N -brokers B1,B2 [flags] TOPIC",
		summary: "create a static topic, or grow it to more queues",
		about: "Create TOPIC in scope S with N logic queues spread evenly over the brokers, each on a\n" +
			"fresh physical queue. Run again with a larger -queues to grow it; with the same\n" +
			"queues and brokers it changes nothing.",
		args: []argHelp{{"TOPIC", "the static topic"}}},
	{name: "static remap", section: sectionStatic,
		synopsis: "-scope S [flags] TOPIC QUEUE:BROKER:OLD_LEADER_MAX_OFFSET...\n       offsetd static remap -scope S -brokers B1,B2,B3 -dry-run TOPIC\n       offsetd static remap -scope S -brokers B1,B2,B3 [-if-epoch E] [-max-offsets Q=N,...] TOPIC",
		summary:  "move logic queues to other brokers, explicitly or balanced over a broker set",
		about: "Each move seals the queue's item on its old broker at the old leader's max offset and\n" +
			"opens a new item on the new broker. With -brokers, plan the fewest moves that balance\n" +
			"the queues over the brokers (-dry-run shows the plan and how to apply it).",
		args: []argHelp{{"TOPIC", "the static topic"},
			{"QUEUE:BROKER:OLD_LEADER_MAX_OFFSET", "move logic queue QUEUE to BROKER; its current leader ends at OLD_LEADER_MAX_OFFSET"}}},
	{name: "static describe", section: sectionStatic, synopsis: "[-scope S] [-groups] [flags] [TOPIC]",
		summary: "list static topics, or show one",
		about: "Without TOPIC, list the static topics (of scope S only, with -scope). With TOPIC and\n" +
			"no -scope, list the scopes TOPIC is in; with -scope, show its queues. -groups shows,\n" +
			"per queue and item, the consumer groups that read it.",
		args: []argHelp{{"TOPIC", "the static topic (optional)"}}},
	{name: "static route", section: sectionStatic, synopsis: "-scope S [-role consumer|producer] [flags] TOPIC",
		summary: "show the logic queues a client in a scope sees",
		args:    []argHelp{{"TOPIC", "the static topic"}}},
	{name: "static export", section: sectionStatic, synopsis: "-scope S [flags] TOPIC",
		summary: "print a topic's RocketMQ TopicQueueMappingDetail JSON, one per broker",
		about:   "The global scope is written as RocketMQ spells it, __global__; every command takes\neither spelling.",
		args:    []argHelp{{"TOPIC", "the static topic"}}},
	{name: "static import", section: sectionStatic, synopsis: "[-force] [flags] FILE",
		summary: "store the mapping of a file of TopicQueueMappingDetail JSON",
		about:   "FILE holds an array of TopicQueueMappingDetail, as static export writes it, or an\nobject {\"details\": [...]}. Sealed items are never rewritten unless -force.",
		args:    []argHelp{{"FILE", "the JSON file"}}},
	{name: "static trim", section: sectionStatic, synopsis: "-scope S -below LOGIC_OFFSET [-queues 0,1] [-force] [flags] TOPIC",
		summary: "drop old sealed items that no group still reads",
		args:    []argHelp{{"TOPIC", "the static topic"}}},
	{name: "global-read", section: sectionStatic, synopsis: "[-force] [flags] SCOPE on|off",
		summary: "turn a scope's disaster switch on or off",
		about: "While a scope's switch is on, consumers in every other scope also see its logic queues,\n" +
			"to drain what it left unconsumed. A scope that holds no static topic is refused\n" +
			"(most likely misspelt) unless -force.",
		args: []argHelp{{"SCOPE", "the scope"}, {"on|off", "the switch"}}},
	{name: "cluster status", section: sectionCluster, synopsis: "[flags]",
		summary: "show every voter's reach and every partition's leader, replicas and lag",
		about: "Asks the node given, then every member it knows the address of: each voter is shown as\n" +
			"the node asked reaches it and as the partitions' leaders hear from it, and each partition\n" +
			"with its leader, term, replicas and how far each replica's applied index is behind the\n" +
			"leader's commit index."},
	{name: "cluster add-node", section: sectionCluster, synopsis: "[-raft-addr HOST:PORT] [flags] ID",
		summary: "add node ID, started with serve -join, to every partition",
		args:    []argHelp{{"ID", "the new node's -node-id"}}},
	{name: "cluster remove-node", section: sectionCluster, synopsis: "[flags] ID",
		summary: "remove node ID from every partition; then stop it",
		args:    []argHelp{{"ID", "the node's -node-id"}}},
	{name: "cluster move", section: sectionCluster, synopsis: "[-raft-addr HOST:PORT] [flags] PARTITION FROM TO",
		summary: "move a partition's replica from one node to another",
		args:    []argHelp{{"PARTITION", "the internal partition"}, {"FROM", "the node that gives its replica up"}, {"TO", "the node that takes it"}}},
	{name: "verify", section: sectionOffline, synopsis: "DIR",
		summary: "check the meta file and every frame of every partition and snapshot",
		about:   "Exit status 1 if anything is damaged. A server may have DIR open.",
		args:    []argHelp{{"DIR", "the data directory"}}},
	{name: "dump", section: sectionOffline, synopsis: "[-partition N] [-snapshots] DIR",
		summary: "print every record as a JSON line",
		args:    []argHelp{{"DIR", "the data directory"}}},
	{name: "version", section: sectionOther, synopsis: "",
		summary: "print offsetd's version, VCS revision and Go version (also: offsetd -version)"},
	{name: "help", section: sectionOther, synopsis: "[COMMAND]",
		summary: "list the commands, or explain one (also: offsetd COMMAND -h)"},
}

// lookup returns the command named by the first words of args, and the
// arguments after its name; nil if there is none.
func lookup(args []string) (*command, []string) {
	if len(args) == 0 {
		return nil, nil
	}
	name := args[0]
	rest := args[1:]
	if _, ok := groups[name]; ok && len(rest) > 0 {
		name, rest = name+" "+rest[0], rest[1:]
	}
	for _, c := range commands {
		if c.name == name {
			return c, rest
		}
	}
	return nil, nil
}

// subcommands returns the commands of group, in order.
func subcommands(group string) []*command {
	var out []*command
	for _, c := range commands {
		if strings.HasPrefix(c.name, group+" ") {
			out = append(out, c)
		}
	}
	return out
}
