package server_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/offsetd/offsetd/server"
	"github.com/offsetd/offsetd/statictopic"
)

// TestStaticTopicTools drives the operator's static-topic routes over HTTP:
// the sealed-history fence on PUT, import and export, remap to a broker set
// (dry run and apply), trims against consumer groups, and the readers view.
func TestStaticTopicTools(t *testing.T) {
	metrics := server.NewMetrics()
	e := newEnv(t, envConfig{server: func(o *server.Options) { o.Metrics = metrics }})
	var m statictopic.Mapping
	e.must(http.StatusOK, "POST", "/v1/static-topics", `{"topic":"T","scope":"clusterA","totalQueues":4,"brokers":["b1","b2"]}`)
	e.must(http.StatusOK, "POST", "/v1/static-topics/T/remap",
		`{"scope":"clusterA","moves":[{"queueId":0,"toBroker":"b3","oldLeaderMaxOffset":12345}]}`).decode(t, &m)

	// A put that rewrites the sealed b1 item: 409 sealed_history, then forced.
	rewrite := m.Clone()
	rewrite.Epoch += 1000
	rewrite.Queues[0][0].EndOffset = 100
	body := mustJSON(t, rewrite)
	r := e.fail(http.StatusConflict, "sealed_history", "PUT", "/v1/static-topics/T", body)
	if !strings.Contains(string(r.body), "queue 0") {
		t.Errorf("refusal does not name the queue: %s", r.body)
	}
	if got, _ := e.mapping("T", "clusterA"); !got.Equal(m) {
		t.Fatal("a refused put changed the mapping")
	}
	if n := scrape(t, e)["offsetd_static_topic_forced_changes_total"]; n != 0 {
		t.Fatalf("forced changes = %v before any", n)
	}
	e.must(http.StatusNoContent, "PUT", "/v1/static-topics/T", body[:len(body)-1]+`,"force":true}`)
	if n := scrape(t, e)["offsetd_static_topic_forced_changes_total"]; n != 1 {
		t.Fatalf("forced changes = %v, want 1", n)
	}
	m, _ = e.mapping("T", "clusterA")

	// Export, then import the same details elsewhere and back.
	var exp struct {
		Details []statictopic.Detail `json:"details"`
	}
	e.must(http.StatusOK, "GET", "/v1/static-topics/T/export?scope=clusterA", "").decode(t, &exp)
	if len(exp.Details) != 3 {
		t.Fatalf("export = %+v", exp)
	}
	var imported statictopic.Mapping
	e.must(http.StatusOK, "POST", "/v1/static-topics/T/import", mustJSON(t, map[string]any{"details": exp.Details})).decode(t, &imported)
	if !imported.Equal(m) {
		t.Fatalf("re-import of the export = %+v, want %+v", imported, m)
	}
	e.fail(http.StatusBadRequest, "invalid_argument", "POST", "/v1/static-topics/Other/import", mustJSON(t, map[string]any{"details": exp.Details}))
	e.fail(http.StatusBadRequest, "missing_field", "POST", "/v1/static-topics/T/import", `{}`)
	b, err := os.ReadFile("../statictopic/testdata/rocketmq_remapped.json")
	if err != nil {
		t.Fatal(err)
	}
	e.must(http.StatusOK, "POST", "/v1/static-topics/TopicTest/import", `{"details":`+string(b)+`}`).decode(t, &imported)
	if imported.Scope != "global" || imported.Queues[0][0].EndOffset != -1 {
		t.Fatalf("RocketMQ import = %+v", imported)
	}

	// Remap to a broker set: the dry run changes nothing, the apply needs
	// the moving leaders' max offsets.
	var plan statictopic.RemapPlan
	e.must(http.StatusOK, "POST", "/v1/static-topics/T/remap", `{"scope":"clusterA","brokers":["b1","b2"],"dryRun":true}`).decode(t, &plan)
	if len(plan.Moves) != 1 || plan.Moves[0].QueueID != 0 || plan.Epoch != m.Epoch {
		t.Fatalf("plan = %+v", plan)
	}
	if got, _ := e.mapping("T", "clusterA"); !got.Equal(m) {
		t.Fatal("the dry run changed the mapping")
	}
	e.fail(http.StatusBadRequest, "invalid_argument", "POST", "/v1/static-topics/T/remap", `{"scope":"clusterA","brokers":["b1","b2"]}`)
	e.fail(http.StatusBadRequest, "invalid_argument", "POST", "/v1/static-topics/T/remap",
		`{"scope":"clusterA","brokers":["b1"],"moves":[]}`)
	e.fail(http.StatusConflict, "stale_epoch", "POST", "/v1/static-topics/T/remap",
		mustJSON(t, map[string]any{"scope": "clusterA", "brokers": []string{"b1", "b2"}, "maxOffsets": map[string]int64{"0": 5}, "ifEpoch": m.Epoch - 1}))
	var remapped statictopic.Mapping
	e.must(http.StatusOK, "POST", "/v1/static-topics/T/remap",
		mustJSON(t, map[string]any{"scope": "clusterA", "brokers": []string{"b1", "b2"}, "maxOffsets": map[string]int64{"0": 5}, "ifEpoch": m.Epoch})).decode(t, &remapped)
	if q := remapped.Queues[0]; len(q) != 3 || q[2].Broker == "b3" || q[1].EndOffset != 5 {
		t.Fatalf("queue 0 after the remap = %+v", q)
	}

	// A group still on b1's item blocks the trim until it moves on.
	e.must(http.StatusOK, "POST", "/v1/groups/slow/offsets", `{"offsets":[{"topic":"T","partition":0,"offset":50}]}`)
	var readers struct {
		Topic  string                     `json:"topic"`
		Scope  string                     `json:"scope"`
		Queues []statictopic.QueueReaders `json:"queues"`
	}
	e.must(http.StatusOK, "GET", "/v1/static-topics/T/readers?scope=clusterA", "").decode(t, &readers)
	if len(readers.Queues) != 4 || len(readers.Queues[0].Items[0].Groups) != 1 || readers.Queues[0].Items[0].Groups[0].Group != "slow" {
		t.Fatalf("readers = %+v", readers)
	}
	e.fail(http.StatusConflict, "sealed_history", "POST", "/v1/static-topics/T/trim", `{"scope":"clusterA","below":20000}`)
	e.must(http.StatusOK, "POST", "/v1/groups/slow/offsets", `{"offsets":[{"topic":"T","partition":0,"offset":100}]}`)
	var trimmed statictopic.Mapping
	e.must(http.StatusOK, "POST", "/v1/static-topics/T/trim", `{"scope":"clusterA","below":20000,"queues":[0]}`).decode(t, &trimmed)
	if len(trimmed.Queues[0]) != 2 || trimmed.Epoch <= remapped.Epoch {
		t.Fatalf("trimmed queue 0 = %+v", trimmed.Queues[0])
	}
	e.fail(http.StatusBadRequest, "missing_field", "POST", "/v1/static-topics/T/trim", `{"scope":"clusterA"}`)
	e.fail(http.StatusNotFound, "not_found", "GET", "/v1/static-topics/Nope/readers?scope=clusterA", "")
	e.fail(http.StatusNotFound, "not_found", "GET", "/v1/static-topics/Nope/export?scope=clusterA", "")
}
