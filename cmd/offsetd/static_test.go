package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/offsetd/offsetd/statictopic"
)

// TestStaticTopicCommands runs the operator's static-topic commands against
// a server, then again after a restart on the same data directory.
func TestStaticTopicCommands(t *testing.T) {
	data := filepath.Join(t.TempDir(), "d")
	s := startServe(t, []string{"serve", "-data", data, "-listen", "127.0.0.1:0"}, nil)
	env := map[string]string{"OFFSETD_ADDR": s.url}
	mustRun(t, 0, env, "static", "create", "-scope", "clusterA", "-queues", "4", "-brokers", "b1,b2", "T")
	mustRun(t, 0, env, "static", "remap", "-scope", "clusterA", "T", "0:b3:12345")

	// Export, and import the file back: nothing changes.
	exported := mustRun(t, 0, env, "static", "export", "-scope", "clusterA", "T")
	var details []statictopic.Detail
	if err := json.Unmarshal([]byte(exported), &details); err != nil || len(details) != 3 || details[0].Bname != "b1" {
		t.Fatalf("export: %v\n%s", err, exported)
	}
	file := writeFile(t, "t.json", exported, 0o600)
	var m statictopic.Mapping
	if err := json.Unmarshal([]byte(mustRun(t, 0, env, "static", "import", "-o", "json", file)), &m); err != nil || len(m.Queues[0]) != 2 {
		t.Fatalf("import: %v %+v", err, m)
	}
	// A rewritten sealed item is refused, unless forced.
	details[0].Epoch += 1000
	details[1].Epoch += 1000
	details[2].Epoch += 1000
	for i := range details {
		if items, ok := details[i].HostedQueues[0]; ok {
			items[0].EndOffset = 12000
		}
	}
	b, _ := json.Marshal(details)
	rewritten := writeFile(t, "rewritten.json", string(b), 0o600)
	if out := mustRun(t, 1, env, "static", "import", rewritten); !strings.Contains(out, "sealed_history") {
		t.Fatalf("rewriting import: %s", out)
	}
	mustRun(t, 0, env, "static", "import", "-force", rewritten)
	// RocketMQ's own shape, with an open old leader.
	rocket, err := os.ReadFile("../../statictopic/testdata/rocketmq_remapped.json")
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, env, "static", "import", writeFile(t, "rocket.json", string(rocket), 0o600))

	// Remap to a broker set: dry run, then apply with its epoch and offsets.
	plan := mustRun(t, 0, env, "static", "remap", "-scope", "clusterA", "-brokers", "b1,b2", "-dry-run", "T")
	hint := regexp.MustCompile(`apply with: -if-epoch (\d+) -max-offsets 0=N`).FindStringSubmatch(plan)
	if hint == nil || !regexp.MustCompile(`(?m)^0\s+b[12]\s+needed$`).MatchString(plan) {
		t.Fatalf("dry run:\n%s", plan)
	}
	if out := mustRun(t, 1, env, "static", "remap", "-scope", "clusterA", "-brokers", "b1,b2", "-if-epoch", hint[1], "T"); !strings.Contains(out, "max offset") {
		t.Fatalf("apply without max offsets: %s", out)
	}
	mustRun(t, 0, env, "static", "remap", "-scope", "clusterA", "-brokers", "b1,b2", "-if-epoch", hint[1], "-max-offsets", "0=40", "T")

	// Trim: refused while a group reads b1's item, done once it moved on.
	mustRun(t, 0, env, "commit", "slow", "T", "0", "100")
	readers := mustRun(t, 0, env, "static", "describe", "-scope", "clusterA", "-groups", "T")
	if !regexp.MustCompile(`(?m)^0\s+0\s+b1\s+0\s+0\s+12000\s+slow@100$`).MatchString(readers) {
		t.Fatalf("describe -groups:\n%s", readers)
	}
	if out := mustRun(t, 1, env, "static", "trim", "-scope", "clusterA", "-below", "20040", "T"); !strings.Contains(out, `"slow"`) {
		t.Fatalf("trim under a reader: %s", out)
	}
	mustRun(t, 0, env, "commit", "slow", "T", "0", "20040")
	mustRun(t, 0, env, "static", "trim", "-scope", "clusterA", "-below", "20040", "T")
	check := func() {
		t.Helper()
		readers := mustRun(t, 0, env, "static", "describe", "-scope", "clusterA", "-groups", "T")
		if regexp.MustCompile(`(?m)^0\s+[01]\s`).MatchString(readers) ||
			!regexp.MustCompile(`(?m)^0\s+2\s+b[12]\s+\d+\s+30000\s+open\s+slow@20040$`).MatchString(readers) {
			t.Fatalf("describe -groups after the trim:\n%s", readers)
		}
	}
	check()
	if code := s.stop(); code != 0 {
		t.Fatalf("serve exited with %d", code)
	}
	s = startServe(t, []string{"serve", "-data", data, "-listen", "127.0.0.1:0"}, nil)
	env["OFFSETD_ADDR"] = s.url
	check()

	for _, args := range [][]string{
		{"static", "remap", "-scope", "clusterA", "-brokers", "b1", "-dry-run", "-if-epoch", "5", "T"},
		{"static", "remap", "-scope", "clusterA", "-brokers", "b1", "-max-offsets", "0:5", "T"},
		{"static", "remap", "-scope", "clusterA", "-brokers", "b1", "T", "0:b3:1"},
		{"static", "trim", "-scope", "clusterA", "T"},
		{"static", "trim", "-scope", "clusterA", "-below", "5", "-queues", "x", "T"},
		{"static", "describe", "-groups"},
		{"static", "import"},
	} {
		mustRun(t, 2, env, args...)
	}
}
