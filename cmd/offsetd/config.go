package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/kafka"
	"github.com/offsetd/offsetd/server"
	"github.com/offsetd/offsetd/statictopic"
)

// Defaults of offsetd serve: a working server on loopback with its data
// under the current directory.
const (
	defaultDataDir = "offsetd-data"
	defaultListen  = "127.0.0.1:7070"
	defaultAddr    = defaultListen
	// defaultKafkaListen is where Kafka clients reach offsetd.
	defaultKafkaListen = "127.0.0.1:9092"
)

// serveConfig is everything offsetd serve is told.
type serveConfig struct {
	dataDir       string
	listen        string
	kafkaListen   string
	kafkaAdvert   string
	kafkaScope    string
	kafkaPeers    peersFlag
	partitions    int
	segmentSize   byteSize
	unsafeNoSync  bool
	maxBody       byteSize
	cacheBytes    byteSize
	maxWait       time.Duration
	retention     time.Duration
	snapshotBytes byteSize
	tlsCert       string
	tlsKey        string
	authTokenFile string
	logLevel      slog.Level
	nodeID        uint64
	peers         peersFlag
	raftListen    string
	advertise     string
	raftCAFile    string
	join          bool

	// What a client can hold of the listeners (Kafka's name beside each
	// Kafka one).
	kafkaIdleTimeout  time.Duration // connections.max.idle.ms
	kafkaFrameTimeout time.Duration
	kafkaMaxConns     int      // max.connections
	kafkaMaxQueued    byteSize // queued.max.request.bytes
	httpHeaderTimeout time.Duration
	httpReadTimeout   time.Duration
	httpIdleTimeout   time.Duration
	httpMaxConns      int

	// partitionsGiven is true when -partitions or OFFSETD_PARTITIONS was
	// set: an existing data directory must then have that count.
	partitionsGiven bool
}

// parseServeConfig parses serve's flags and environment; asked for with
// -h, the help goes to help.
func parseServeConfig(args []string, getenv func(string) string, help io.Writer) (serveConfig, error) {
	copts, sopts, kopts := coordinator.DefaultOptions(), server.DefaultOptions(), kafka.DefaultServerOptions()
	cfg := serveConfig{
		segmentSize:    byteSize(copts.SegmentSize),
		snapshotBytes:  byteSize(copts.SnapshotBytes),
		maxBody:        byteSize(sopts.MaxBodyBytes),
		cacheBytes:     byteSize(sopts.ResponseCacheBytes),
		kafkaMaxQueued: byteSize(kopts.MaxQueuedBytes),
	}
	fs := flag.NewFlagSet("offsetd serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // serve reports errors and help itself
	fs.StringVar(&cfg.dataDir, "data", defaultDataDir, "data directory (created if missing)")
	fs.StringVar(&cfg.listen, "listen", defaultListen, "address to listen on; port 0 picks a free port")
	fs.StringVar(&cfg.kafkaListen, "kafka-listen", defaultKafkaListen, "address to serve Kafka clients on (group coordination and offsets); empty turns it off")
	fs.StringVar(&cfg.kafkaAdvert, "kafka-advertise", "", "host:port Kafka clients are told to reach offsetd at; empty means the address each connection arrived at")
	fs.StringVar(&cfg.kafkaScope, "kafka-scope", statictopic.GlobalScope, "scope whose static topics Kafka clients see as topics, their logic queues as partitions (consumer groups on group.protocol=consumer are assigned them)")
	fs.IntVar(&cfg.partitions, "partitions", copts.Partitions, "internal partitions, fixed when the data directory is created")
	fs.Var(&cfg.segmentSize, "segment-size", "journal segment size, e.g. 256KiB (the journal keeps its last segment in memory and drops old ones whole)")
	fs.Var(&cfg.snapshotBytes, "snapshot-bytes", "least journal traffic between snapshots of a partition, shared out over the partitions, e.g. 256KiB (a partition also waits to append half its last snapshot's size)")
	fs.DurationVar(&cfg.retention, "retention", copts.Retention, "how long a group may go without a commit before its offsets expire; 0 keeps groups forever")
	fs.BoolVar(&cfg.unsafeNoSync, "unsafe-no-sync", false, "acknowledge commits without fsync: a machine crash can lose acknowledged commits")
	fs.Var(&cfg.maxBody, "max-body", "largest request body or Kafka request frame, e.g. 1MiB")
	fs.Var(&cfg.cacheBytes, "cache-bytes", "response cache budget, e.g. 64MiB; 0 turns the cache off")
	fs.DurationVar(&cfg.maxWait, "max-wait", sopts.MaxWait, "longest long poll (?wait=)")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "TLS certificate file (PEM); with -tls-key, serve HTTPS and Kafka over TLS")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "TLS private key file (PEM)")
	fs.StringVar(&cfg.authTokenFile, "auth-token-file", "", "file holding the bearer token every /v1 request must carry, and the SASL/PLAIN password of Kafka clients")
	fs.Uint64Var(&cfg.nodeID, "node-id", 0, "this node's id in a cluster (one of -peers)")
	fs.Var(&cfg.peers, "peers", "the nodes of a cluster, id=host:port of each one's -raft-listen, this one's included, e.g. 1=127.0.0.1:7101,2=127.0.0.1:7102,3=127.0.0.1:7103; empty runs a single node")
	fs.StringVar(&cfg.raftListen, "raft-listen", "", "address to receive the cluster's Raft messages on (with -peers)")
	fs.BoolVar(&cfg.join, "join", false, "with -peers and an empty -data: join a running cluster as a new node, which offsetd cluster add-node then adds, instead of founding one")
	fs.StringVar(&cfg.raftCAFile, "raft-ca-file", "", "with -tls-cert in a cluster: PEM file of the CA (or self-signed certificate) the other nodes' Raft listeners are checked against; empty means the system's roots")
	fs.Var(&cfg.kafkaPeers, "kafka-peers", "in a cluster, id=host:port of every node's Kafka listener as clients reach it, this one's included (its -kafka-listen defaults to its own entry); turns the Kafka listener on: FindCoordinator names the node that leads a group's partition, Metadata lists every node")
	fs.StringVar(&cfg.advertise, "advertise", "", "host:port other nodes send clients to (421 answers) in a cluster; empty means -listen (with the port it picked, for port 0)")
	fs.DurationVar(&cfg.kafkaIdleTimeout, "kafka-idle-timeout", kopts.IdleTimeout, "close a Kafka connection that sends no request for this long (Kafka's connections.max.idle.ms)")
	fs.DurationVar(&cfg.kafkaFrameTimeout, "kafka-frame-timeout", kopts.FrameTimeout, "close a Kafka connection whose request does not arrive whole this long after its size, or that takes no response for as long")
	fs.IntVar(&cfg.kafkaMaxConns, "kafka-max-connections", kopts.MaxConnections, "most Kafka connections open at once; one more is closed when accepted (Kafka's max.connections)")
	fs.Var(&cfg.kafkaMaxQueued, "kafka-max-queued-bytes", "memory for the Kafka requests above 4KiB being read or answered, all connections together, at least -max-body; a connection that finds it taken waits (Kafka's queued.max.request.bytes)")
	fs.DurationVar(&cfg.httpHeaderTimeout, "http-header-timeout", sopts.ReadHeaderTimeout, "longest an HTTP request's header may take to arrive")
	fs.DurationVar(&cfg.httpReadTimeout, "http-read-timeout", sopts.ReadTimeout, "longest an HTTP request, header and body, may take to arrive (a long poll's wait comes after)")
	fs.DurationVar(&cfg.httpIdleTimeout, "http-idle-timeout", sopts.IdleTimeout, "close a kept-alive HTTP connection that sends no request for this long")
	fs.IntVar(&cfg.httpMaxConns, "http-max-connections", sopts.MaxConnections, "most HTTP connections open at once; one more is closed when accepted")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	fs.Usage = func() {}
	given, err := parseWithEnv(fs, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(help, commandNamed("serve"), fs)
	}
	if err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%w: serve takes no arguments, got %q", errUsage, fs.Args())
	}
	cfg.partitionsGiven = given["partitions"]
	switch {
	case cfg.dataDir == "":
		return cfg, fmt.Errorf("%w: -data is empty", errUsage)
	case (cfg.tlsCert == "") != (cfg.tlsKey == ""):
		return cfg, fmt.Errorf("%w: -tls-cert and -tls-key go together", errUsage)
	case cfg.maxBody < 1:
		return cfg, fmt.Errorf("%w: -max-body must be positive", errUsage)
	case cfg.maxWait <= 0:
		return cfg, fmt.Errorf("%w: -max-wait must be positive", errUsage)
	case cfg.retention < 0:
		return cfg, fmt.Errorf("%w: -retention must not be negative", errUsage)
	case cfg.kafkaAdvert != "" && cfg.kafkaListen == "":
		return cfg, fmt.Errorf("%w: -kafka-advertise without -kafka-listen", errUsage)
	case !validScope(cfg.kafkaScope):
		return cfg, fmt.Errorf("%w: -kafka-scope %q is not a scope (global, a cluster, or clusters joined by commas)", errUsage, cfg.kafkaScope)
	case cfg.snapshotBytes < 1:
		return cfg, fmt.Errorf("%w: -snapshot-bytes must be positive", errUsage)
	case cfg.kafkaIdleTimeout <= 0 || cfg.kafkaFrameTimeout <= 0 || cfg.httpHeaderTimeout <= 0 || cfg.httpReadTimeout <= 0 || cfg.httpIdleTimeout <= 0:
		return cfg, fmt.Errorf("%w: -kafka-idle-timeout, -kafka-frame-timeout, -http-header-timeout, -http-read-timeout and -http-idle-timeout must be positive", errUsage)
	case cfg.kafkaMaxConns < 1 || cfg.httpMaxConns < 1:
		return cfg, fmt.Errorf("%w: -kafka-max-connections and -http-max-connections must be positive", errUsage)
	case given["kafka-max-queued-bytes"] && cfg.kafkaMaxQueued < cfg.maxBody:
		return cfg, fmt.Errorf("%w: -kafka-max-queued-bytes %s is below -max-body %s: the largest request must fit", errUsage, cfg.kafkaMaxQueued.String(), cfg.maxBody.String())
	case cfg.peers == nil && (cfg.nodeID != 0 || cfg.raftListen != "" || cfg.advertise != "" || cfg.join):
		return cfg, fmt.Errorf("%w: -node-id, -raft-listen, -advertise and -join need -peers", errUsage)
	case cfg.peers != nil && cfg.peers[cfg.nodeID] == "":
		return cfg, fmt.Errorf("%w: -node-id %d is not one of -peers %s", errUsage, cfg.nodeID, cfg.peers.String())
	case cfg.raftCAFile != "" && (cfg.peers == nil || cfg.tlsCert == ""):
		return cfg, fmt.Errorf("%w: -raft-ca-file goes with -peers and -tls-cert", errUsage)
	case cfg.peers != nil && cfg.raftListen == "":
		return cfg, fmt.Errorf("%w: -peers needs -raft-listen", errUsage)
	case cfg.kafkaPeers != nil && cfg.peers == nil:
		return cfg, fmt.Errorf("%w: -kafka-peers needs -peers", errUsage)
	case cfg.peers != nil && cfg.kafkaPeers == nil && given["kafka-listen"] && cfg.kafkaListen != "":
		return cfg, fmt.Errorf("%w: in a cluster, the Kafka listener needs -kafka-peers (every node's Kafka address)", errUsage)
	case cfg.kafkaPeers != nil && cfg.kafkaAdvert != "":
		return cfg, fmt.Errorf("%w: in a cluster, clients are told this node's -kafka-peers entry: leave -kafka-advertise out", errUsage)
	case cfg.kafkaPeers != nil && !sameIDs(cfg.peers, cfg.kafkaPeers):
		return cfg, fmt.Errorf("%w: -kafka-peers %s must name the nodes of -peers %s", errUsage, cfg.kafkaPeers.String(), cfg.peers.String())
	case cfg.kafkaPeers != nil && given["kafka-listen"] && cfg.kafkaListen == "":
		return cfg, fmt.Errorf("%w: -kafka-peers with the Kafka listener turned off (-kafka-listen=)", errUsage)
	}
	cfg.kafkaMaxQueued = max(cfg.kafkaMaxQueued, cfg.maxBody)
	if cfg.peers != nil && !given["kafka-listen"] {
		// The default address is one per machine; a node listens where
		// the others send its clients.
		cfg.kafkaListen = cfg.kafkaPeers[cfg.nodeID]
	}
	return cfg, nil
}

// errUsage marks a mistake on the command line (exit status 2).
var errUsage = errors.New("usage")

// envName is the environment variable of a flag: -segment-size is
// OFFSETD_SEGMENT_SIZE.
func envName(flagName string) string {
	return "OFFSETD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseWithEnv parses args, then sets every flag not given on the command
// line from its environment variable, if set. It returns the flags set
// either way.
func parseWithEnv(fs *flag.FlagSet, args []string, getenv func(string) string) (map[string]bool, error) {
	if err := parseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		name := envName(f.Name)
		v := getenv(name)
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %v", errUsage, name, v, err))
			return
		}
		given[f.Name] = true
	})
	return given, errors.Join(errs...)
}

// parseInterspersed parses args as fs.Parse does, except that flags may
// also follow the arguments, as in "commit g t 0 42 -generation 7"; "--"
// ends the flags. An argument after the first that starts with '-' is a
// flag unless it is a number (an offset of -1).
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		i := 1
		for i < len(rest) && !looksLikeFlag(rest[i]) {
			i++
		}
		positional = append(positional, rest[:i]...)
		args = rest[i:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

func looksLikeFlag(arg string) bool {
	if len(arg) < 2 || arg[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(arg, 64)
	return err != nil
}

// byteSize is a flag of a size in bytes: 1048576, 1MiB, 1MB, 64KiB.
type byteSize int64

func (b *byteSize) String() string {
	if *b <= 0 {
		return fmt.Sprint(int64(*b))
	}
	return humanize.IBytes(uint64(*b))
}

func (b *byteSize) Set(s string) error {
	v, err := humanize.ParseBytes(s)
	if err != nil {
		return err
	}
	if v > math.MaxInt64 {
		return fmt.Errorf("%s is too large", s)
	}
	*b = byteSize(v)
	return nil
}

// sameIDs reports whether two -peers-like flags name the same nodes.
func sameIDs(a, b peersFlag) bool {
	if len(a) != len(b) {
		return false
	}
	for id := range a {
		if _, ok := b[id]; !ok {
			return false
		}
	}
	return true
}
