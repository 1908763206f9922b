package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/offsetd/offsetd/coordinator"
	"github.com/offsetd/offsetd/partitioner"
	"github.com/offsetd/offsetd/server"
)

// blockSnapshot makes partition 0 of dir hang in its load until release
// is called: its snapshot becomes a FIFO, whose open blocks until a writer
// opens it. Once released, the snapshot reads back empty, so damaged; the
// journal no longer starts at its first record (dir is a converted
// directory of format 1, whose journal starts after the snapshots), so
// the partition fails to load.
func blockSnapshot(t *testing.T, dir string) (release func()) {
	t.Helper()
	snaps, err := filepath.Glob(filepath.Join(coordinator.SnapshotDir(dir, 0), "snap.*"))
	if err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots of partition 0: %v %v", snaps, err)
	}
	if err := os.Remove(snaps[0]); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(snaps[0], 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return func() {
		f, err := os.OpenFile(snaps[0], os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		f.Close()
	}
}

// groupOf returns a group name that lives in partition p of n.
func groupOf(t *testing.T, p, n int) string {
	t.Helper()
	part, err := partitioner.New(n)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if g := fmt.Sprintf("g%d", i); part.Group(g) == p {
			return g
		}
	}
}

// While partitions load, /healthz answers, /readyz and every request that
// needs the loading partition say 503 with Retry-After; nothing is
// answered empty.
func TestLoading(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../coordinator/testdata/format1/data")); err != nil {
		t.Fatal(err)
	}
	opts := coordinator.DefaultOptions()
	opts.Partitions = 4
	opts.Logger = quiet
	c, err := coordinator.Open(dir, opts) // converts it to one journal
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	release := blockSnapshot(t, dir)
	g := groupOf(t, 0, opts.Partitions)

	opts.LoadInBackground = true
	c, err = coordinator.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			release()
		}
		c.Close()
	}()
	s, err := server.New(c, server.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	e := &env{t: t, c: c, s: s, ts: ts, http: ts.Client(), hdr: http.Header{}}

	e.must(http.StatusOK, "GET", "/healthz", "")
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/readyz", ""},
		{"GET", "/v1/groups", ""},
		{"GET", "/v1/groups/" + g + "/offsets", ""},
		{"GET", "/v1/groups/" + g + "/offsets/t/0", ""},
		{"POST", "/v1/groups/" + g + "/offsets", `{"offsets":[{"topic":"t","partition":0,"offset":1}]}`},
		{"DELETE", "/v1/groups/" + g, ""},
		{"GET", "/v1/static-topics", ""},
		{"GET", "/v1/static-topics/T?scope=c1", ""},
		{"GET", "/v1/scopes", ""},
	} {
		r := e.fail(http.StatusServiceUnavailable, "loading", req.method, req.path, req.body)
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("%s %s: 503 without Retry-After", req.method, req.path)
		}
	}
	m := scrape(t, e)
	if m[`offsetd_partition_ready{partition="0"}`] != 0 {
		t.Fatal("metrics say partition 0 is ready")
	}

	release()
	released = true
	if err := c.WaitReady(context.Background()); err == nil {
		t.Fatal("a partition with no usable snapshot and a journal that starts later loaded")
	}
	// A partition that failed to load is not "still loading": /readyz says
	// which and why.
	r := e.fail(http.StatusInternalServerError, "internal", "GET", "/readyz", "")
	if !strings.Contains(string(r.body), "partition 0 failed to load") {
		t.Fatalf("/readyz after a failed load: %s", r.body)
	}
	e.fail(http.StatusInternalServerError, "internal", "GET", "/v1/groups/"+g+"/offsets", "")
}

const writeFailEnv = "OFFSETD_SERVER_WRITEFAIL_DIR"

// A commit whose log write fails is a 503 write_failed with Retry-After,
// and once the disk takes writes again commits succeed. Writes fail for
// real: a child process lowers its file-size limit (RLIMIT_FSIZE).
func TestWriteFailed(t *testing.T) {
	if os.Getenv(writeFailEnv) != "" {
		t.Skip("child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteFailedChild$", "-test.v")
	cmd.Env = append(os.Environ(), writeFailEnv+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestWriteFailedChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func TestWriteFailedChild(t *testing.T) {
	dir := os.Getenv(writeFailEnv)
	if dir == "" {
		t.Skip("run by TestWriteFailed")
	}
	signal.Ignore(syscall.SIGXFSZ) // EFBIG instead of death
	opts := coordinator.DefaultOptions()
	opts.Partitions = 1
	opts.Logger = quiet
	c, err := coordinator.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := server.New(c, server.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	e := &env{t: t, c: c, s: s, ts: ts, http: ts.Client(), hdr: http.Header{}}

	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &orig); err != nil {
		t.Fatal(err)
	}
	limited := orig
	limited.Cur = 64 << 10
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limited); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"offsets":[{"topic":"t","partition":0,"offset":1,"metadata":%q}]}`, strings.Repeat("m", 4000))
	var failed response
	for i := 0; i < 64 && failed.status == 0; i++ {
		if r := e.do("POST", "/v1/groups/g/offsets", body); r.status != http.StatusOK {
			failed = r
		}
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &orig); err != nil {
		t.Fatal(err)
	}
	if failed.status != http.StatusServiceUnavailable || failed.errorCode(t) != "write_failed" || failed.header.Get("Retry-After") == "" {
		t.Fatalf("a commit past the file-size limit: %d %s (Retry-After %q)", failed.status, failed.body, failed.header.Get("Retry-After"))
	}
	e.must(http.StatusOK, "POST", "/v1/groups/g/offsets", body)
}

// classify gives every error of the core API its status and code.
func TestErrorStatuses(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{coordinator.ErrLoading, 503, "loading"},
		{coordinator.ErrWriteFailed, 503, "write_failed"},
		{coordinator.ErrClosed, 503, "unavailable"},
		{context.Canceled, 503, "unavailable"},
		{coordinator.ErrStaleGeneration, 409, "stale_generation"},
		{coordinator.ErrNotFound, 404, "not_found"},
		{coordinator.ErrInvalid, 400, "invalid_argument"},
		{coordinator.ErrCorrupt, 500, "internal"},
		{errors.New("anything else"), 500, "internal"},
	} {
		status, code := server.Classify(fmt.Errorf("wrapped: %w", c.err))
		if status != c.status || code != c.code {
			t.Errorf("%v: %d %s, want %d %s", c.err, status, code, c.status, c.code)
		}
	}
}
