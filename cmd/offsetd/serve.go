package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/internal/buildinfo"
	"github.com/offsetd/offsetd/server"
)

// shutdownGrace bounds how long a stopping server waits for requests in
// flight (long polls are ended at once).
const shutdownGrace = 30 * time.Second

// serve runs offsetd serve until ctx ends (SIGINT or SIGTERM), then shuts
// down gracefully: stop accepting, finish the requests in flight, close the
// logs.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseServeConfig(args, getenv, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return usageError(stderr, commandNamed("serve"), err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	if err := runServer(ctx, cfg, logger, stdout); err != nil {
		fmt.Fprintf(stderr, "offsetd: %v\n", err)
		return 1
	}
	return 0
}

func runServer(ctx context.Context, cfg serveConfig, logger *slog.Logger, stdout io.Writer) (err error) {
	info := buildinfo.Read()
	logger.Info("offsetd starting", "version", info.Version, "revision", info.Revision, "modified", info.Modified, "go", info.GoVersion)
	// The HTTP port is taken before the data directory is touched: a port
	// in use fails the start having created nothing.
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("-listen: %w", err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	partitions, err := choosePartitions(cfg.dataDir, cfg.partitions, cfg.partitionsGiven)
	if err != nil {
		return err
	}
	var token string
	if cfg.authTokenFile != "" {
		if token, err = readToken(cfg.authTokenFile, logger); err != nil {
			return err
		}
	}
	var tlsConfig *tls.Config
	if cfg.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
		if err != nil {
			return fmt.Errorf("loading the TLS certificate: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	dataDir, err := filepath.Abs(cfg.dataDir)
	if err != nil {
		return err
	}
	// A start that fails before serving anything removes the directory it
	// created: it holds nothing acknowledged, and an empty directory left
	// behind would be taken for a store on the next start.
	_, statErr := os.Stat(dataDir)
	fresh, serving := errors.Is(statErr, fs.ErrNotExist), false
	defer func() {
		if err != nil && fresh && !serving {
			if rmErr := removeUnused(dataDir); rmErr != nil {
				logger.Warn("the failed start leaves its data directory", "data", dataDir, "err", rmErr)
			}
		}
	}()

	metrics := server.NewMetrics()
	copts := coordinator.DefaultOptions()
	copts.Partitions = partitions
	copts.SegmentSize = int(cfg.segmentSize)
	copts.SnapshotBytes = int64(cfg.snapshotBytes)
	copts.Retention = cfg.retention
	if cfg.retention == 0 {
		copts.Retention = coordinator.KeepForever // -retention 0 keeps groups forever
	}
	copts.UnsafeNoSync = cfg.unsafeNoSync
	copts.LoadInBackground = true // /healthz answers while the logs replay
	copts.Logger = logger
	copts.Observer = metrics
	var c *coordinator.Coordinator
	var member *clusterMember
	var inCluster server.Cluster
	var replicas server.ReplicaAdmin
	if cfg.peers != nil {
		if member, err = joinCluster(cfg, dataDir, ln.Addr(), copts, token, tlsConfig, logger); err != nil {
			return err
		}
		c, inCluster, replicas = member.node.Coordinator(), member.node, member.node
	} else if c, err = coordinator.Open(dataDir, copts); err != nil {
		return err
	}
	closeCoordinator := func() error {
		var err error
		if member != nil {
			err = member.close()
		} else {
			err = c.Close()
		}
		if err != nil && !errors.Is(err, coordinator.ErrClosed) {
			return fmt.Errorf("closing the data directory: %w", err)
		}
		return nil
	}
	cacheBytes := int64(cfg.cacheBytes)
	if cacheBytes == 0 {
		cacheBytes = -1 // off
	}
	var kl *kafkaListener
	var membership server.Membership
	if cfg.kafkaListen != "" {
		if kl, err = startKafka(cfg, c, tlsConfig, token, metrics, logger); err != nil {
			return errors.Join(err, closeCoordinator())
		}
		serving = true // Kafka clients may commit from now on
		membership = kafkaMembership{kl.handler}
	}
	s, err := server.New(c, server.Options{
		MaxBodyBytes:       int64(cfg.maxBody),
		MaxWait:            cfg.maxWait,
		ResponseCacheBytes: cacheBytes,
		AuthToken:          token,
		Logger:             logger,
		Metrics:            metrics,
		Membership:         membership,
		Cluster:            inCluster,
		Replicas:           replicas,
		ReadHeaderTimeout:  cfg.httpHeaderTimeout,
		ReadTimeout:        cfg.httpReadTimeout,
		IdleTimeout:        cfg.httpIdleTimeout,
		MaxConnections:     cfg.httpMaxConns,
	})
	if err != nil {
		kl.stop()
		return errors.Join(err, closeCoordinator())
	}
	hs := s.HTTPServer()
	hs.TLSConfig = tlsConfig.Clone() // ServeTLS adds its protocols to it, while the Raft and Kafka listeners read theirs
	ln = s.LimitListener(ln)
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	warnIfExposed(logger, ln.Addr(), tlsConfig != nil, token != "", cfg.unsafeNoSync)
	fmt.Fprintf(stdout, "offsetd listening on %s://%s, data in %s\n", scheme, ln.Addr(), dataDir)
	if kl != nil {
		warnIfExposed(logger, kl.addr, tlsConfig != nil, token != "", false)
		fmt.Fprintf(stdout, "offsetd serving Kafka clients on %s\n", kl.addr)
	}
	serving = true
	logEffective(logger, cfg, effective{http: ln.Addr(), kafka: kl.address(), data: dataDir, partitions: c.Partitions(),
		tls: tlsConfig != nil, auth: token != "", cluster: member != nil})

	served := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			served <- hs.ServeTLS(ln, "", "")
		} else {
			served <- hs.Serve(ln)
		}
	}()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loadFailed := make(chan error, 1)
	go func() {
		start := time.Now()
		if err := c.WaitReady(loadCtx); err != nil {
			if loadCtx.Err() == nil {
				loadFailed <- err
			}
			return
		}
		logger.Info("every partition loaded", "partitions", c.Partitions(), "took", time.Since(start).Round(time.Millisecond))
	}()

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-served:
		runErr = fmt.Errorf("serving: %w", err)
	case err := <-kl.errors():
		runErr = fmt.Errorf("serving Kafka clients: %w", err)
	case err := <-member.errors():
		runErr = fmt.Errorf("serving the cluster's Raft messages: %w", err)
	case err := <-loadFailed:
		runErr = fmt.Errorf("loading %s: %w (inspect it with: offsetd verify %s)", dataDir, err, dataDir)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	kl.stop()
	if err := hs.Shutdown(sctx); err != nil {
		logger.Warn("requests still in flight at the end of the grace period", "err", err)
		hs.Close()
	}
	// Only now: requests in flight during Shutdown still use the cache.
	s.Close()
	runErr = errors.Join(runErr, closeCoordinator())
	if runErr == nil {
		logger.Info("stopped")
	}
	return runErr
}

// removeUnused removes dir, which a failed start created and closed
// again, holding its lock as a server does: another server that opened
// the new directory meanwhile keeps it. A directory without a sound meta
// file (the first thing a coordinator writes once it has loaded a new
// one) goes only if it is empty: a start that fails while the
// coordinator still loads in the background leaves it so, and anything
// else in it is not the coordinator's.
func removeUnused(dir string) error {
	l, err := coordinator.LockDir(dir, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, coordinator.ErrLocked) {
		return fmt.Errorf("another server has it open: %w", err)
	}
	if err != nil {
		return err
	}
	defer l.Close()
	if _, err := coordinator.ReadPartitions(dir); err != nil {
		if err := os.Remove(dir); err != nil && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			return err
		}
		return nil
	}
	return os.RemoveAll(dir)
}

// effective is what a started server actually does, whatever its flags
// said.
type effective struct {
	http, kafka        net.Addr // kafka nil when off
	data               string
	partitions         int // as the data directory holds them
	tls, auth, cluster bool
}

// logEffective logs the options the server runs with: the listeners as
// bound (port 0 resolved), the partitions the data directory has, and
// what protects each listener.
func logEffective(logger *slog.Logger, cfg serveConfig, e effective) {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	kafka := "off"
	if e.kafka != nil {
		kafka = e.kafka.String()
	}
	retention := cfg.retention.String()
	if cfg.retention == 0 {
		retention = "forever"
	}
	attrs := []any{"http", e.http.String(), "kafka", kafka, "data", e.data, "partitions", e.partitions,
		"tls", onOff(e.tls), "auth", onOff(e.auth), "kafka_sasl", onOff(e.auth && e.kafka != nil),
		"retention", retention, "segment_size", cfg.segmentSize.String(), "snapshot_bytes", cfg.snapshotBytes.String(),
		"cache_bytes", cfg.cacheBytes.String(), "max_body", cfg.maxBody.String(), "max_wait", cfg.maxWait,
		"fsync", onOff(!cfg.unsafeNoSync), "log_level", cfg.logLevel.String()}
	if e.cluster {
		attrs = append(attrs, "node_id", cfg.nodeID, "raft", cfg.raftListen)
	}
	logger.Info("serving", attrs...)
}

// choosePartitions returns the partition count to open dir with: the count
// dir was created with, or for a new dir the one given. Asking for another
// count than an existing dir has is an error, not a silent remap.
func choosePartitions(dir string, want int, given bool) (int, error) {
	have, err := coordinator.ReadPartitions(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return want, nil
	case err != nil:
		return 0, fmt.Errorf("reading %s: %w", dir, err)
	case given && have != want:
		return 0, fmt.Errorf("%s was created with %d partitions; it cannot be opened with %d (leave -partitions out to use %d)", dir, have, want, have)
	}
	return have, nil
}

// readToken reads a bearer token file, refusing an empty one.
func readToken(path string, logger *slog.Logger) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("token file %s holds more than one line or word", path)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 && logger != nil {
		logger.Warn("the token file is readable by other users", "file", path, "mode", fi.Mode().Perm().String())
	}
	return token, nil
}

// warnIfExposed logs what a server listening beyond loopback lacks.
func warnIfExposed(logger *slog.Logger, addr net.Addr, tls, auth, noSync bool) {
	if noSync {
		logger.Warn("-unsafe-no-sync: commits are acknowledged before they are durable")
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.IsLoopback() {
		return
	}
	if !auth {
		logger.Warn("listening beyond loopback without -auth-token-file: anyone who reaches the port can change offsets")
	}
	if !tls {
		logger.Warn("listening beyond loopback without TLS: offsets and tokens cross the network in clear text")
	}
}
