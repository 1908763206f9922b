package server_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/offsetd/offsetd/statictopic"
)

func (e *env) mapping(topic, scope string) (statictopic.Mapping, string) {
	e.t.Helper()
	var m statictopic.Mapping
	r := e.must(http.StatusOK, "GET", "/v1/static-topics/"+topic+"?scope="+scope, "")
	r.decode(e.t, &m)
	return m, r.header.Get("ETag")
}

func (e *env) route(topic, scope, role string) (statictopic.Route, string) {
	e.t.Helper()
	var rt statictopic.Route
	r := e.must(http.StatusOK, "GET", "/v1/static-topics/"+topic+"/route?scope="+scope+"&role="+role, "")
	r.decode(e.t, &rt)
	return rt, r.header.Get("ETag")
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestStaticTopicLifecycle(t *testing.T) {
	e := newEnv(t, envConfig{})
	var created statictopic.Mapping
	r := e.must(http.StatusOK, "POST", "/v1/static-topics", `{"topic":"TopicTest","scope":"clusterA","totalQueues":4,"brokers":["b1","b2"]}`)
	r.decode(t, &created)
	if created.Topic != "TopicTest" || created.Scope != "clusterA" || created.Bname != "__logic__clusterA" ||
		created.TotalQueues != 4 || len(created.Queues) != 4 || created.Version != statictopic.MappingVersion {
		t.Fatalf("created %+v", created)
	}
	if et := r.header.Get("ETag"); et != strconv.Quote(strconv.FormatInt(created.Epoch, 10)) {
		t.Fatalf("create ETag %s for epoch %d", et, created.Epoch)
	}
	// Creating again with the same count changes nothing.
	var again statictopic.Mapping
	e.must(http.StatusOK, "POST", "/v1/static-topics", `{"topic":"TopicTest","scope":"clusterA","totalQueues":4,"brokers":["b1","b2"]}`).decode(t, &again)
	if !again.Equal(created) {
		t.Fatalf("repeated create changed the mapping: %+v", again)
	}
	got, etag := e.mapping("TopicTest", "clusterA")
	if !got.Equal(created) || etag != strconv.Quote(strconv.FormatInt(created.Epoch, 10)) {
		t.Fatalf("GET mapping %+v (ETag %s)", got, etag)
	}
	e.fail(http.StatusNotFound, "not_found", "GET", "/v1/static-topics/TopicTest?scope=clusterB", "")
	e.fail(http.StatusBadRequest, "invalid_argument", "GET", "/v1/static-topics/TopicTest", "")
	e.fail(http.StatusBadRequest, "invalid_argument", "POST", "/v1/static-topics", `{"topic":"TopicTest","scope":"clusterA","totalQueues":2,"brokers":["b1"]}`)
	e.fail(http.StatusConflict, "scope_conflict", "POST", "/v1/static-topics", `{"topic":"TopicTest","scope":"global","totalQueues":2,"brokers":["b1"]}`)
	// The same count on other brokers: refused, the mapping unchanged.
	e.fail(http.StatusConflict, "topic_exists", "POST", "/v1/static-topics", `{"topic":"TopicTest","scope":"clusterA","totalQueues":4,"brokers":["b3","b4"]}`)
	if got, _ := e.mapping("TopicTest", "clusterA"); !got.Equal(created) {
		t.Fatalf("a refused create changed the mapping: %+v", got)
	}

	// Grow.
	var grown statictopic.Mapping
	e.must(http.StatusOK, "POST", "/v1/static-topics", `{"topic":"TopicTest","scope":"clusterA","totalQueues":6,"brokers":["b1","b2"]}`).decode(t, &grown)
	if grown.TotalQueues != 6 || grown.Epoch <= created.Epoch {
		t.Fatalf("grown %+v", grown)
	}

	// Remap queue 0 after its leader held 12,345 messages: the new item
	// starts at logic offset 20,000.
	old := grown.Queues[0][0]
	var remapped statictopic.Mapping
	e.must(http.StatusOK, "POST", "/v1/static-topics/TopicTest/remap",
		`{"scope":"clusterA","moves":[{"queueId":0,"toBroker":"b3","oldLeaderMaxOffset":12345}]}`).decode(t, &remapped)
	items := remapped.Queues[0]
	if len(items) != 2 || items[0].EndOffset != 12345 || items[1].Broker != "b3" || items[1].LogicOffset != 20000 || items[1].Gen != 1 {
		t.Fatalf("remapped queue 0: %+v", items)
	}
	e.fail(http.StatusNotFound, "not_found", "POST", "/v1/static-topics/Nope/remap",
		`{"scope":"clusterA","moves":[{"queueId":0,"toBroker":"b3","oldLeaderMaxOffset":1}]}`)
	e.fail(http.StatusBadRequest, "invalid_argument", "POST", "/v1/static-topics/TopicTest/remap",
		`{"scope":"clusterA","moves":[]}`)

	// Translation before and after the move, both ways.
	var phys struct {
		Broker          string `json:"broker"`
		PhysicalQueueID int32  `json:"physicalQueueId"`
		PhysicalOffset  int64  `json:"physicalOffset"`
	}
	e.must(http.StatusOK, "GET", "/v1/static-topics/TopicTest/translate?scope=clusterA&queueId=0&logicOffset=100", "").decode(t, &phys)
	if phys.Broker != old.Broker || phys.PhysicalQueueID != old.QueueID || phys.PhysicalOffset != 100 {
		t.Fatalf("translate 100: %+v, want on %s-%d", phys, old.Broker, old.QueueID)
	}
	e.must(http.StatusOK, "GET", "/v1/static-topics/TopicTest/translate?scope=clusterA&queueId=0&logicOffset=20005", "").decode(t, &phys)
	if phys.Broker != "b3" || phys.PhysicalQueueID != items[1].QueueID || phys.PhysicalOffset != 5 {
		t.Fatalf("translate 20005: %+v", phys)
	}
	var gap struct {
		NextLogicOffset *int64 `json:"nextLogicOffset"`
	}
	e.fail(http.StatusNotFound, "out_of_range", "GET", "/v1/static-topics/TopicTest/translate?scope=clusterA&queueId=0&logicOffset=15000", "").decode(t, &gap)
	if gap.NextLogicOffset == nil || *gap.NextLogicOffset != 20000 {
		t.Fatalf("translate in the gap: nextLogicOffset %v, want 20000", gap.NextLogicOffset)
	}
	e.fail(http.StatusNotFound, "not_found", "GET", "/v1/static-topics/TopicTest/translate?scope=clusterA&queueId=99&logicOffset=1", "")
	var logic struct {
		QueueID     int32 `json:"queueId"`
		LogicOffset int64 `json:"logicOffset"`
	}
	e.must(http.StatusOK, "GET", "/v1/static-topics/TopicTest/translate?scope=clusterA&broker=b3&physicalQueueId="+
		strconv.Itoa(int(items[1].QueueID))+"&physicalOffset=5", "").decode(t, &logic)
	if logic.QueueID != 0 || logic.LogicOffset != 20005 {
		t.Fatalf("translate back: %+v", logic)
	}
	e.fail(http.StatusBadRequest, "invalid_argument", "GET", "/v1/static-topics/TopicTest/translate?scope=clusterA&queueId=0&logicOffset=1&broker=b3", "")

	// PUT a whole mapping: fenced by epoch.
	current, _ := e.mapping("TopicTest", "clusterA")
	e.must(http.StatusNoContent, "PUT", "/v1/static-topics/TopicTest", mustJSON(t, current)) // equal epoch, same content
	changed := current.Clone()
	changed.Queues[1][0].TimeOfStart++
	e.fail(http.StatusConflict, "epoch_conflict", "PUT", "/v1/static-topics/TopicTest", mustJSON(t, changed))
	changed.Epoch--
	e.fail(http.StatusConflict, "stale_epoch", "PUT", "/v1/static-topics/TopicTest", mustJSON(t, changed))
	changed.Epoch += 2
	e.must(http.StatusNoContent, "PUT", "/v1/static-topics/TopicTest", mustJSON(t, changed))
	if got, _ := e.mapping("TopicTest", "clusterA"); !got.Equal(changed) {
		t.Fatalf("after PUT: %+v", got)
	}
	e.fail(http.StatusBadRequest, "invalid_argument", "PUT", "/v1/static-topics/Other", mustJSON(t, changed))
	bad := changed.Clone()
	bad.Epoch++
	bad.Bname = "__logic__clusterB"
	e.fail(http.StatusBadRequest, "invalid_argument", "PUT", "/v1/static-topics/TopicTest", mustJSON(t, bad))

	// The list, filtered by scope.
	var list struct {
		StaticTopics []statictopic.Mapping `json:"staticTopics"`
	}
	e.must(http.StatusOK, "GET", "/v1/static-topics", "").decode(t, &list)
	if len(list.StaticTopics) != 1 || list.StaticTopics[0].Topic != "TopicTest" {
		t.Fatalf("list %+v", list)
	}
	e.must(http.StatusOK, "GET", "/v1/static-topics?scope=clusterB", "").decode(t, &list)
	if len(list.StaticTopics) != 0 {
		t.Fatalf("list in clusterB %+v", list)
	}
	e.fail(http.StatusBadRequest, "invalid_argument", "GET", "/v1/static-topics?scope=a_b", "")
}

// The multi-active scenario of the static topics issue, over HTTP.
func TestRoutesAndGlobalRead(t *testing.T) {
	e := newEnv(t, envConfig{})
	for _, scope := range []string{"clusterA", "clusterB"} {
		e.must(http.StatusOK, "POST", "/v1/static-topics",
			`{"topic":"TopicTest","scope":"`+scope+`","totalQueues":50,"brokers":["b1","b2"]}`)
	}
	check := func(scope, role string, want int) string {
		t.Helper()
		rt, etag := e.route("TopicTest", scope, role)
		if rt.Topic != "TopicTest" || len(rt.Queues) != want {
			t.Fatalf("%s %s sees %d queues, want %d", scope, role, len(rt.Queues), want)
		}
		if q := rt.Queues[0]; q.BrokerName == "" || q.Broker == "" {
			t.Fatalf("route queue %+v", q)
		}
		return etag
	}
	consumerB := check("clusterB", "consumer", 50)
	producerB := check("clusterB", "producer", 50)
	check("clusterA", "consumer", 50)

	var sw struct {
		Scope      string `json:"scope"`
		GlobalRead bool   `json:"globalRead"`
	}
	e.must(http.StatusOK, "PUT", "/v1/scopes/clusterA/global-read", `{"enabled":true}`).decode(t, &sw)
	if sw.Scope != "clusterA" || !sw.GlobalRead {
		t.Fatalf("switch answer %+v", sw)
	}
	// A switch changes no epoch, yet the consumer's route and its ETag change.
	if etag := check("clusterB", "consumer", 100); etag == consumerB {
		t.Fatalf("route ETag %s unchanged by the global-read switch", etag)
	}
	check("clusterB", "producer", 50)

	var scopes struct {
		Scopes []struct {
			Scope      string `json:"scope"`
			BrokerName string `json:"brokerName"`
			GlobalRead bool   `json:"globalRead"`
			Topics     int    `json:"topics"`
		} `json:"scopes"`
	}
	e.must(http.StatusOK, "GET", "/v1/scopes", "").decode(t, &scopes)
	if len(scopes.Scopes) != 2 || scopes.Scopes[0].Scope != "clusterA" || !scopes.Scopes[0].GlobalRead ||
		scopes.Scopes[0].BrokerName != "__logic__clusterA" || scopes.Scopes[0].Topics != 1 || scopes.Scopes[1].GlobalRead {
		t.Fatalf("scopes %+v", scopes)
	}

	e.must(http.StatusOK, "PUT", "/v1/scopes/clusterA/global-read", `{"enabled":false}`)
	check("clusterB", "consumer", 50)
	if etag := check("clusterB", "producer", 50); etag != producerB {
		t.Fatalf("producer ETag %s → %s: switches never change a producer's route", producerB, etag)
	}
	e.fail(http.StatusBadRequest, "invalid_argument", "PUT", "/v1/scopes/global/global-read", `{"enabled":true}`)
	e.fail(http.StatusBadRequest, "invalid_argument", "GET", "/v1/static-topics/TopicTest/route?scope=clusterB&role=admin", "")
	e.fail(http.StatusBadRequest, "invalid_argument", "GET", "/v1/static-topics/TopicTest/route?scope=clusterB", "")
	e.fail(http.StatusNotFound, "not_found", "GET", "/v1/static-topics/TopicTest/route?scope=clusterC&role=consumer", "")
	e.fail(http.StatusNotFound, "not_found", "GET", "/v1/static-topics/Nope/route?scope=clusterA&role=consumer", "")
}

// A mapping imported into another scope with a lower epoch changes what a
// consumer of a scope in global read sees, without raising the route's
// epoch or the switches' version: the route's ETag must still change.
func TestRouteETagFollowsContent(t *testing.T) {
	e := newEnv(t, envConfig{})
	var b statictopic.Mapping
	e.must(http.StatusOK, "POST", "/v1/static-topics", `{"topic":"T","scope":"clusterB","totalQueues":2,"brokers":["b1"]}`).decode(t, &b)
	// clusterA has no topic yet: its switch is prepared with force.
	e.must(http.StatusOK, "PUT", "/v1/scopes/clusterA/global-read", `{"enabled":true,"force":true}`)
	before, etag := e.route("T", "clusterB", "consumer")

	a := statictopic.Mapping{
		Version: statictopic.MappingVersion, Topic: "T", Scope: "clusterA", Bname: "__logic__clusterA",
		TotalQueues: 1, Epoch: 5,
		Queues: map[int32][]statictopic.MappingItem{0: {{Gen: 0, QueueID: 0, Broker: "a1", EndOffset: -1, TimeOfEnd: -1}}},
	}
	e.must(http.StatusNoContent, "PUT", "/v1/static-topics/T", mustJSON(t, a))
	after, etag2 := e.route("T", "clusterB", "consumer")
	if after.Epoch != before.Epoch || len(after.Queues) != 3 {
		t.Fatalf("route after import: epoch %d (was %d), %d queues", after.Epoch, before.Epoch, len(after.Queues))
	}
	if etag2 == etag {
		t.Fatalf("route changed but its ETag %s did not", etag)
	}
	e.must(http.StatusNotModified, "GET", "/v1/static-topics/T/route?scope=clusterB&role=consumer", "", "If-None-Match", etag2)
	e.must(http.StatusOK, "GET", "/v1/static-topics/T/route?scope=clusterB&role=consumer", "", "If-None-Match", etag)
}

// The global-read switch of a scope without a static topic is most likely
// a misspelt scope: 404, unless forced. A switch that is on can always be
// turned off.
func TestGlobalReadOfScopeWithoutTopic(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.fail(http.StatusNotFound, "not_found", "PUT", "/v1/scopes/nosuch/global-read", `{"enabled":true}`)
	e.fail(http.StatusNotFound, "not_found", "PUT", "/v1/scopes/nosuch/global-read", `{"enabled":false}`)
	var scopes struct{ Scopes []json.RawMessage }
	e.must(http.StatusOK, "GET", "/v1/scopes", "").decode(t, &scopes)
	if len(scopes.Scopes) != 0 {
		t.Fatalf("a refused switch left scopes %+v", scopes.Scopes)
	}
	e.must(http.StatusOK, "PUT", "/v1/scopes/nosuch/global-read", `{"enabled":true,"force":true}`)
	e.must(http.StatusOK, "PUT", "/v1/scopes/nosuch/global-read", `{"enabled":false}`)
	e.must(http.StatusOK, "POST", "/v1/static-topics", `{"topic":"T","scope":"clusterA","totalQueues":1,"brokers":["b1"]}`)
	e.must(http.StatusOK, "PUT", "/v1/scopes/clusterA/global-read", `{"enabled":true}`)
}
