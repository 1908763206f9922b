package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func kafkaAdmin(t *testing.T, addr string, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// A Kafka admin client commits through offsetd serve's Kafka listener; the
// HTTP side and /metrics see it.
func TestServeKafka(t *testing.T) {
	s := startServe(t, []string{"serve", "-data", filepath.Join(t.TempDir(), "d"), "-listen", "127.0.0.1:0"}, nil)
	if s.kafka == "" {
		t.Fatal("serve did not say where it serves Kafka clients")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kafkaAdmin(t, s.kafka)
	var os kadm.Offsets
	os.AddOffset("orders", 3, 99, -1)
	if err := adm.CommitAllOffsets(ctx, "billing", os); err != nil {
		t.Fatalf("commit over Kafka: %v", err)
	}
	if out := mustRun(t, 0, nil, "describe", "-addr", s.url, "billing"); !strings.Contains(out, "orders") || !strings.Contains(out, "99") {
		t.Fatalf("describe after a Kafka commit:\n%s", out)
	}
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `offsetd_kafka_requests_total{api="OffsetCommit",error="NONE"} 1`; !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %s", want)
	}
}

// With TLS and a token, Kafka clients connect over TLS and authenticate
// with SASL/PLAIN, the token as password; without it they get nothing.
func TestServeKafkaTLSAndSASL(t *testing.T) {
	cert, key := selfSigned(t)
	token := writeFile(t, "token", "s3cret", 0o600)
	s := startServe(t, []string{"serve", "-data", filepath.Join(t.TempDir(), "d"), "-listen", "127.0.0.1:0",
		"-tls-cert", cert, "-tls-key", key, "-auth-token-file", token}, nil)
	pemBytes, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var os kadm.Offsets
	os.AddOffset("orders", 0, 7, -1)
	adm := kafkaAdmin(t, s.kafka, tlsOpt, kgo.SASL(plain.Auth{User: "anyone", Pass: "s3cret"}.AsMechanism()))
	if err := adm.CommitAllOffsets(ctx, "g", os); err != nil {
		t.Fatalf("commit with TLS and SASL: %v", err)
	}
	wrong := kafkaAdmin(t, s.kafka, tlsOpt, kgo.SASL(plain.Auth{User: "anyone", Pass: "guess"}.AsMechanism()))
	if _, err := wrong.ListGroups(ctx); err == nil {
		t.Fatal("a wrong password listed groups")
	}
	anonymous := kafkaAdmin(t, s.kafka, tlsOpt)
	if _, err := anonymous.ListGroups(ctx); err == nil {
		t.Fatal("a client without SASL listed groups")
	}
	plainText := kafkaAdmin(t, s.kafka, kgo.SASL(plain.Auth{User: "anyone", Pass: "s3cret"}.AsMechanism()))
	if _, err := plainText.ListGroups(ctx); err == nil {
		t.Fatal("a client without TLS listed groups")
	}
}

// -kafka-listen= turns the listener off.
func TestServeKafkaOff(t *testing.T) {
	s := startServe(t, []string{"serve", "-data", filepath.Join(t.TempDir(), "d"), "-listen", "127.0.0.1:0", "-kafka-listen="}, nil)
	if s.kafka != "" {
		t.Fatalf("Kafka listener on %s although turned off", s.kafka)
	}
}

// offsetd describe shows the members a group has on the Kafka listener.
func TestDescribeShowsKafkaMembers(t *testing.T) {
	s := startServe(t, []string{"serve", "-data", filepath.Join(t.TempDir(), "d"), "-listen", "127.0.0.1:0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.kafka), kgo.ClientID("reporting-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType = "reports", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
	join.InstanceID = kmsg.StringPtr("pod-a")
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0}}}
	resp, err := join.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("JoinGroup: %v, code %d", err, resp.ErrorCode)
	}
	out := mustRun(t, 0, nil, "describe", "-addr", s.url, "reports")
	for _, want := range []string{"state CompletingRebalance", "protocol consumer/range", resp.MemberID, "pod-a", "reporting-7", "true"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	if out := mustRun(t, 0, nil, "describe", "-addr", s.url, "nobody"); strings.Contains(out, "MEMBER") {
		t.Fatalf("a group without members shows members:\n%s", out)
	}
}

// A cluster serves Kafka clients on every node: Metadata lists the three
// nodes, FindCoordinator names the node that leads the group's partition,
// and commits go on after that node stops, on the node that takes over.
func TestServeClusterKafka(t *testing.T) {
	addrs := freeAddrs(t, 9)
	raft, api, kafkaAddrs := addrs[:3], addrs[3:6], addrs[6:]
	var peers, kafkaPeers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, raft[i]))
		kafkaPeers = append(kafkaPeers, fmt.Sprintf("%d=%s", i+1, kafkaAddrs[i]))
	}
	dir := t.TempDir()
	nodes := map[int32]served{}
	for i := range 3 {
		nodes[int32(i+1)] = startServe(t, []string{"serve", "-data", filepath.Join(dir, fmt.Sprint(i+1)), "-listen", api[i],
			"-node-id", fmt.Sprint(i + 1), "-peers", strings.Join(peers, ","), "-raft-listen", raft[i],
			"-kafka-peers", strings.Join(kafkaPeers, ","), "-kafka-listen", kafkaAddrs[i]}, nil)
		if got := nodes[int32(i+1)].kafka; got != kafkaAddrs[i] {
			t.Fatalf("node %d serves Kafka clients on %q, want %s", i+1, got, kafkaAddrs[i])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddrs...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 3 {
		t.Fatalf("Metadata lists %d brokers, want 3: %v", len(meta.Brokers), meta.Brokers)
	}
	tryCommit := func(offset int64) error {
		var os kadm.Offsets
		os.AddOffset("orders", 0, offset, -1)
		return adm.CommitAllOffsets(ctx, "billing", os)
	}
	if err := tryCommit(1); err != nil {
		t.Fatalf("commit 1: %v", err)
	}
	found := adm.FindGroupCoordinators(ctx, "billing")
	coordinator := found["billing"]
	if coordinator.Err != nil || nodes[coordinator.NodeID].url == "" {
		t.Fatalf("FindCoordinator: %+v", coordinator)
	}
	stopped := nodes[coordinator.NodeID]
	if code := stopped.stop(); code != 0 {
		t.Fatalf("node %d exited with %d", coordinator.NodeID, code)
	}
	// The stopped node handed its lead off at once. franz-go, which still
	// lists it (Metadata names every configured node), may send the
	// FindCoordinator it makes again to it, and does not retry a dial
	// that fails there: the commit is retried, as an application would,
	// but only for that error.
	for try := 0; ; try++ {
		err := tryCommit(2)
		if err == nil {
			break
		}
		if try == 5 || !strings.Contains(err.Error(), "dial tcp "+stopped.kafka) {
			t.Fatalf("commit 2: %v", err)
		}
		t.Logf("commit 2, try %d: %v", try, err)
	}
	fetched, err := adm.FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := fetched.Lookup("orders", 0); o.At != 2 {
		t.Fatalf("offset after the coordinator stopped: %+v, want 2", o)
	}
	if now := adm.FindGroupCoordinators(ctx, "billing")["billing"]; now.Err != nil || now.NodeID == coordinator.NodeID {
		t.Fatalf("FindCoordinator after node %d stopped: %+v", coordinator.NodeID, now)
	}
}

// offsetd serve's listener bounds reach both listeners: a silent connection
// is closed by -kafka-idle-timeout and -http-header-timeout, and a
// connection beyond -kafka-max-connections or -http-max-connections is
// closed without an answer to its request.
func TestServeListenerBounds(t *testing.T) {
	s := startServe(t, []string{"serve", "-data", filepath.Join(t.TempDir(), "d"), "-listen", "127.0.0.1:0", "-kafka-listen", "127.0.0.1:0",
		"-kafka-idle-timeout", "100ms", "-kafka-max-connections", "1", "-http-header-timeout", "100ms", "-http-max-connections", "1"}, nil)
	apiVersions := kmsg.NewPtrApiVersionsRequest()
	apiVersions.Version = 3
	for _, l := range []struct {
		addr    string
		request []byte
	}{
		{s.kafka, kmsg.NewRequestFormatter().AppendRequest(nil, apiVersions, 1)},
		{strings.TrimPrefix(s.url, "http://"), []byte("GET /healthz HTTP/1.1\r\nHost: offsetd\r\n\r\n")},
	} {
		start := time.Now() // the server's timeout starts after this
		silent, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		excess, err := net.Dial("tcp", l.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer excess.Close()
		excess.Write(l.request) // may fail: closed already
		for _, conn := range []net.Conn{excess, silent} {
			conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // bounds a broken server only
			n, err := conn.Read(make([]byte, 1))
			if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("%s: read %d bytes, %v; want the connection closed without an answer", l.addr, n, err)
			}
		}
		if took := time.Since(start); took < 100*time.Millisecond {
			t.Fatalf("%s: the silent connection was closed after %s, before its timeout", l.addr, took)
		}
	}
}
