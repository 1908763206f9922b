package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/offsetd/offsetd/statictopic"
)

func writeFile(t *testing.T, name, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every admin command against a running server with auth on.
func TestAdminCommands(t *testing.T) {
	token := writeFile(t, "token", "s3cret\n", 0o600)
	s := startServe(t, []string{"serve", "-data", filepath.Join(t.TempDir(), "d"), "-listen", "127.0.0.1:0", "-auth-token-file", token}, nil)
	env := map[string]string{"OFFSETD_ADDR": s.url, "OFFSETD_TOKEN_FILE": token}

	if out := mustRun(t, 0, env, "groups"); out != "" {
		t.Fatalf("groups of an empty server: %q", out)
	}
	out := mustRun(t, 0, env, "commit", "-generation", "2", "-metadata", "hello", "payments", "orders", "3", "42")
	if !strings.Contains(out, `committed group "payments": version`) {
		t.Fatalf("commit: %s", out)
	}
	mustRun(t, 0, env, "commit", "payments", "refunds", "0", "7")
	// Arguments that are not UTF-8 (a lone surrogate in WTF-8) are refused,
	// not sent as U+FFFD.
	for _, args := range [][]string{
		{"commit", "payments", "orders\xed\xa0\x80", "0", "1"},
		{"commit", "-metadata", "m\xed\xb0\x80", "payments", "orders", "0", "1"},
	} {
		if out := mustRun(t, 1, env, args...); !strings.Contains(out, "not valid UTF-8") {
			t.Fatalf("offsetd %q: %s", args, out)
		}
	}
	mustRun(t, 0, env, "commit", "billing", "orders", "0", "1")
	if out := mustRun(t, 0, env, "groups"); out != "billing\npayments\n" {
		t.Fatalf("groups: %q", out)
	}
	out = mustRun(t, 0, env, "describe", "payments")
	for _, want := range []string{`group "payments"`, "generation 2", "offsets 2", `orders\s+3\s+42\s+-1\s`, `"hello"`, `refunds\s+0\s+7\s`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	mustRun(t, 0, env, "delete", "-topic", "refunds", "-partitions", "0", "payments")
	if out := mustRun(t, 0, env, "describe", "payments"); strings.Contains(out, "refunds") {
		t.Fatalf("refunds survived its delete:\n%s", out)
	}
	mustRun(t, 0, env, "delete", "billing")
	if out := mustRun(t, 1, env, "delete", "billing"); !strings.Contains(out, "not_found") {
		t.Fatalf("second delete: %s", out)
	}
	if out := mustRun(t, 1, env, "commit", "-generation", "1", "payments", "orders", "3", "1"); !strings.Contains(out, "stale_generation") {
		t.Fatalf("stale commit: %s", out)
	}

	// Static topics.
	var m statictopic.Mapping
	out = mustRun(t, 0, env, "static", "create", "-scope", "clusterA", "-queues", "4", "-brokers", "b1,b2", "-o", "json", "TopicTest")
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.TotalQueues != 4 {
		t.Fatalf("static create: %v\n%s", err, out)
	}
	mustRun(t, 0, env, "static", "create", "-scope", "clusterB", "-queues", "4", "-brokers", "b1,b2", "TopicTest")
	out = mustRun(t, 0, env, "static", "remap", "-scope", "clusterA", "-o", "json", "TopicTest", "0:b3:12345")
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.Queues[0][1].LogicOffset != 20000 {
		t.Fatalf("static remap: %v\n%s", err, out)
	}
	out = mustRun(t, 0, env, "static", "describe", "-scope", "clusterA", "-o", "json", "TopicTest")
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.Scope != "clusterA" {
		t.Fatalf("static describe: %v\n%s", err, out)
	}
	out = mustRun(t, 0, env, "static", "describe")
	if !regexp.MustCompile(`TopicTest\s+clusterA\s+4\s`).MatchString(out) || !regexp.MustCompile(`TopicTest\s+clusterB\s+4\s`).MatchString(out) {
		t.Fatalf("static describe (list):\n%s", out)
	}
	out = mustRun(t, 0, env, "static", "route", "-scope", "clusterB", "TopicTest")
	if !strings.Contains(out, "queues 4") || !strings.Contains(out, "__logic__clusterB") {
		t.Fatalf("route:\n%s", out)
	}
	if out := mustRun(t, 0, env, "global-read", "clusterA", "on"); out != "scope clusterA: global read on\n" {
		t.Fatalf("global-read: %q", out)
	}
	if out := mustRun(t, 0, env, "static", "route", "-scope", "clusterB", "TopicTest"); !strings.Contains(out, "queues 8") {
		t.Fatalf("consumer route in global read:\n%s", out)
	}
	if out := mustRun(t, 0, env, "static", "route", "-scope", "clusterB", "-role", "producer", "TopicTest"); !strings.Contains(out, "queues 4") {
		t.Fatalf("producer route in global read:\n%s", out)
	}
	mustRun(t, 0, env, "global-read", "clusterA", "off")

	// Mistakes.
	for _, args := range [][]string{
		{"describe"},
		{"commit", "g", "t", "0"},
		{"commit", "g", "t", "zero", "1"},
		{"static", "frob", "T"},
		{"static", "remap", "-scope", "clusterA", "TopicTest", "0-b3"},
		{"static", "route", "-scope", "clusterA", "-role", "admin", "TopicTest"},
		{"global-read", "clusterA", "maybe"},
		{"delete", "-partitions", "1", "g"},
		{"groups", "-nope"},
	} {
		mustRun(t, 2, env, args...)
	}
	wrong := writeFile(t, "wrong", "nope", 0o600)
	if out := mustRun(t, 1, map[string]string{"OFFSETD_ADDR": s.url}, "groups", "-token-file", wrong); !strings.Contains(out, "unauthorized") {
		t.Fatalf("wrong token: %s", out)
	}
	if out := mustRun(t, 1, map[string]string{"OFFSETD_ADDR": s.url}, "groups"); !strings.Contains(out, "unauthorized") {
		t.Fatalf("no token: %s", out)
	}
	// A command's own flags never come from the environment.
	env["OFFSETD_TOPIC"] = "orders"
	mustRun(t, 0, env, "delete", "payments")
}

// selfSigned writes a certificate for 127.0.0.1 and its key, PEM encoded.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "offsetd test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeFile(t, "cert.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), 0o600)
	keyFile = writeFile(t, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})), 0o600)
	return certFile, keyFile
}

func TestServeTLS(t *testing.T) {
	cert, key := selfSigned(t)
	s := startServe(t, []string{"serve", "-data", filepath.Join(t.TempDir(), "d"), "-listen", "127.0.0.1:0", "-tls-cert", cert, "-tls-key", key}, nil)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("TLS server listens on %s", s.url)
	}
	hostPort := strings.TrimPrefix(s.url, "https://")
	// -ca-file makes a bare host:port https.
	mustRun(t, 0, nil, "commit", "-addr", hostPort, "-ca-file", cert, "g", "t", "0", "1")
	if out := mustRun(t, 0, nil, "groups", "-addr", s.url, "-ca-file", cert); out != "g\n" {
		t.Fatalf("groups over TLS: %q", out)
	}
	if out := mustRun(t, 1, nil, "groups", "-addr", s.url); !strings.Contains(out, "certificate") {
		t.Fatalf("without the CA: %s", out)
	}
	mustRun(t, 1, nil, "serve", "-listen", "127.0.0.1:0", "-data", filepath.Join(t.TempDir(), "e"), "-tls-cert", key, "-tls-key", key)
}

func TestServeRefusesBadTokenFiles(t *testing.T) {
	data := filepath.Join(t.TempDir(), "d")
	for _, c := range []struct{ name, content string }{{"empty", " \n"}, {"two words", "a b"}} {
		f := writeFile(t, "token", c.content, 0o600)
		if out := mustRun(t, 1, nil, "serve", "-data", data, "-listen", "127.0.0.1:0", "-auth-token-file", f); !strings.Contains(out, "token file") {
			t.Fatalf("%s token file: %s", c.name, out)
		}
	}
	mustRun(t, 1, nil, "serve", "-data", data, "-listen", "127.0.0.1:0", "-auth-token-file", filepath.Join(t.TempDir(), "missing"))
}
