package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/offsetd/offsetd/server"
)

// Every bad request gets the right 4xx with an error body, the server
// stays up, and nothing is written.
func TestBadInput(t *testing.T) {
	e := newEnv(t, envConfig{})
	const commit = "/v1/groups/g/offsets"
	long := strings.Repeat("x", 256)
	manyOffsets := `{"offsets":[` + strings.Repeat(`{"topic":"t","partition":0,"offset":1},`, 10000) + `{"topic":"t","partition":0,"offset":1}]}`
	cases := []struct {
		name                string
		method, path, body  string
		status              int
		code                string
		header, headerValue string
		wantAllow           string
	}{
		// Malformed and truncated JSON.
		{name: "unclosed object", method: "POST", path: commit, body: `{`, status: 400, code: "malformed_json"},
		{name: "truncated", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":4`, status: 400, code: "malformed_json"},
		{name: "not JSON", method: "POST", path: commit, body: `offsets=1`, status: 400, code: "malformed_json"},
		{name: "empty body", method: "POST", path: commit, body: ``, status: 400, code: "malformed_json"},
		{name: "blank body", method: "POST", path: commit, body: "  \n", status: 400, code: "malformed_json"},
		{name: "two objects", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":1}]} {}`, status: 400, code: "malformed_json"},
		{name: "trailing garbage", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":1}]}x`, status: 400, code: "malformed_json"},
		{name: "single quotes", method: "POST", path: commit, body: `{'offsets':[]}`, status: 400, code: "malformed_json"},
		{name: "invalid UTF-8 in body", method: "POST", path: commit, body: "{\"offsets\":[{\"topic\":\"t\xff\",\"partition\":0,\"offset\":1}]}", status: 400, code: "malformed_json"},
		// Wrong types and numbers out of range.
		{name: "array body", method: "POST", path: commit, body: `[1,2]`, status: 400, code: "wrong_type"},
		{name: "offset as string", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":"42"}]}`, status: 400, code: "wrong_type"},
		{name: "partition as bool", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":true,"offset":1}]}`, status: 400, code: "wrong_type"},
		{name: "offsets as object", method: "POST", path: commit, body: `{"offsets":{"topic":"t"}}`, status: 400, code: "wrong_type"},
		{name: "fractional generation", method: "POST", path: commit, body: `{"generation":1.5,"offsets":[{"topic":"t","partition":0,"offset":1}]}`, status: 400, code: "wrong_type"},
		{name: "huge offset", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":99999999999999999999}]}`, status: 400, code: "wrong_type"},
		{name: "exponent offset", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":1e3}]}`, status: 400, code: "wrong_type"},
		{name: "partition over int32", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":2147483648,"offset":1}]}`, status: 400, code: "wrong_type"},
		{name: "topic as number", method: "POST", path: commit, body: `{"offsets":[{"topic":7,"partition":0,"offset":1}]}`, status: 400, code: "wrong_type"},
		// Unknown and missing fields.
		{name: "unknown top-level field", method: "POST", path: commit, body: `{"group":"g","offsets":[{"topic":"t","partition":0,"offset":1}]}`, status: 400, code: "unknown_field"},
		{name: "misspelt field", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partiton":0,"offset":1}]}`, status: 400, code: "unknown_field"},
		{name: "field in the wrong case", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"Offset":1}]}`, status: 400, code: "unknown_field"},
		{name: "field given twice", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":1,"offset":2}]}`, status: 400, code: "malformed_json"},
		{name: "queue given twice", method: "PUT", path: "/v1/static-topics/T", body: `{"version":"1","topic":"T","scope":"c1","totalQueues":1,"epoch":1,"bname":"__logic__c1","queues":{"0":[],"0":[]}}`, status: 400, code: "malformed_json"},
		{name: "no offsets field", method: "POST", path: commit, body: `{}`, status: 400, code: "missing_field"},
		{name: "null body", method: "POST", path: commit, body: `null`, status: 400, code: "missing_field"},
		{name: "missing offset", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0}]}`, status: 400, code: "missing_field"},
		{name: "null offset", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":null}]}`, status: 400, code: "missing_field"},
		{name: "missing topic", method: "POST", path: commit, body: `{"offsets":[{"partition":0,"offset":1}]}`, status: 400, code: "missing_field"},
		// Values the coordinator refuses.
		{name: "negative partition", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":-1,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "negative offset", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":-2}]}`, status: 400, code: "invalid_argument"},
		{name: "generation below -1", method: "POST", path: commit, body: `{"generation":-2,"offsets":[{"topic":"t","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "leader epoch below -1", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":1,"leaderEpoch":-5}]}`, status: 400, code: "invalid_argument"},
		{name: "empty topic", method: "POST", path: commit, body: `{"offsets":[{"topic":"","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "oversized topic", method: "POST", path: commit, body: `{"offsets":[{"topic":"` + long + `","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "oversized group", method: "POST", path: "/v1/groups/" + long + "/offsets", body: `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "empty group", method: "POST", path: "/v1/groups//offsets", body: `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "dot group", method: "POST", path: "/v1/groups/../offsets", body: `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "invalid UTF-8 group", method: "POST", path: "/v1/groups/%FF/offsets", body: `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "no offsets", method: "POST", path: commit, body: `{"offsets":[]}`, status: 400, code: "invalid_argument"},
		{name: "too many offsets", method: "POST", path: commit, body: manyOffsets, status: 400, code: "invalid_argument"},
		// Escapes of lone UTF-16 surrogates: encoding/json would decode
		// each to U+FFFD, so different names would share one key.
		{name: "lone high surrogate in topic", method: "POST", path: commit, body: `{"offsets":[{"topic":"\ud800","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "lone low surrogate in topic", method: "POST", path: commit, body: `{"offsets":[{"topic":"\udc00","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "high surrogate before a letter", method: "POST", path: commit, body: `{"offsets":[{"topic":"a\ud800\u0041","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "surrogate pair reversed", method: "POST", path: commit, body: `{"offsets":[{"topic":"\ude00\ud83d","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "lone surrogate in metadata", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":1,"metadata":"m\udfff"}]}`, status: 400, code: "invalid_argument"},
		{name: "lone surrogate in a broker", method: "POST", path: "/v1/static-topics", body: `{"topic":"T","scope":"c1","totalQueues":1,"brokers":["b\ud800"]}`, status: 400, code: "invalid_argument"},
		{name: "lone surrogate in a move", method: "POST", path: "/v1/static-topics/T/remap", body: `{"scope":"c1","moves":[{"queueId":0,"toBroker":"\udbff","oldLeaderMaxOffset":1}]}`, status: 400, code: "invalid_argument"},
		{name: "lone surrogate in a mapping", method: "PUT", path: "/v1/static-topics/T", body: `{"version":"1","topic":"T","scope":"c1","totalQueues":1,"epoch":1,"bname":"__logic__c1","queues":{"0":[{"gen":0,"queueId":0,"bname":"b\ud800","logicOffset":0,"startOffset":0,"endOffset":-1,"timeOfStart":1,"timeOfEnd":-1}]}}`, status: 400, code: "invalid_argument"},
		{name: "metadata over limit", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":1,"metadata":"` + strings.Repeat("m", 4097) + `"}]}`, status: 400, code: "invalid_argument"},
		{name: "unknown query parameter on commit", method: "POST", path: commit + "?sync=no", body: `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`, status: 400, code: "invalid_argument"},
		// Batches of commits: a body that does not decode is refused
		// whole; a commit the coordinator refuses fails alone (TestCommitMany).
		{name: "batch not JSON", method: "POST", path: "/v1/commits", body: `{"commits":[`, status: 400, code: "malformed_json"},
		{name: "batch without commits", method: "POST", path: "/v1/commits", body: `{}`, status: 400, code: "missing_field"},
		{name: "batch commit without group", method: "POST", path: "/v1/commits", body: `{"commits":[{"group":"a","offsets":[{"topic":"t","partition":0,"offset":1}]},{"offsets":[{"topic":"t","partition":0,"offset":1}]}]}`, status: 400, code: "missing_field"},
		{name: "batch commit without offsets", method: "POST", path: "/v1/commits", body: `{"commits":[{"group":"a","offsets":[{"topic":"t","partition":0,"offset":1}]},{"group":"b"}]}`, status: 400, code: "missing_field"},
		{name: "batch commit with a bad offset", method: "POST", path: "/v1/commits", body: `{"commits":[{"group":"a","offsets":[{"topic":"t","partition":0,"offset":1}]},{"group":"b","offsets":[{"topic":"t","partition":0,"offset":"1"}]}]}`, status: 400, code: "wrong_type"},
		{name: "batch with an unknown field", method: "POST", path: "/v1/commits", body: `{"commits":[{"group":"a","offsets":[{"topic":"t","partition":0,"offset":1}],"sync":false}]}`, status: 400, code: "unknown_field"},
		{name: "batch too large", method: "POST", path: "/v1/commits", body: `{"commits":[` + strings.Repeat(`{"group":"a","offsets":[{"topic":"t","partition":0,"offset":1}]},`, server.MaxCommitsPerRequest) + `{"group":"a","offsets":[{"topic":"t","partition":0,"offset":1}]}]}`, status: 400, code: "invalid_argument"},
		{name: "GET commits", method: "GET", path: "/v1/commits", status: 405, code: "method_not_allowed", wantAllow: "POST"},
		// Bodies over the limit.
		{name: "body over 1 MiB", method: "POST", path: commit, body: `{"offsets":[{"topic":"t","partition":0,"offset":1,"metadata":"` + strings.Repeat("m", 1<<20) + `"}]}`, status: 413, code: "body_too_large"},
		// Wrong methods and routes.
		{name: "PATCH offsets", method: "PATCH", path: commit, body: `{}`, status: 405, code: "method_not_allowed", wantAllow: "GET, HEAD, POST"},
		{name: "PUT offsets", method: "PUT", path: commit, body: `{}`, status: 405, code: "method_not_allowed", wantAllow: "GET, HEAD, POST"},
		{name: "DELETE group list", method: "DELETE", path: "/v1/groups", status: 405, code: "method_not_allowed", wantAllow: "GET, HEAD"},
		{name: "GET a group", method: "GET", path: "/v1/groups/g", status: 405, code: "method_not_allowed", wantAllow: "DELETE"},
		{name: "POST healthz", method: "POST", path: "/healthz", body: `{}`, status: 405, code: "method_not_allowed", wantAllow: "GET, HEAD"},
		{name: "unknown route", method: "GET", path: "/v1/nope", status: 404, code: "not_found"},
		{name: "unknown version", method: "GET", path: "/v2/groups", status: 404, code: "not_found"},
		// Bad query and path values.
		{name: "partition=abc in path", method: "GET", path: commit + "/t/abc", status: 400, code: "invalid_argument"},
		{name: "negative partition in path", method: "GET", path: commit + "/t/-1", status: 400, code: "invalid_argument"},
		{name: "partition over int32 in path", method: "GET", path: commit + "/t/99999999999", status: 400, code: "invalid_argument"},
		{name: "wait=forever", method: "GET", path: commit + "?wait=forever", status: 400, code: "invalid_argument"},
		{name: "negative wait", method: "GET", path: commit + "?wait=-1s", status: 400, code: "invalid_argument"},
		{name: "wait without unit", method: "GET", path: commit + "?wait=30", status: 400, code: "invalid_argument"},
		{name: "misspelt query parameter", method: "GET", path: commit + "?wiat=1s", status: 400, code: "invalid_argument"},
		{name: "repeated query parameter", method: "GET", path: commit + "?topic=a&topic=b", status: 400, code: "invalid_argument"},
		{name: "empty topic filter", method: "GET", path: commit + "?topic=", status: 400, code: "invalid_argument"},
		{name: "bad query escape", method: "GET", path: commit + "?topic=%zz", status: 400, code: "invalid_argument"},
		{name: "delete partition=abc", method: "DELETE", path: commit + "/t?partition=abc", status: 400, code: "invalid_argument"},
		{name: "delete negative partition", method: "DELETE", path: commit + "/t?partition=-3", status: 400, code: "invalid_argument"},
		// Static topics and scopes.
		{name: "totalQueues as string", method: "POST", path: "/v1/static-topics", body: `{"topic":"T","scope":"c1","totalQueues":"4","brokers":["b1"]}`, status: 400, code: "wrong_type"},
		{name: "zero totalQueues", method: "POST", path: "/v1/static-topics", body: `{"topic":"T","scope":"c1","totalQueues":0,"brokers":["b1"]}`, status: 400, code: "invalid_argument"},
		{name: "too many queues", method: "POST", path: "/v1/static-topics", body: `{"topic":"T","scope":"c1","totalQueues":70000,"brokers":["b1"]}`, status: 400, code: "invalid_argument"},
		{name: "bad scope name", method: "POST", path: "/v1/static-topics", body: `{"topic":"T","scope":"a_b","totalQueues":4,"brokers":["b1"]}`, status: 400, code: "invalid_argument"},
		{name: "missing brokers", method: "POST", path: "/v1/static-topics", body: `{"topic":"T","scope":"c1","totalQueues":4}`, status: 400, code: "missing_field"},
		{name: "logic broker as broker", method: "POST", path: "/v1/static-topics", body: `{"topic":"T","scope":"c1","totalQueues":4,"brokers":["__logic__c1"]}`, status: 400, code: "invalid_argument"},
		{name: "unknown create field", method: "POST", path: "/v1/static-topics", body: `{"topic":"T","scope":"c1","queues":4,"brokers":["b1"]}`, status: 400, code: "unknown_field"},
		{name: "remap without queueId", method: "POST", path: "/v1/static-topics/T/remap", body: `{"scope":"c1","moves":[{"toBroker":"b2","oldLeaderMaxOffset":1}]}`, status: 400, code: "missing_field"},
		{name: "mapping with a non-numeric queue", method: "PUT", path: "/v1/static-topics/T", body: `{"version":"1","topic":"T","scope":"c1","totalQueues":1,"epoch":1,"bname":"__logic__c1","queues":{"x":[]}}`, status: 400, code: "wrong_type"},
		{name: "mapping with unknown field", method: "PUT", path: "/v1/static-topics/T", body: `{"version":"1","topic":"T","owner":"me"}`, status: 400, code: "unknown_field"},
		{name: "empty mapping", method: "PUT", path: "/v1/static-topics/T", body: `{}`, status: 400, code: "invalid_argument"},
		{name: "enabled as string", method: "PUT", path: "/v1/scopes/c1/global-read", body: `{"enabled":"yes"}`, status: 400, code: "wrong_type"},
		{name: "enabled missing", method: "PUT", path: "/v1/scopes/c1/global-read", body: `{}`, status: 400, code: "missing_field"},
		{name: "global-read on a bad scope", method: "PUT", path: "/v1/scopes/a%20b/global-read", body: `{"enabled":true}`, status: 400, code: "invalid_argument"},
		{name: "translate queueId=abc", method: "GET", path: "/v1/static-topics/T/translate?scope=c1&queueId=abc&logicOffset=1", status: 400, code: "invalid_argument"},
		{name: "translate logicOffset=1e3", method: "GET", path: "/v1/static-topics/T/translate?scope=c1&queueId=0&logicOffset=1e3", status: 400, code: "invalid_argument"},
		{name: "route without scope", method: "GET", path: "/v1/static-topics/T/route?role=consumer", status: 400, code: "invalid_argument"},
		{name: "route wait=forever", method: "GET", path: "/v1/static-topics/T/route?scope=c1&role=consumer&wait=forever", status: 400, code: "invalid_argument"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.method, c.path, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.status, c.status, r.body)
			}
			if code := r.errorCode(t); code != c.code {
				t.Fatalf("code %q, want %q; body %s", code, c.code, r.body)
			}
			if c.wantAllow != "" && r.header.Get("Allow") != c.wantAllow {
				t.Fatalf("Allow %q, want %q", r.header.Get("Allow"), c.wantAllow)
			}
		})
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	e.must(http.StatusOK, "GET", "/healthz", "")
	e.assertEmpty()
	// And the server still works.
	e.must(http.StatusOK, "POST", commit, `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
	if g := e.groupOffsets("g"); len(g.Offsets) != 1 {
		t.Fatalf("after the bad input: %+v", g)
	}
}

func TestBodyLimitOption(t *testing.T) {
	e := newEnv(t, envConfig{server: func(o *server.Options) { o.MaxBodyBytes = 64 }})
	body := fmt.Sprintf(`{"offsets":[{"topic":"t","partition":0,"offset":1,"metadata":%q}]}`, strings.Repeat("m", 64))
	e.fail(http.StatusRequestEntityTooLarge, "body_too_large", "POST", "/v1/groups/g/offsets", body)
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`)
}
