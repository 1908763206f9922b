package main

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offsetd/offsetd/client"
	"github.com/offsetd/offsetd/coordinator"
)

// offsetd serve without flags serves on the embedded defaults: data in
// ./offsetd-data, and it says where it listens and where its data is.
// (The port comes from OFFSETD_LISTEN, so that the test never fights over
// 7070.)
func TestServeDefaults(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s := startServe(t, []string{"serve"}, map[string]string{"OFFSETD_LISTEN": "127.0.0.1:0"})
	if want := filepath.Join(dir, "offsetd-data"); s.dir != want {
		t.Fatalf("data in %s, want %s", s.dir, want)
	}
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") {
		t.Fatalf("listening on %s", s.url)
	}
	c, err := client.New(s.url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d after shutdown:\n%s", code, s.stderr)
	}
	if n, err := coordinator.ReadPartitions(s.dir); err != nil || n != coordinator.DefaultOptions().Partitions {
		t.Fatalf("data directory holds %d partitions (%v)", n, err)
	}
}

// The partition count is fixed at creation: an existing directory opens
// with its own count, and asking for another is an error.
func TestPartitionsFixedAtCreation(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startServe(t, []string{"serve", "-data", data, "-listen", "127.0.0.1:0", "-partitions", "3"}, nil)
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.stderr)
	}
	out := mustRun(t, 1, nil, "serve", "-data", data, "-listen", "127.0.0.1:0", "-partitions", "5")
	if !strings.Contains(out, "created with 3 partitions") {
		t.Fatalf("mismatch error: %s", out)
	}
	out = mustRun(t, 1, map[string]string{"OFFSETD_PARTITIONS": "5"}, "serve", "-data", data, "-listen", "127.0.0.1:0")
	if !strings.Contains(out, "created with 3 partitions") {
		t.Fatalf("mismatch error from the environment: %s", out)
	}
	s = startServe(t, []string{"serve", "-data", data, "-listen", "127.0.0.1:0"}, nil)
	if code := s.stop(); code != 0 {
		t.Fatalf("reopen without -partitions: exit %d:\n%s", code, s.stderr)
	}
}

func TestServeConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want func(serveConfig) bool
	}{
		{"defaults", nil, nil, func(c serveConfig) bool {
			return c.dataDir == "offsetd-data" && c.listen == "127.0.0.1:7070" && c.kafkaListen == "127.0.0.1:9092" && c.partitions == 16 &&
				c.segmentSize == 256<<10 && c.snapshotBytes == 256<<10 && c.maxBody == 1<<20 && !c.unsafeNoSync && !c.partitionsGiven
		}},
		{"flags", []string{"-data", "d", "-segment-size", "8MiB", "-max-body", "64KiB", "-cache-bytes", "0", "-unsafe-no-sync", "-partitions", "2",
			"-retention", "0", "-snapshot-bytes", "1MiB"}, nil,
			func(c serveConfig) bool {
				return c.dataDir == "d" && c.segmentSize == 8<<20 && c.maxBody == 64<<10 && c.cacheBytes == 0 && c.unsafeNoSync &&
					c.partitions == 2 && c.partitionsGiven && c.retention == 0 && c.snapshotBytes == 1<<20
			}},
		{"environment", nil, map[string]string{"OFFSETD_DATA": "e", "OFFSETD_SEGMENT_SIZE": "1MB", "OFFSETD_UNSAFE_NO_SYNC": "true", "OFFSETD_MAX_WAIT": "5s", "OFFSETD_LOG_LEVEL": "debug"},
			func(c serveConfig) bool {
				return c.dataDir == "e" && c.segmentSize == 1000000 && c.unsafeNoSync && c.maxWait.String() == "5s" && c.logLevel.String() == "DEBUG"
			}},
		{"flag beats environment", []string{"-data", "flag"}, map[string]string{"OFFSETD_DATA": "env"},
			func(c serveConfig) bool { return c.dataDir == "flag" }},
		{"listener bounds by default", nil, nil, func(c serveConfig) bool {
			return c.kafkaIdleTimeout == 10*time.Minute && c.kafkaFrameTimeout == 30*time.Second && c.kafkaMaxConns == 10000 && c.kafkaMaxQueued == 100<<20 &&
				c.httpHeaderTimeout == 10*time.Second && c.httpReadTimeout == time.Minute && c.httpIdleTimeout == 2*time.Minute && c.httpMaxConns == 10000
		}},
		{"listener bounds", []string{"-kafka-idle-timeout", "1m", "-kafka-frame-timeout", "5s", "-kafka-max-connections", "100", "-kafka-max-queued-bytes", "8MiB",
			"-http-header-timeout", "2s", "-http-read-timeout", "3s", "-http-idle-timeout", "4s", "-http-max-connections", "50"}, nil,
			func(c serveConfig) bool {
				return c.kafkaIdleTimeout == time.Minute && c.kafkaFrameTimeout == 5*time.Second && c.kafkaMaxConns == 100 && c.kafkaMaxQueued == 8<<20 &&
					c.httpHeaderTimeout == 2*time.Second && c.httpReadTimeout == 3*time.Second && c.httpIdleTimeout == 4*time.Second && c.httpMaxConns == 50
			}},
		{"queued bytes follow a larger -max-body", []string{"-max-body", "200MiB"}, nil, func(c serveConfig) bool { return c.kafkaMaxQueued == 200<<20 }},
		{"cluster without Kafka", clusterArgs(), nil, func(c serveConfig) bool { return c.kafkaListen == "" }},
		{"cluster with Kafka", clusterArgs("-kafka-peers", "1=h1:9092,2=h2:9092"), nil,
			func(c serveConfig) bool { return c.kafkaListen == "h1:9092" && c.kafkaPeers[2] == "h2:9092" }},
		{"cluster with Kafka on another address", clusterArgs("-kafka-peers", "1=h1:9092,2=h2:9092", "-kafka-listen", "0.0.0.0:9092"), nil,
			func(c serveConfig) bool { return c.kafkaListen == "0.0.0.0:9092" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseServeConfig(c.args, envOf(c.env), &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if !c.want(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"unknown flag", []string{"-nope"}, nil},
		{"bad size", []string{"-segment-size", "lots"}, nil},
		{"bad size in the environment", nil, map[string]string{"OFFSETD_MAX_BODY": "-1"}},
		{"bad bool in the environment", nil, map[string]string{"OFFSETD_UNSAFE_NO_SYNC": "maybe"}},
		{"certificate without key", []string{"-tls-cert", "c.pem"}, nil},
		{"stray argument", []string{"now"}, nil},
		{"empty data", []string{"-data", ""}, nil},
		{"negative retention", []string{"-retention", "-1h"}, nil},
		{"zero snapshot bytes", nil, map[string]string{"OFFSETD_SNAPSHOT_BYTES": "0"}},
		{"Kafka listener in a cluster without its peers", clusterArgs("-kafka-listen", "127.0.0.1:9092"), nil},
		{"Kafka peers without a cluster", []string{"-kafka-peers", "1=h1:9092"}, nil},
		{"Kafka peers of other nodes", clusterArgs("-kafka-peers", "1=h1:9092,3=h3:9092"), nil},
		{"Kafka peers with -kafka-advertise", clusterArgs("-kafka-peers", "1=h1:9092,2=h2:9092", "-kafka-advertise", "h1:9092"), nil},
		{"Kafka peers with the listener off", clusterArgs("-kafka-peers", "1=h1:9092,2=h2:9092", "-kafka-listen="), nil},
		{"zero Kafka idle timeout", []string{"-kafka-idle-timeout", "0"}, nil},
		{"negative HTTP read timeout", nil, map[string]string{"OFFSETD_HTTP_READ_TIMEOUT": "-1s"}},
		{"no Kafka connections", []string{"-kafka-max-connections", "0"}, nil},
		{"Kafka queued bytes below -max-body", []string{"-max-body", "2MiB", "-kafka-max-queued-bytes", "1MiB"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := parseServeConfig(c.args, envOf(c.env), &bytes.Buffer{}); !errors.Is(err, errUsage) {
				t.Fatalf("err %v, want a usage error", err)
			}
		})
	}
	mustRun(t, 2, nil, "serve", "-segment-size", "lots")
	mustRun(t, 2, nil, "frobnicate")
	mustRun(t, 0, nil, "help")
	mustRun(t, 0, nil, "serve", "-h")
}

// The restart test of the issue, through the real binary: start it,
// commit through client/, stop it with SIGTERM, start it again, read the
// same offsets.
func TestRestartThroughBinary(t *testing.T) {
	tmp := t.TempDir()
	bin := buildBinary(t, tmp)
	data := filepath.Join(tmp, "data")
	start := func() (*exec.Cmd, *client.Client, *bytes.Buffer) {
		t.Helper()
		cmd := exec.Command(bin, "serve", "-data", data, "-listen", "127.0.0.1:0", "-kafka-listen", "127.0.0.1:0", "-partitions", "4")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() {
			cmd.Wait()
			t.Fatalf("offsetd printed nothing:\n%s", stderr.String())
		}
		url, dir := parseListening(t, sc.Text())
		if dir != data {
			t.Fatalf("data in %s, want %s", dir, data)
		}
		c, err := client.New(url, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return cmd, c, &stderr
	}
	stop := func(cmd *exec.Cmd, stderr *bytes.Buffer) {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("offsetd after SIGTERM: %v\n%s", err, stderr)
		}
		if !strings.Contains(stderr.String(), "msg=stopped") {
			t.Fatalf("no clean stop in the log:\n%s", stderr)
		}
	}

	cmd, c, stderr := start()
	ctx := t.Context()
	want := map[string]int64{}
	for i, group := range []string{"payments", "billing", "audit/eu"} {
		offsets := []client.OffsetCommit{
			{Topic: "orders", Partition: 0, Offset: int64(100 + i), LeaderEpoch: -1},
			{Topic: "orders", Partition: 1, Offset: int64(200 + i), LeaderEpoch: 2, Metadata: "m"},
		}
		if _, err := c.Commit(ctx, group, 1, offsets); err != nil {
			t.Fatal(err)
		}
		want[group] = int64(100 + i)
	}
	if _, err := c.CreateStaticTopic(ctx, "TopicTest", "clusterA", 8, []string{"b1", "b2"}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetGlobalRead(ctx, "clusterA", true); err != nil {
		t.Fatal(err)
	}
	before, err := c.GroupOffsets(ctx, "billing", "")
	if err != nil {
		t.Fatal(err)
	}
	stop(cmd, stderr)

	cmd, c, stderr = start()
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	for group, off := range want {
		o, err := c.Offset(ctx, group, "orders", 0)
		if err != nil || o.Offset != off {
			t.Fatalf("%s after restart: %+v, %v", group, o, err)
		}
	}
	after, err := c.GroupOffsets(ctx, "billing", "")
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version || after.Generation != 1 || len(after.Offsets) != 2 || after.Offsets[1] != before.Offsets[1] {
		t.Fatalf("billing after restart %+v, before %+v", after, before)
	}
	if _, err := c.Commit(ctx, "billing", 0, []client.OffsetCommit{{Topic: "orders", Offset: 1, LeaderEpoch: -1}}); !errors.Is(err, client.ErrStaleGeneration) {
		t.Fatalf("generation 0 after a restart that saw 1: %v", err)
	}
	scopes, err := c.Scopes(ctx)
	if err != nil || len(scopes) != 1 || !scopes[0].GlobalRead || scopes[0].Topics != 1 {
		t.Fatalf("scopes after restart %+v, %v", scopes, err)
	}
	stop(cmd, stderr)

	if _, err := os.Stat(coordinator.JournalDir(data)); err != nil {
		t.Fatal(err)
	}
}

// clusterArgs is node 1 of a two-node cluster, and more.
func clusterArgs(more ...string) []string {
	return append([]string{"-node-id", "1", "-peers", "1=127.0.0.1:7101,2=127.0.0.1:7102", "-raft-listen", "127.0.0.1:7101"}, more...)
}

// A start that fails on a port in use creates no data directory, or
// removes the one it created; an existing directory is left as it was.
func TestFailedStartLeavesNoDirectory(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tmp := t.TempDir()
	for _, c := range []struct{ name, flag, want string }{
		{"http", "-listen", "-listen: listen tcp " + busy.Addr().String()},
		{"kafka", "-kafka-listen", "-kafka-listen: listen tcp " + busy.Addr().String()},
	} {
		data := filepath.Join(tmp, c.name)
		args := []string{"serve", "-data", data, "-listen", "127.0.0.1:0", "-kafka-listen", "127.0.0.1:0", c.flag, busy.Addr().String()}
		if out := mustRun(t, 1, nil, args...); !strings.Contains(out, c.want) {
			t.Fatalf("%s port in use: %s", c.name, out)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s port in use left %s behind (%v)", c.name, data, err)
		}
	}
	data := filepath.Join(tmp, "kept")
	s := startServe(t, []string{"serve", "-data", data, "-listen", "127.0.0.1:0", "-partitions", "2"}, nil)
	mustRun(t, 0, map[string]string{"OFFSETD_ADDR": s.url}, "commit", "g", "t", "0", "5")
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	mustRun(t, 1, nil, "serve", "-data", data, "-listen", "127.0.0.1:0", "-kafka-listen", busy.Addr().String())
	s = startServe(t, []string{"serve", "-data", data, "-listen", "127.0.0.1:0"}, nil)
	if out := mustRun(t, 0, map[string]string{"OFFSETD_ADDR": s.url}, "describe", "g"); !regexp.MustCompile(`t\s+0\s+5\s`).MatchString(out) {
		t.Fatalf("the existing directory lost its offsets after a failed start:\n%s", out)
	}
}

// offsetd version prints the revision go build recorded from the checkout.
// Go records none in a git worktree or without a git tool; the test then
// says so and skips.
func TestVersionOfBuiltBinary(t *testing.T) {
	gitTool, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git tool")
	}
	top, err := exec.Command(gitTool, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		t.Skip("a git worktree: go build records no VCS information in one")
	}
	head, err := exec.Command(gitTool, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "offsetd")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^offsetd v\S+ \(revision ` + strings.TrimSpace(string(head)) + `(, modified)?, go1\.\S+\)\n$`)
	if !want.Match(out) {
		t.Fatalf("offsetd version printed %q, want revision %s", out, head)
	}
}

// removeUnused leaves a directory another server holds, and one that was
// never opened (it has no meta file).
func TestRemoveUnused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	opts := coordinator.DefaultOptions()
	opts.Partitions = 1
	c, err := coordinator.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeUnused(dir); err == nil {
		t.Fatal("removed a directory a coordinator holds")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := removeUnused(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still there: %v", dir, err)
	}
	// A new directory the coordinator had not written to yet (it loads in
	// the background, and writes only once loaded) is empty, and goes.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := removeUnused(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty %s still there: %v", dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := removeUnused(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatalf("a directory no coordinator opened was removed: %v", err)
	}
}
