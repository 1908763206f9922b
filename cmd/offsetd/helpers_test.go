package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the server's concurrent logging.
// If watch is set, seen is closed once the buffer holds it.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	watch string
	seen  chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.watch != "" && bytes.Contains(b.buf.Bytes(), []byte(b.watch)) {
		close(b.seen)
		b.watch = ""
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lineWriter hands each complete line written to it to lines.
type lineWriter struct {
	mu      sync.Mutex
	partial []byte
	lines   chan string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 16)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		select {
		case w.lines <- string(w.partial[:i]):
		default: // nobody reads more lines
		}
		w.partial = w.partial[i+1:]
	}
}

var listeningLine = regexp.MustCompile(`^offsetd listening on (\S+), data in (.+)$`)

// parseListening returns the URL and data directory of serve's first line.
func parseListening(t testing.TB, line string) (url, dir string) {
	t.Helper()
	m := listeningLine.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve printed %q, want \"offsetd listening on URL, data in DIR\"", line)
	}
	return m[1], m[2]
}

// envOf is a getenv over a fixed map.
func envOf(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// serveEnvOf is envOf for running offsetd: unless a test says otherwise,
// the Kafka listener takes a free port, so that tests never fight over
// 9092.
func serveEnvOf(env map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := env[k]; ok || k != "OFFSETD_KAFKA_LISTEN" {
			return v
		}
		return "127.0.0.1:0"
	}
}

// served is an offsetd serve running in this process.
type served struct {
	url, dir string
	kafka    string // host:port of the Kafka listener, "" when off
	stderr   *syncBuffer
	stop     func() int // stops it (as SIGTERM does) and returns its exit status
}

// startServe runs offsetd with args (a serve command line) until the test
// ends or stop is called. It returns once every partition has loaded.
func startServe(t *testing.T, args []string, env map[string]string) served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := newLineWriter()
	errs := &syncBuffer{watch: "every partition loaded", seen: make(chan struct{})}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, serveEnvOf(env), out, errs) }()
	var s served
	select {
	case line := <-out.lines:
		s.url, s.dir = parseListening(t, line)
	case code := <-done:
		cancel()
		t.Fatalf("serve exited with %d before listening:\n%s", code, errs)
	}
	select {
	case <-errs.seen:
	case code := <-done:
		cancel()
		t.Fatalf("serve exited with %d while loading:\n%s", code, errs)
	}
	select { // the Kafka line comes right after the first one
	case line := <-out.lines:
		s.kafka = strings.TrimPrefix(line, "offsetd serving Kafka clients on ")
	default:
	}
	var once sync.Once
	status := 0
	s.stderr = errs
	s.stop = func() int {
		once.Do(func() {
			cancel()
			status = <-done
		})
		return status
	}
	t.Cleanup(func() { s.stop() })
	return s
}

// runCmd runs offsetd with args and returns its status and output.
func runCmd(t testing.TB, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errs syncBuffer
	code := run(t.Context(), args, serveEnvOf(env), &out, &errs)
	return code, out.String(), errs.String()
}

// mustRun runs offsetd and fails the test unless it exits with status.
func mustRun(t testing.TB, status int, env map[string]string, args ...string) string {
	t.Helper()
	code, out, errs := runCmd(t, env, args...)
	if code != status {
		t.Fatalf("offsetd %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, status, out, errs)
	}
	return out + errs
}

// buildBinary builds offsetd into dir and returns its path; without a go
// tool it skips the test.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the binary")
	}
	bin := filepath.Join(dir, "offsetd")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
