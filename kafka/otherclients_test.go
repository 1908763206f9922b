package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// pythonWith returns a Python interpreter that imports module: the one on
// PATH, or Debian's, where apt-get puts python3-confluent-kafka and
// python3-kafka.
func pythonWith(module string) (string, bool) {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = exec.CommandContext(ctx, path, "-c", "import "+module).Run()
		cancel()
		if err == nil {
			return path, true
		}
	}
	return "", false
}

// confluentScript commits through librdkafka and reads back what it
// committed, then prints it as JSON.
const confluentScript = `
import json, sys
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "librdkafka-group",
              "enable.auto.commit": False, "socket.timeout.ms": 10000})
tps = [TopicPartition("orders", 0, 42), TopicPartition("orders", 1, 7), TopicPartition("payments", 3, 1000)]
c.commit(offsets=tps, asynchronous=False)
got = c.committed([TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("payments", 3), TopicPartition("orders", 9)], timeout=10)
print(json.dumps([[t.topic, t.partition, t.offset] for t in got]))
c.close()
`

// kafkaPythonScript does the same through kafka-python, a client written
// in Python.
const kafkaPythonScript = `
import json, sys
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
c = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id="kafka-python-group", enable_auto_commit=False,
                  api_version=(2, 5, 0))
c.commit({TopicPartition("orders", 0): OffsetAndMetadata(42, "from python"), TopicPartition("payments", 3): OffsetAndMetadata(1000, "")})
got = [[tp.topic, tp.partition, c.committed(tp)] for tp in [TopicPartition("orders", 0), TopicPartition("payments", 3), TopicPartition("orders", 9)]]
print(json.dumps(got))
c.close()
`

// TestOtherClientImplementations commits and fetches with Kafka clients
// that are not franz-go: librdkafka (python3-confluent-kafka) and
// kafka-python (python3-kafka). Each is skipped, saying why, when it is
// not installed.
func TestOtherClientImplementations(t *testing.T) {
	for _, c := range []struct {
		name, module, script, group string
		want                        [][3]any
	}{
		{"librdkafka", "confluent_kafka", confluentScript, "librdkafka-group",
			[][3]any{{"orders", 0, 42}, {"orders", 1, 7}, {"payments", 3, 1000}, {"orders", 9, -1001}}},
		{"kafka-python", "kafka", kafkaPythonScript, "kafka-python-group",
			[][3]any{{"orders", 0, 42}, {"payments", 3, 1000}, {"orders", 9, nil}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			py, ok := pythonWith(c.module)
			if !ok {
				t.Skipf("no Python with %s (apt-get install python3-confluent-kafka python3-kafka)", c.module)
			}
			co := openCoordinator(t, t.TempDir())
			addr := listen(t, newHandler(t, co, testHandlerOptions()), ServerOptions{})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, py, "-c", c.script, addr).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", c.name, err, out)
			}
			var got [][3]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s printed %q: %v", c.name, out, err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%s read back %v, want %v", c.name, got, c.want)
			}
			for i, w := range c.want {
				if got[i][0] != w[0] || !sameNumber(got[i][1], w[1]) || !sameNumber(got[i][2], w[2]) {
					t.Errorf("%s read back %v, want %v", c.name, got[i], w)
				}
			}
			stored, err := co.FetchGroup(c.group)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if w[2] == nil || w[2] == -1001 {
					continue
				}
				found := false
				for _, s := range stored {
					found = found || s.Topic == w[0] && int(s.Partition) == w[1] && int(s.Offset.Offset) == w[2]
				}
				if !found {
					t.Errorf("coordinator lacks %v: holds %+v", w, stored)
				}
			}
		})
	}
}

// sameNumber compares a JSON number (float64) with an int, or nil with nil.
func sameNumber(got, want any) bool {
	if want == nil {
		return got == nil
	}
	f, ok := got.(float64)
	return ok && int(f) == want.(int)
}

// confluentConsumerProtocolScript joins a group with
// group.protocol=consumer and prints the first assignment librdkafka is
// given, as JSON, or exits 3 when the librdkafka it links is older than
// 2.10, the first release that speaks the consumer protocol in general
// availability.
const confluentConsumerProtocolScript = `
import json, sys
import confluent_kafka
version = confluent_kafka.libversion()[1]
if version < 0x020a0000:
    print(confluent_kafka.libversion()[0])
    sys.exit(3)
from confluent_kafka import Consumer
assigned = []
def on_assign(consumer, partitions):
    assigned.extend([[p.topic, p.partition] for p in partitions])
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "librdkafka-848", "group.protocol": "consumer",
              "enable.auto.commit": False})
c.subscribe(["orders"], on_assign=on_assign)
while not assigned:
    c.poll(0.1)
print(json.dumps(sorted(assigned)))
c.close()
`

// TestLibrdkafkaConsumerProtocol joins a group with librdkafka's
// group.protocol=consumer and checks that offsetd's assignor hands it every
// partition. It needs librdkafka 2.10 or later; it is skipped, saying so,
// where the Python binding links an older one (Debian bookworm's 2.0.2).
func TestLibrdkafkaConsumerProtocol(t *testing.T) {
	py, ok := pythonWith("confluent_kafka")
	if !ok {
		t.Skip("no Python with confluent_kafka (apt-get install python3-confluent-kafka)")
	}
	o := testHandlerOptions()
	o.Topics = knownTopics{"orders": {TopicID("orders"), 3}}
	addr := listen(t, newHandler(t, openCoordinator(t, t.TempDir()), o), ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", confluentConsumerProtocolScript, addr).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		t.Skipf("librdkafka %s is older than 2.10, the first to speak group.protocol=consumer", bytes.TrimSpace(out))
	}
	if err != nil {
		t.Fatalf("librdkafka: %v\n%s", err, out)
	}
	var got [][2]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("librdkafka printed %q: %v", out, err)
	}
	if len(got) != 3 {
		t.Fatalf("librdkafka was assigned %v, want orders 0-2", got)
	}
	for i, tp := range got {
		if tp[0] != "orders" || !sameNumber(tp[1], i) {
			t.Fatalf("librdkafka was assigned %v, want orders 0-2", got)
		}
	}
}
