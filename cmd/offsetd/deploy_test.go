package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDeployEnv checks deploy/offsetd.env against offsetd serve: it names
// every flag's variable and no other, and its values, commented out or not,
// are accepted together.
func TestDeployEnv(t *testing.T) {
	f, err := os.Open("../../deploy/offsetd.env")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`^#?(OFFSETD_[A-Z_]+)=(.*)$`)
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			if _, ok := env[m[1]]; ok {
				t.Errorf("%s is there twice", m[1])
			}
			env[m[1]] = m[2]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	var want []string
	var usage strings.Builder
	if _, err := parseServeConfig([]string{"-h"}, envOf(nil), &usage); err == nil {
		t.Fatal("serve -h did not stop at the help")
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	for _, m := range flagLine.FindAllStringSubmatch(usage.String(), -1) {
		want = append(want, envName(m[1]))
	}
	if len(want) < 20 {
		t.Fatalf("found only %d flags in serve -h:\n%s", len(want), usage.String())
	}
	for _, name := range want {
		if _, ok := env[name]; !ok {
			t.Errorf("deploy/offsetd.env does not name %s", name)
		}
	}
	for name := range env {
		if !slices.Contains(want, name) {
			t.Errorf("deploy/offsetd.env names %s, which offsetd serve does not read", name)
		}
	}

	cfg, err := parseServeConfig(nil, envOf(env), io.Discard)
	if err != nil {
		t.Fatalf("the values of deploy/offsetd.env, all at once: %v", err)
	}
	if cfg.dataDir != "/var/lib/offsetd" {
		t.Errorf("data directory %q, want the unit's StateDirectory /var/lib/offsetd", cfg.dataDir)
	}
}

// servedMetrics returns the names of the metrics offsetd's packages
// register, from their sources.
func servedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	quoted := regexp.MustCompile(`"(offsetd_[a-z_]+)"`)
	for _, dir := range []string{"../../server", "../../kafka", "../../cluster", "."} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			src, err := os.ReadFile(dir + "/" + e.Name())
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range quoted.FindAllStringSubmatch(string(src), -1) {
				names[m[1]] = true
			}
		}
	}
	return names
}

// metricNames returns the offsetd metrics an expression text names, without
// a histogram's _bucket, _sum and _count.
func metricNames(text string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`offsetd_[a-z_]*[a-z]`).FindAllString(text, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			m = strings.TrimSuffix(m, suffix)
		}
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	return names
}

// TestDeployMetrics checks that the dashboard and the alert rules name only
// metrics offsetd serves, and with promtool on PATH that every dashboard
// query parses.
func TestDeployMetrics(t *testing.T) {
	served := servedMetrics(t)
	dashboard, err := os.ReadFile("../../deploy/grafana/offsetd.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dashboard, &dash); err != nil {
		t.Fatalf("deploy/grafana/offsetd.json: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
			for _, name := range metricNames(target.Expr) {
				if !served[name] {
					t.Errorf("dashboard panel %q: offsetd serves no %s", p.Title, name)
				}
			}
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("the dashboard has only %d queries", len(exprs))
	}
	alerts, err := os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range metricNames(string(alerts)) {
		if !served[name] {
			t.Errorf("deploy/prometheus/alerts.yml: offsetd serves no %s", name)
		}
	}

	promtool, err := osexec.LookPath("promtool")
	if err != nil {
		t.Log("no promtool: the dashboard's queries are not parsed (.ci/run installs it)")
		return
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$job", "offsetd", "$instance", ".*")
	for i, e := range exprs {
		q, _ := json.Marshal(grafana.Replace(e))
		fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", i, q)
	}
	file := t.TempDir() + "/dashboard.yml"
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := osexec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}
