package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/offsetd/offsetd/cluster"
	"github.com/offsetd/offsetd/coordinator"
)

// peersFlag is -peers: id=host:port,... the Raft address of every node of
// the cluster, this one's included.
type peersFlag map[uint64]string

func (p *peersFlag) String() string {
	var parts []string
	for id, addr := range *p {
		parts = append(parts, fmt.Sprintf("%d=%s", id, addr))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (p *peersFlag) Set(s string) error {
	peers := peersFlag{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 {
			return fmt.Errorf("%q: want id=host:port with an id above 0", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%q: %w", part, err)
		}
		if _, dup := peers[n]; dup {
			return fmt.Errorf("node %d given twice", n)
		}
		peers[n] = addr
	}
	*p = peers
	return nil
}

// clusterMember is a node of a cluster as offsetd serve runs it: its
// Raft groups, the transport to the other nodes and the listener that
// receives from them.
type clusterMember struct {
	node      *cluster.Node
	transport *cluster.HTTPTransport
	raft      *http.Server
	served    chan error
}

// joinCluster opens the data directory as node cfg.nodeID of the cluster
// cfg.peers, receiving Raft messages on cfg.raftListen, over TLS (both
// ways) when tlsConfig is set. listening is the address -listen bound.
func joinCluster(cfg serveConfig, dataDir string, listening net.Addr, copts coordinator.Options, token string, tlsConfig *tls.Config, logger *slog.Logger) (*clusterMember, error) {
	var clientTLS *tls.Config
	if tlsConfig != nil {
		clientTLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.raftCAFile != "" {
			pool, err := readCertPool(cfg.raftCAFile)
			if err != nil {
				return nil, err
			}
			clientTLS.RootCAs = pool
		}
	}
	ln, err := net.Listen("tcp", cfg.raftListen)
	if err != nil {
		return nil, fmt.Errorf("-raft-listen: %w", err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	ids := make([]uint64, 0, len(cfg.peers))
	others := map[uint64]string{}
	for id, addr := range cfg.peers {
		ids = append(ids, id)
		if id != cfg.nodeID {
			others[id] = addr
		}
	}
	slices.Sort(ids)
	advertise := cfg.advertise
	if advertise == "" {
		advertise = cfg.listen
		if _, port, err := net.SplitHostPort(cfg.listen); err == nil && port == "0" {
			// The others send clients to the port picked, not to port 0.
			advertise = listening.String()
		}
	}
	tr := cluster.NewHTTPTransport(cluster.HTTPOptions{ID: cfg.nodeID, Peers: others, Advertise: advertise, Address: cfg.peers[cfg.nodeID],
		Token: token, TLS: clientTLS, Logger: logger})
	n, err := cluster.Open(dataDir, copts, cluster.Options{ID: cfg.nodeID, Peers: ids, Address: cfg.peers[cfg.nodeID], Join: cfg.join, Transport: tr, Logger: logger})
	if err != nil {
		tr.Close()
		ln.Close()
		return nil, err
	}
	n.SetAddress(cfg.nodeID, advertise)
	m := &clusterMember{
		node:      n,
		transport: tr,
		raft:      &http.Server{Handler: cluster.Handler(n, token), ReadHeaderTimeout: 10 * time.Second},
		served:    make(chan error, 1),
	}
	go func() { m.served <- m.raft.Serve(ln) }()
	logger.Info("cluster node", "id", cfg.nodeID, "peers", cfg.peers.String(), "raft", ln.Addr().String(), "advertise", advertise, "tls", tlsConfig != nil, "join", cfg.join)
	if cfg.kafkaPeers == nil {
		// Kafka clients are told where every node's Kafka listener is
		// (Metadata, FindCoordinator): without that list a node cannot
		// send a client to a group's coordinator.
		logger.Warn("Kafka listener off: a cluster node serves Kafka clients only with -kafka-peers, every node's Kafka address (id=host:port,...)")
	}
	return m, nil
}

// close stops the node: it hands the lead of its partitions off while
// Raft messages still flow both ways (closing the transport first left the
// others to elect a leader after an election timeout), stops the groups
// and closes the data directory, and then the Raft traffic stops.
func (m *clusterMember) close() error {
	err := m.node.Close()
	m.raft.Close()
	m.transport.Close()
	if errors.Is(err, coordinator.ErrClosed) {
		return nil
	}
	return err
}

// errors reports the Raft listener's failure; nil (never ready) on a
// single node.
func (m *clusterMember) errors() <-chan error {
	if m == nil {
		return nil
	}
	return m.served
}
