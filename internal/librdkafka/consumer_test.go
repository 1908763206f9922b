//go:build cgo

package librdkafka

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// The static topic the consumers subscribe to, its scope (offsetd serve's
// -kafka-scope) and how many logic queues (Kafka partitions) it has.
const (
	topic  = "TopicTest"
	scope  = "clusterA"
	queues = 8
	group  = "librdkafka-848"
)

// TestLibrdkafkaConsumerProtocol runs librdkafka 2.11.1 consumers with
// group.protocol=consumer against offsetd serve over a static topic of its
// -kafka-scope. offsetd holds no records, so it checks what a coordinator
// does: the first consumer is assigned every logic queue; a second one
// joins and the two split them, no queue owned twice; each commits offsets
// of its own queues (OffsetCommit with its member epoch), reads them back
// (OffsetFetch) and offsetd's HTTP API shows them; when the second leaves,
// the first is assigned every queue again and reads the second's commits.
func TestLibrdkafkaConsumerProtocol(t *testing.T) {
	if v, s := kafka.LibraryVersion(); v < 0x020a0000 {
		t.Skipf("librdkafka %s is older than 2.10, the first to speak group.protocol=consumer", s)
	}
	srv := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv.post(t, "/v1/static-topics", fmt.Sprintf(`{"topic":%q,"scope":%q,"totalQueues":%d,"brokers":["b1","b2"]}`, topic, scope, queues))

	a := newConsumer(t, srv.kafka, "a")
	a.waitFor(ctx, t, func(own []int32) bool { return len(own) == queues })

	b := newConsumer(t, srv.kafka, "b")
	var ownA, ownB []int32
	for {
		ownA, ownB = a.owned(), b.owned()
		if len(ownA) == queues/2 && len(ownB) == queues/2 && !overlap(ownA, ownB) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("a owns %v, b owns %v: want %d queues each, none twice", ownA, ownB, queues/2)
		case <-time.After(50 * time.Millisecond):
		}
	}

	// Each commits an offset of each of its queues (1000+queue by a, 2000+queue
	// by b) and reads them back.
	want := map[int32]int64{}
	for _, c := range []struct {
		cons *consumer
		own  []int32
		base int64
	}{{a, ownA, 1000}, {b, ownB, 2000}} {
		var tps []kafka.TopicPartition
		for _, p := range c.own {
			want[p] = c.base + int64(p)
			meta := c.cons.name
			tps = append(tps, kafka.TopicPartition{Topic: new(topic), Partition: p, Offset: kafka.Offset(want[p]), Metadata: &meta})
		}
		res, err := c.cons.c.CommitOffsets(tps)
		if err != nil {
			t.Fatalf("%s commits %v: %v", c.cons.name, c.own, err)
		}
		for _, tp := range res {
			if tp.Error != nil {
				t.Fatalf("%s commits %d: %v", c.cons.name, tp.Partition, tp.Error)
			}
		}
		c.cons.checkCommitted(t, c.own, want)
	}
	srv.checkOffsets(t, want)

	// b leaves: a is assigned every queue again, and reads b's commits.
	b.close(t)
	a.waitFor(ctx, t, func(own []int32) bool { return len(own) == queues })
	all := make([]int32, queues)
	for i := range all {
		all[i] = int32(i)
	}
	a.checkCommitted(t, all, want)
}

// consumer is one librdkafka consumer of the group, polled by its own
// goroutine, which keeps what it is assigned.
type consumer struct {
	name    string
	c       *kafka.Consumer
	mu      sync.Mutex
	own     []int32 // guarded by mu
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// newConsumer starts a consumer on group.protocol=consumer, subscribed to
// the static topic, and polls it until the test ends or close.
func newConsumer(t *testing.T, bootstrap, name string) *consumer {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":  bootstrap,
		"group.id":           group,
		"group.protocol":     "consumer",
		"client.id":          name,
		"enable.auto.commit": false,
		// offsetd holds no records: fetching is refused, which librdkafka
		// logs. Only errors that stop a consumer would matter here.
		"log_level": 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, nil); err != nil {
		t.Fatal(err)
	}
	cons := &consumer{name: name, c: c, stop: make(chan struct{}), stopped: make(chan struct{})}
	go cons.poll()
	t.Cleanup(func() { cons.close(t) })
	return cons
}

// poll serves the consumer's events and notes its assignment after each.
func (c *consumer) poll() {
	defer close(c.stopped)
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		c.c.Poll(50)
		tps, err := c.c.Assignment()
		if err != nil {
			continue
		}
		var own []int32
		for _, tp := range tps {
			if tp.Topic != nil && *tp.Topic == topic {
				own = append(own, tp.Partition)
			}
		}
		slices.Sort(own)
		c.mu.Lock()
		c.own = own
		c.mu.Unlock()
	}
}

// owned returns the queues the consumer was last seen to own.
func (c *consumer) owned() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.own)
}

// waitFor waits until the consumer's assignment satisfies ok.
func (c *consumer) waitFor(ctx context.Context, t *testing.T, ok func([]int32) bool) {
	t.Helper()
	for !ok(c.owned()) {
		select {
		case <-ctx.Done():
			t.Fatalf("%s owns %v", c.name, c.owned())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkCommitted reads the committed offsets of ps and compares them with
// want.
func (c *consumer) checkCommitted(t *testing.T, ps []int32, want map[int32]int64) {
	t.Helper()
	var tps []kafka.TopicPartition
	for _, p := range ps {
		tps = append(tps, kafka.TopicPartition{Topic: new(topic), Partition: p})
	}
	got, err := c.c.Committed(tps, 10_000)
	if err != nil {
		t.Fatalf("%s reads the committed offsets of %v: %v", c.name, ps, err)
	}
	for _, tp := range got {
		if tp.Error != nil || int64(tp.Offset) != want[tp.Partition] {
			t.Errorf("%s reads %s[%d] at %v (%v), want %d", c.name, topic, tp.Partition, tp.Offset, tp.Error, want[tp.Partition])
		}
	}
}

// close leaves the group (a heartbeat with epoch -1) and stops polling.
func (c *consumer) close(t *testing.T) {
	c.once.Do(func() {
		close(c.stop)
		<-c.stopped
		if err := c.c.Close(); err != nil {
			t.Errorf("closing %s: %v", c.name, err)
		}
	})
}

// overlap says whether two sorted queue lists share one.
func overlap(a, b []int32) bool {
	for _, p := range a {
		if _, found := slices.BinarySearch(b, p); found {
			return true
		}
	}
	return false
}

// server is an offsetd serve process.
type server struct {
	url   string // http://127.0.0.1:PORT
	kafka string // 127.0.0.1:PORT of its Kafka listener
}

// startServe builds cmd/offsetd and runs offsetd serve on free loopback
// ports, with -kafka-scope, until the test ends; it returns once every
// partition has loaded.
func startServe(t *testing.T) server {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build offsetd")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "offsetd")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/offsetd")
	build.Dir = filepath.Join("..", "..") // the repository's root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/offsetd: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "-data", filepath.Join(dir, "data"), "-listen", "127.0.0.1:0",
		"-kafka-listen", "127.0.0.1:0", "-kafka-scope", scope)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("offsetd serve: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("offsetd serve did not stop within 30s of SIGTERM")
		}
	})
	var s server
	lines := bufio.NewScanner(stdout)
	for s.url == "" || s.kafka == "" {
		if !lines.Scan() {
			t.Fatalf("offsetd serve printed no addresses:\n%s", stderr.String())
		}
		line := lines.Text()
		if rest, ok := strings.CutPrefix(line, "offsetd listening on "); ok {
			s.url, _, _ = strings.Cut(rest, ", ")
		}
		if rest, ok := strings.CutPrefix(line, "offsetd serving Kafka clients on "); ok {
			s.kafka = rest
		}
	}
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("offsetd serve not ready after 30s (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// post sends body to path and fails the test unless it succeeds.
func (s server) post(t *testing.T, path, body string) {
	t.Helper()
	resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s %s", path, resp.Status, b)
	}
}

// checkOffsets reads the group's offsets over offsetd's HTTP API and
// compares them with want.
func (s server) checkOffsets(t *testing.T, want map[int32]int64) {
	t.Helper()
	resp, err := http.Get(s.url + "/v1/groups/" + group + "/offsets")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Offsets []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Metadata  string `json:"metadata"`
		} `json:"offsets"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET the group's offsets: %s: %v", resp.Status, err)
	}
	got := map[int32]int64{}
	for _, o := range body.Offsets {
		if o.Topic == topic {
			got[o.Partition] = o.Offset
		}
	}
	if len(got) != len(want) {
		t.Errorf("offsetd holds %v, want %v", got, want)
	}
	for p, o := range want {
		if got[p] != o {
			t.Errorf("offsetd holds %s[%d] at %d, want %d", topic, p, got[p], o)
		}
	}
}

// lockedBuffer is a bytes.Buffer that the process's output can be copied
// into while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
