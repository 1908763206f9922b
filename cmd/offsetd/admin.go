package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/statictopic"
)

// adminFlags are the flags of every command that talks to a server.
type adminFlags struct {
	addr      string
	tokenFile string
	caFile    string
	timeout   time.Duration
}

// adminEnvFlags are the flags an environment variable may set; a
// command's own flags (-topic, -scope) are never taken from the
// environment.
var adminEnvFlags = []string{"addr", "token-file", "ca-file", "timeout"}

func newAdminFlagSet(name string) (*flag.FlagSet, *adminFlags) {
	fs := flag.NewFlagSet("offsetd "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // admin reports errors and help itself
	fs.Usage = func() {}
	a := &adminFlags{}
	fs.StringVar(&a.addr, "addr", defaultAddr, "server address: host:port, http://host:port or https://host:port")
	fs.StringVar(&a.tokenFile, "token-file", "", "file holding the server's bearer token")
	fs.StringVar(&a.caFile, "ca-file", "", "PEM file of the CA (or self-signed certificate) to trust for https")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Second, "give up after this long")
	return fs, a
}

func (a *adminFlags) client() (*client.Client, error) {
	opts := client.Options{}
	if a.tokenFile != "" {
		token, err := readToken(a.tokenFile, nil)
		if err != nil {
			return nil, err
		}
		opts.Token = token
	}
	addr := a.addr
	if a.caFile != "" {
		pool, err := readCertPool(a.caFile)
		if err != nil {
			return nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		opts.HTTPClient = &http.Client{Transport: tr}
		if !strings.Contains(addr, "://") {
			addr = "https://" + addr
		}
	}
	return client.New(addr, opts)
}

// readCertPool reads a PEM file of CA (or self-signed) certificates.
func readCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", file)
	}
	return pool, nil
}

// admin runs c, a command that talks to a server.
func admin(ctx context.Context, c *command, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs, a := newAdminFlagSet(c.name)
	ac := adminSetups[c.name](fs)
	given, err := parseWithEnv(fs, args, filterEnv(getenv))
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, c, fs)
		return 0
	}
	if err != nil {
		return usageError(stderr, c, err)
	}
	rest := fs.Args()
	if err := checkArgCount(c, ac.nargs, rest); err != nil {
		return usageError(stderr, c, err)
	}
	for _, name := range ac.required {
		if !given[name] {
			return usageError(stderr, c, fmt.Errorf("-%s is missing: %s", name, fs.Lookup(name).Usage))
		}
	}
	if ac.check != nil {
		if err := ac.check(given, rest); err != nil {
			return usageError(stderr, c, err)
		}
	}
	cl, err := a.client()
	if err != nil {
		return failure(stderr, c, err)
	}
	defer cl.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if err := ac.action(ctx, cl, stdout, rest); err != nil {
		return failure(stderr, c, err)
	}
	return 0
}

// checkArgCount checks the number of arguments against nargs (nil: at
// least one).
func checkArgCount(c *command, nargs []int, args []string) error {
	if nargs == nil && len(args) > 0 || slices.Contains(nargs, len(args)) {
		return nil
	}
	var names []string
	for _, a := range c.args {
		names = append(names, a.name)
	}
	want := "arguments " + strings.Join(names, " ")
	switch {
	case nargs == nil:
		want = "at least one argument"
	case len(nargs) == 1 && nargs[0] == 0:
		want = "no arguments"
	case len(nargs) == 1 && nargs[0] == 1:
		want = "one argument, " + names[0]
	case len(nargs) == 1:
		want = fmt.Sprintf("%d arguments, %s", nargs[0], strings.Join(names, " "))
	}
	if len(args) == 0 {
		return fmt.Errorf("want %s; got none", want)
	}
	return fmt.Errorf("want %s; got %d: %q", want, len(args), args)
}

// adminSetups define the flags of every command that talks to a server
// and return what it runs.
var adminSetups = map[string]func(fs *flag.FlagSet) adminCommand{
	"groups": func(*flag.FlagSet) adminCommand {
		return adminCommand{nargs: []int{0}, action: cmdGroups}
	},
	"describe": func(*flag.FlagSet) adminCommand {
		return adminCommand{nargs: []int{1}, action: cmdDescribe}
	},
	"commit": func(fs *flag.FlagSet) adminCommand {
		gen := fs.Int("generation", -1, "consumer-group generation; -1 for none")
		epoch := fs.Int("leader-epoch", -1, "leader epoch the offset was read at; -1 for none")
		md := fs.String("metadata", "", "metadata kept with the offset")
		return adminCommand{nargs: []int{4}, action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
			return cmdCommit(ctx, c, out, args, *gen, *epoch, *md)
		}}
	},
	"delete": func(fs *flag.FlagSet) adminCommand {
		topic := fs.String("topic", "", "delete only the group's offsets on this topic")
		parts := fs.String("partitions", "", "with -topic: only these partitions, e.g. 0,1,5")
		return adminCommand{nargs: []int{1}, action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
			return cmdDelete(ctx, c, out, args[0], *topic, *parts)
		}}
	},
	"static create": func(fs *flag.FlagSet) adminCommand {
		scope := fs.String("scope", "", "scope: a cluster, clusters c1,c2, or global (required)")
		queues := fs.Int("queues", 0, "total logic queues (required)")
		brokers := fs.String("brokers", "", "brokers to spread the queues over, e.g. b1,b2 (required)")
		o := outputFlag(fs)
		return adminCommand{nargs: []int{1}, required: []string{"scope", "queues", "brokers"},
			check: func(map[string]bool, []string) error {
				if *queues < 1 || *queues > math.MaxInt32 {
					return fmt.Errorf("%w: -queues %d: want 1 to %d", errUsage, *queues, math.MaxInt32)
				}
				return checkOutput(*o)
			},
			action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
				m, err := c.CreateStaticTopic(ctx, args[0], *scope, int32(*queues), splitList(*brokers))
				if err != nil {
					return err
				}
				return printMapping(out, *o, m)
			}}
	},
	"static remap": func(fs *flag.FlagSet) adminCommand {
		scope := fs.String("scope", "", "the topic's scope (required)")
		var br brokerRemapFlags
		fs.StringVar(&br.brokers, "brokers", "", "remap to this broker set, e.g. b1,b2,b3, with the fewest moves that balance the queues")
		fs.BoolVar(&br.dryRun, "dry-run", false, "with -brokers: show the plan, change nothing")
		fs.StringVar(&br.maxOffsets, "max-offsets", "", "with -brokers: each moving queue's old leader max offset, e.g. 0=12345,3=400")
		fs.Int64Var(&br.ifEpoch, "if-epoch", 0, "with -brokers: apply only if the mapping still has this epoch (the dry run's)")
		o := outputFlag(fs)
		return adminCommand{required: []string{"scope"},
			check: func(map[string]bool, []string) error { return checkOutput(*o) },
			action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
				if br.brokers != "" {
					return cmdRemapToBrokers(ctx, c, out, *scope, br, args, *o)
				}
				return cmdRemap(ctx, c, out, *scope, args, *o)
			}}
	},
	"static describe": func(fs *flag.FlagSet) adminCommand {
		scope := fs.String("scope", "", "the topic's scope; without TOPIC, list only this scope's topics")
		groups := fs.Bool("groups", false, "with TOPIC: show, per queue and item, the consumer groups that read it")
		o := outputFlag(fs)
		return adminCommand{nargs: []int{0, 1},
			check: func(_ map[string]bool, args []string) error {
				if *groups && len(args) == 0 {
					return fmt.Errorf("%w: -groups needs TOPIC", errUsage)
				}
				return checkOutput(*o)
			},
			action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
				if *groups {
					return cmdStaticReaders(ctx, c, out, *scope, args[0], *o)
				}
				return cmdStaticDescribe(ctx, c, out, *scope, args, *o)
			}}
	},
	"static export": func(fs *flag.FlagSet) adminCommand {
		scope := fs.String("scope", "", "the topic's scope (required)")
		return adminCommand{nargs: []int{1}, required: []string{"scope"},
			action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
				details, err := c.ExportStaticTopic(ctx, args[0], *scope)
				if err != nil {
					return err
				}
				return printJSON(out, details)
			}}
	},
	"static import": func(fs *flag.FlagSet) adminCommand {
		force := fs.Bool("force", false, "store even if sealed items are rewritten (logged and counted by the server)")
		o := outputFlag(fs)
		return adminCommand{nargs: []int{1},
			check: func(map[string]bool, []string) error { return checkOutput(*o) },
			action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
				return cmdImport(ctx, c, out, args[0], *force, *o)
			}}
	},
	"static trim": func(fs *flag.FlagSet) adminCommand {
		scope := fs.String("scope", "", "the topic's scope (required)")
		below := fs.Int64("below", -1, "drop sealed items whose logic range ends at or below this logic offset (required)")
		queues := fs.String("queues", "", "only these logic queues, e.g. 0,3 (default all)")
		force := fs.Bool("force", false, "trim even items a consumer group still reads (logged and counted by the server)")
		o := outputFlag(fs)
		return adminCommand{nargs: []int{1}, required: []string{"scope", "below"},
			check: func(map[string]bool, []string) error {
				if *below < 0 {
					return fmt.Errorf("%w: -below %d: want a logic offset, 0 or more", errUsage, *below)
				}
				return checkOutput(*o)
			},
			action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
				return cmdTrim(ctx, c, out, args[0], *scope, *below, *queues, *force, *o)
			}}
	},
	"static route": func(fs *flag.FlagSet) adminCommand {
		scope := fs.String("scope", "", "the client's scope (required)")
		role := fs.String("role", "consumer", "consumer or producer")
		return adminCommand{nargs: []int{1}, required: []string{"scope"},
			action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
				return cmdRoute(ctx, c, out, args[0], *scope, *role)
			}}
	},
	"global-read": func(fs *flag.FlagSet) adminCommand {
		force := fs.Bool("force", false, "set the switch of a scope that holds no static topic (yet)")
		return adminCommand{nargs: []int{2},
			check: func(_ map[string]bool, args []string) error {
				if args[1] != "on" && args[1] != "off" {
					return fmt.Errorf("%w: the switch is on or off, not %q", errUsage, args[1])
				}
				return nil
			},
			action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
				return cmdGlobalRead(ctx, c, out, args[0], args[1] == "on", *force)
			}}
	},
	"cluster status": func(*flag.FlagSet) adminCommand {
		return adminCommand{nargs: []int{0}, action: cmdClusterStatus}
	},
	"cluster add-node": func(fs *flag.FlagSet) adminCommand {
		raftAddr := fs.String("raft-addr", "", "the new node's -raft-listen address, host:port, for the nodes that do not know it")
		return adminCommand{nargs: []int{1}, action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
			return cmdAddNode(ctx, c, out, args[0], *raftAddr)
		}}
	},
	"cluster remove-node": func(*flag.FlagSet) adminCommand {
		return adminCommand{nargs: []int{1}, action: cmdRemoveNode}
	},
	"cluster move": func(fs *flag.FlagSet) adminCommand {
		raftAddr := fs.String("raft-addr", "", "TO's -raft-listen address, host:port, for the nodes that do not know it")
		return adminCommand{nargs: []int{3}, action: func(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
			return cmdMoveReplica(ctx, c, out, args, *raftAddr)
		}}
	},
}

// filterEnv hides every variable but those of adminEnvFlags.
func filterEnv(getenv func(string) string) func(string) string {
	return func(name string) string {
		for _, f := range adminEnvFlags {
			if envName(f) == name {
				return getenv(name)
			}
		}
		return ""
	}
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func printJSON(out io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

func parseInt32(what, s string) (int32, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q is not a 32-bit integer", errUsage, what, s)
	}
	return int32(v), nil
}

func cmdGroups(ctx context.Context, c *client.Client, out io.Writer, _ []string) error {
	groups, err := c.Groups(ctx)
	if err != nil {
		return err
	}
	for _, g := range groups {
		fmt.Fprintln(out, g)
	}
	return nil
}

func cmdDescribe(ctx context.Context, c *client.Client, out io.Writer, args []string) error {
	g, err := c.GroupOffsets(ctx, args[0], "")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "group %s  version %d  generation %d  offsets %d\n", strconv.Quote(g.Group), g.Version, g.Generation, len(g.Offsets))
	if len(g.Offsets) > 0 {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tOFFSET\tLEADER-EPOCH\tCOMMITTED\tMETADATA")
		for _, o := range g.Offsets {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", o.Topic, o.Partition, o.Offset, o.LeaderEpoch,
				o.CommitTime.UTC().Format(time.RFC3339Nano), strconv.Quote(o.Metadata))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	m, err := c.Members(ctx, args[0])
	if err != nil || len(m.Members) == 0 {
		return err
	}
	fmt.Fprintf(out, "\nstate %s  generation %d  protocol %s/%s  members %d\n", m.State, m.Generation, m.ProtocolType, m.Protocol, len(m.Members))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tINSTANCE\tCLIENT\tHOST\tLEADER")
	for _, mb := range m.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", mb.MemberID, mb.InstanceID, mb.ClientID, mb.ClientHost, mb.MemberID == m.Leader)
	}
	return tw.Flush()
}

func cmdCommit(ctx context.Context, c *client.Client, out io.Writer, args []string, gen, epoch int, md string) error {
	part, err := parseInt32("partition", args[2])
	if err != nil {
		return err
	}
	offset, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil {
		return fmt.Errorf("%w: offset %q is not an integer", errUsage, args[3])
	}
	if gen < math.MinInt32 || gen > math.MaxInt32 || epoch < math.MinInt32 || epoch > math.MaxInt32 {
		return fmt.Errorf("%w: -generation and -leader-epoch are 32-bit", errUsage)
	}
	v, err := c.Commit(ctx, args[0], int32(gen), []client.OffsetCommit{
		{Topic: args[1], Partition: part, Offset: offset, LeaderEpoch: int32(epoch), Metadata: md},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "committed group %s: version %d\n", strconv.Quote(args[0]), v)
	return nil
}

func cmdDelete(ctx context.Context, c *client.Client, out io.Writer, group, topic, parts string) error {
	if topic == "" {
		if parts != "" {
			return fmt.Errorf("%w: -partitions needs -topic", errUsage)
		}
		if err := c.DeleteGroup(ctx, group); err != nil {
			return err
		}
		fmt.Fprintf(out, "deleted group %s\n", strconv.Quote(group))
		return nil
	}
	var partitions []int32
	for _, p := range splitList(parts) {
		v, err := parseInt32("partition", p)
		if err != nil {
			return err
		}
		partitions = append(partitions, v)
	}
	if err := c.DeleteOffsets(ctx, group, topic, partitions...); err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted offsets of group %s on topic %s\n", strconv.Quote(group), strconv.Quote(topic))
	return nil
}

// cmdRemap parses TOPIC QUEUE:BROKER:OLD_LEADER_MAX_OFFSET...
func cmdRemap(ctx context.Context, c *client.Client, out io.Writer, scope string, args []string, format string) error {
	if len(args) < 2 {
		return fmt.Errorf("%w: static remap needs TOPIC and at least one QUEUE:BROKER:OLD_LEADER_MAX_OFFSET", errUsage)
	}
	var moves []statictopic.QueueMove
	for _, arg := range args[1:] {
		q, rest, ok1 := strings.Cut(arg, ":")
		broker, max, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return fmt.Errorf("%w: move %q is not QUEUE:BROKER:OLD_LEADER_MAX_OFFSET", errUsage, arg)
		}
		queue, err := parseInt32("queue", q)
		if err != nil {
			return err
		}
		maxOffset, err := strconv.ParseInt(max, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: move %q: old leader max offset %q is not an integer", errUsage, arg, max)
		}
		moves = append(moves, statictopic.QueueMove{QueueID: queue, ToBroker: broker, OldLeaderMaxOffset: maxOffset})
	}
	m, err := c.RemapStaticTopic(ctx, args[0], scope, moves)
	if err != nil {
		return err
	}
	return printMapping(out, format, m)
}

// cmdStaticDescribe lists static topics (of scope, if given), the scopes
// of a topic, or one topic's queues.
func cmdStaticDescribe(ctx context.Context, c *client.Client, out io.Writer, scope string, args []string, format string) error {
	if len(args) == 1 && scope != "" {
		m, err := c.StaticTopic(ctx, args[0], scope)
		if err != nil {
			return err
		}
		return printMapping(out, format, m)
	}
	all, err := c.StaticTopics(ctx, scope)
	if err != nil {
		return err
	}
	if len(args) == 1 {
		all = slices.DeleteFunc(all, func(m statictopic.Mapping) bool { return m.Topic != args[0] })
		if len(all) == 0 {
			return fmt.Errorf("no static topic %q in any scope", args[0])
		}
	}
	if format == "json" {
		return printJSON(out, all)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tSCOPE\tQUEUES\tEPOCH")
	for _, m := range all {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", m.Topic, m.Scope, m.TotalQueues, m.Epoch)
	}
	return tw.Flush()
}

func cmdRoute(ctx context.Context, c *client.Client, out io.Writer, topic, scope, roleName string) error {
	role, err := statictopic.ParseRole(roleName)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	rt, err := c.Route(ctx, topic, scope, role)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "topic %s  epoch %d  queues %d\n", strconv.Quote(rt.Topic), rt.Epoch, len(rt.Queues))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BROKER-NAME\tQUEUE\tBROKER\tPHYSICAL-QUEUE")
	for _, q := range rt.Queues {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", q.BrokerName, q.QueueID, q.Broker, q.PhysicalQueueID)
	}
	return tw.Flush()
}

func cmdGlobalRead(ctx context.Context, c *client.Client, out io.Writer, scope string, on, force bool) error {
	set := c.SetGlobalRead
	if force {
		set = c.ForceSetGlobalRead
	}
	if err := set(ctx, scope, on); err != nil {
		return err
	}
	state := "off"
	if on {
		state = "on"
	}
	fmt.Fprintf(out, "scope %s: global read %s\n", scope, state)
	return nil
}
