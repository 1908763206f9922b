package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// The documents' shell examples are executed: TestDocs turns each
// document's console blocks into a testscript script and runs it against
// real offsetd processes, comparing every command's output with what the
// document shows. The markdown is the only copy of an example.
//
// A block whose info string is console, sh, shell or bash holds commands
// (lines starting with "$ ", continued by a trailing backslash) and, after
// each, the output it prints (stdout and stderr together). In that output
// "…" stands for any text within a line, and a line that is only "…" for any
// number of lines; runs of spaces and trailing spaces compare equal (a
// table's columns widen with its values). A command may fail only where the
// document shows what it prints.
//
// Only offsetd serve runs in the background (a command ending in " &"): the
// test starts it as its own process and waits until it answers /readyz (or
// /healthz, for a node started with -join), failing with its log if it
// exits; a command after the nodes of a new cluster first waits until every
// partition has a leader, as a person gives it the second or two its
// elections take. The output shown after a server is its stdout, compared
// once the servers are stopped (SIGINT, together) at the end of the
// document; each must exit 0. The documents of one run go in parallel,
// each in a directory of its own.
//
// Ports: every host:port on 127.0.0.1 or localhost that a document's
// commands name is mapped to a free port the test picks, in the commands
// and back in their output; offsetd's defaults (7070 and 9092) are mapped
// through OFFSETD_LISTEN, OFFSETD_KAFKA_LISTEN and OFFSETD_ADDR. Numbers of
// 13 digits (Unix milliseconds: commit times, epochs) and RFC 3339 times
// compare equal whatever their value.
//
// A block that cannot run here is preceded by a comment giving the reason:
//
//	<!-- not executed: it downloads from the network -->
//
// go test ./cmd/offsetd -run TestDocs -update writes what each command
// printed into its document where it differs from what the document shows
// (placeholders are lost there: put them back by hand).

// docFiles are the documents whose examples are executed, relative to the
// repository's root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	return files
}

var updateDocs = flag.Bool("update", false, "TestDocs: write what each example printed into its document where it differs")

// docUpdates holds, with -update, what each command printed where its
// document shows something else, by "doc:line".
var docUpdates sync.Map

func TestDocs(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := osexec.LookPath("curl"); err != nil {
		t.Skip("no curl: the documents' examples use it")
	}
	bin := buildBinary(t, t.TempDir())
	scripts := t.TempDir()
	var files []string
	for _, doc := range docFiles(t, root) {
		src, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseDoc(doc, string(src))
		if err != nil {
			t.Fatal(err)
		}
		if len(blocks) == 0 {
			continue
		}
		script, err := docScript(blocks)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(scripts, strings.NewReplacer("/", "-", ".md", ".txtar").Replace(doc))
		if err := os.WriteFile(name, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
	}
	if *updateDocs {
		t.Cleanup(func() { writeDocUpdates(t, root) })
	}
	testscript.Run(t, testscript.Params{
		Files: files,
		Setup: func(env *testscript.Env) error {
			ports, err := readPorts(filepath.Join(env.WorkDir, "ports"))
			if err != nil {
				return err
			}
			for doc, real := range ports {
				env.Setenv("PORT_"+doc, real)
			}
			env.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("OFFSETD_LISTEN", "127.0.0.1:"+ports["7070"])
			env.Setenv("OFFSETD_ADDR", "127.0.0.1:"+ports["7070"])
			env.Setenv("OFFSETD_KAFKA_LISTEN", "127.0.0.1:"+ports["9092"])
			env.Values[docServersKey{}] = map[string]*docServer{}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"docout":      cmdDocOut,
			"docserve":    docServe(bin),
			"docstop":     cmdDocStop,
			"waitleaders": cmdWaitLeaders,
		},
	})
}

// docCommand is one command of a document's shell block.
type docCommand struct {
	line   int    // where it starts in the document (from 1)
	text   string // as the document shows it, without "$ "
	output string // what the document shows after it
	// outFrom and outTo are the lines of its output (from 0, outTo
	// excluded), where -update writes what it printed.
	outFrom, outTo int
}

// docBlock is one executed shell block.
type docBlock struct {
	doc      string
	indent   string // of a block in a list item
	commands []docCommand
}

var (
	fenceLine      = regexp.MustCompile("^([ \\t]*)(```+)\\s*([A-Za-z]*)")
	notExecuted    = regexp.MustCompile(`^<!-- not executed: (.*\S.*) -->$`)
	shellLanguages = []string{"console", "sh", "shell", "bash"}
)

// parseDoc returns a document's executed shell blocks. A shell block that
// has no command, or text before its first command, is an error, as is a
// not-executed mark that no shell block follows.
func parseDoc(doc, src string) ([]docBlock, error) {
	lines := strings.Split(src, "\n")
	var blocks []docBlock
	skip := false // the last non-blank line was a not-executed mark
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(strings.TrimSpace(line), "<!-- not executed") {
			if notExecuted.FindStringSubmatch(strings.TrimSpace(line)) == nil {
				return nil, fmt.Errorf("%s:%d: a not-executed mark must give its reason: <!-- not executed: why -->", doc, i+1)
			}
			skip = true
			continue
		}
		m := fenceLine.FindStringSubmatch(line)
		if m == nil {
			if skip && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("%s:%d: a not-executed mark must come right before a shell block", doc, i)
			}
			continue
		}
		// A block in a list item is indented: so are its lines.
		indent, fence, lang, start := m[1], m[2], m[3], i
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimLeft(lines[i], " \t"), fence); i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: the block is not closed", doc, start+1)
		}
		shell := slices.Contains(shellLanguages, lang)
		if skip {
			skip = false
			if !shell {
				return nil, fmt.Errorf("%s:%d: a not-executed mark before a %q block, not a shell block", doc, start+1, lang)
			}
			continue
		}
		if !shell {
			continue
		}
		b, err := parseBlock(doc, start+2, body)
		if err != nil {
			return nil, err
		}
		b.indent = indent
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// parseBlock splits a shell block's lines into commands and their output;
// first is the document's line number of body[0].
func parseBlock(doc string, first int, body []string) (docBlock, error) {
	b := docBlock{doc: doc}
	for j := 0; j < len(body); j++ {
		line := body[j]
		if !strings.HasPrefix(line, "$ ") {
			if len(b.commands) == 0 {
				return b, fmt.Errorf("%s:%d: a shell block starts with its first command (\"$ …\"), or is marked <!-- not executed: why -->", doc, first+j)
			}
			c := &b.commands[len(b.commands)-1]
			c.output += line + "\n"
			continue
		}
		c := docCommand{line: first + j, text: strings.TrimPrefix(line, "$ ")}
		for strings.HasSuffix(c.text, "\\") && j+1 < len(body) {
			j++
			c.text += "\n" + body[j]
		}
		c.outFrom = first + j // the line after the command, from 0
		b.commands = append(b.commands, c)
	}
	for i := range b.commands {
		// Blank lines between a command's output and the next command
		// are layout.
		c := &b.commands[i]
		c.output = strings.TrimRight(c.output, "\n")
		c.outTo = c.outFrom
		if c.output != "" {
			c.output += "\n"
			c.outTo += strings.Count(c.output, "\n")
		}
	}
	return b, nil
}

var (
	hostPort   = regexp.MustCompile(`\b(127\.0\.0\.1|localhost):(\d{4,5})\b`)
	assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S*$`)
)

// docScript turns one document's blocks into a testscript archive: the
// script, one file per command (run by sh, so the document's shell syntax
// holds) and one per output shown, and the ports the document names.
func docScript(blocks []docBlock) (string, error) {
	ports := map[string]string{"7070": "", "9092": ""}
	for _, b := range blocks {
		for _, c := range b.commands {
			for _, m := range hostPort.FindAllStringSubmatch(c.text, -1) {
				ports[m[2]] = ""
			}
		}
	}
	var script, files strings.Builder
	files.WriteString("-- ports --\n")
	for _, p := range slices.Sorted(maps.Keys(ports)) {
		fmt.Fprintf(&files, "%s\n", p)
	}
	mapPorts := func(s string) string {
		return hostPort.ReplaceAllString(s, "$1:$${PORT_$2}")
	}
	var servers []string
	var founding []string // cluster nodes started since the last command
	n := 0
	for _, b := range blocks {
		for _, c := range b.commands {
			n++
			where := fmt.Sprintf("%s:%d", b.doc, c.line)
			fmt.Fprintf(&script, "# %s\n", where)
			// go run ./cmd/offsetd, as the quick start says it from a
			// fresh clone, is the binary the test built from this tree.
			text := strings.Replace(c.text, "go run ./cmd/offsetd", "offsetd", 1)
			if !strings.HasSuffix(text, " &") && len(founding) > 0 {
				// What a person does between starting a cluster and
				// using it: give it the second or two its first
				// elections take.
				fmt.Fprintf(&script, "waitleaders %s\n", strings.Join(founding, " "))
				founding = nil
			}
			switch {
			case assignment.MatchString(text) && c.output == "":
				fmt.Fprintf(&script, "env %s\n", mapPorts(text))
			case strings.HasSuffix(text, " &"):
				words := strings.Fields(strings.ReplaceAll(strings.TrimSuffix(text, " &"), "\\\n", " "))
				if words[0] != "offsetd" || (len(words) > 1 && words[1] != "serve" && !strings.HasPrefix(words[1], "-")) {
					return "", fmt.Errorf("%s: only offsetd serve runs in the background", where)
				}
				for _, w := range words {
					if strings.ContainsAny(w, `'"$;|<>`) {
						return "", fmt.Errorf("%s: a background command is plain words, without %q", where, w)
					}
				}
				name := fmt.Sprintf("srv%d", n)
				addr, path := "127.0.0.1:${PORT_7070}", "/readyz"
				for i, w := range words {
					if w == "-listen" && i+1 < len(words) {
						addr = mapPorts(words[i+1])
					}
					if w == "-join" {
						path = "/healthz"
					}
				}
				fmt.Fprintf(&script, "docserve %s %s %s %s\n", name, addr, path, mapPorts(strings.Join(words, " ")))
				if slices.Contains(words, "-peers") && path == "/readyz" {
					founding = append(founding, addr)
				}
				stop := name
				if c.output != "" {
					fmt.Fprintf(&files, "-- out/%d --\n%s", n, c.output)
					stop = fmt.Sprintf("%s=%d=%s", name, n, where)
				}
				servers = append(servers, stop)
			default:
				if strings.Contains(c.output, "\n-- ") || strings.HasPrefix(c.output, "-- ") {
					return "", fmt.Errorf("%s: output lines may not start with \"-- \"", where)
				}
				fmt.Fprintf(&files, "-- cmd/%d --\nexec 2>&1\n%s\necho $? >.status\n", n, mapPorts(text))
				fmt.Fprintf(&files, "-- out/%d --\n%s", n, c.output)
				fmt.Fprintf(&script, "exec sh cmd/%d\ndocout status %d %s\n", n, n, where)
			}
		}
	}
	if len(servers) > 0 {
		fmt.Fprintf(&script, "docstop %s\n", strings.Join(servers, " "))
	}
	return script.String() + files.String(), nil
}

// readPorts reads the document's ports from the archive and picks a free
// port for each, setting PORT_n in the script's environment.
func readPorts(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln) // held until all are picked, so they differ
		ports[sc.Text()] = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// cmdDocOut compares a command's output with what its document shows:
// docout status N WHERE. The command's exit status (written to .status)
// must be 0 unless the document shows its output.
func cmdDocOut(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 || args[0] != "status" {
		ts.Fatalf("usage: docout status N WHERE")
	}
	compareDocOutput(ts, args[1], args[2], ts.ReadFile("stdout"), strings.TrimSpace(ts.ReadFile(".status")))
}

// compareDocOutput compares what command N printed with what its document
// shows, and its exit status ("" for a server, whose status docstop checks).
func compareDocOutput(ts *testscript.TestScript, n, where, got, status string) {
	want := ts.ReadFile("out/" + n)
	for _, doc := range strings.Fields(ts.ReadFile("ports")) {
		real := ts.Getenv("PORT_" + doc)
		got = regexp.MustCompile(`\b(127\.0\.0\.1|localhost):`+real+`\b`).ReplaceAllString(got, "${1}:"+doc)
	}
	if status != "" && status != "0" && want == "" {
		if *updateDocs && got != "" {
			docUpdates.Store(where, got)
			return
		}
		ts.Fatalf("%s: exit status %s, and the document shows no output; it printed:\n%s", where, status, got)
	}
	got = trailingSpace.ReplaceAllString(got, "") // invisible, and editors drop it
	if got != "" && !strings.HasSuffix(got, "\n") {
		got += "\n" // as a terminal shows it: the next prompt on a line of its own
	}
	if !outputMatches(want, got) {
		if *updateDocs {
			docUpdates.Store(where, got)
			return
		}
		ts.Fatalf("%s: the output differs from the document's\n--- the document shows:\n%s--- it printed:\n%s", where, want, got)
	}
}

var (
	trailingSpace = regexp.MustCompile(`(?m)[ \t]+$`)
	columnGap     = regexp.MustCompile(`[ \t]{2,}`)
	millis        = regexp.MustCompile(`\b\d{13}\b`)
	rfc3339Time   = regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
)

// outputMatches reports whether got is what a document shows as want,
// with its placeholders.
func outputMatches(want, got string) bool {
	normal := func(s string) string {
		s = trailingSpace.ReplaceAllString(s, "")
		s = columnGap.ReplaceAllString(s, "  ") // a table's columns widen with its values
		s = millis.ReplaceAllString(s, "<ms>")
		return rfc3339Time.ReplaceAllString(s, "<time>")
	}
	want, got = normal(want), normal(got)
	var re strings.Builder
	re.WriteString(`\A`)
	for _, line := range strings.SplitAfter(want, "\n") {
		if line == "" {
			continue
		}
		if strings.TrimSuffix(line, "\n") == "…" {
			re.WriteString(`(?:.*\n)*?`)
			continue
		}
		parts := strings.Split(line, "…")
		for i, p := range parts {
			if i > 0 {
				re.WriteString(`.*?`)
			}
			re.WriteString(regexp.QuoteMeta(p))
		}
	}
	re.WriteString(`\z`)
	return regexp.MustCompile(re.String()).MatchString(got)
}

// docServer is an offsetd serve a document started.
type docServer struct {
	cmd    *osexec.Cmd
	stdout *syncBuffer
	log    string // its stderr
	done   chan error
}

// docServersKey keys a script's servers in its values.
type docServersKey struct{}

// docServe returns the command that starts the offsetd binary bin, serving
// in the background as its own process, and waits until it answers 200 at
// a path: docserve NAME HOST:PORT PATH offsetd ARGS... It fails at once if
// the server exits. A cluster node (-peers) gets no OFFSETD_KAFKA_LISTEN:
// it listens for Kafka clients where -kafka-peers says, or not at all.
func docServe(bin string) func(ts *testscript.TestScript, neg bool, args []string) {
	return func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 4 || args[3] != "offsetd" {
			ts.Fatalf("usage: docserve NAME HOST:PORT PATH offsetd ARGS...")
		}
		serveDoc(ts, bin, args[0], "http://"+args[1]+args[2], args[4:])
	}
}

// serveDoc starts bin with args as server name, and waits until url
// answers 200.
func serveDoc(ts *testscript.TestScript, bin, name, url string, args []string) {
	servers := ts.Value(docServersKey{}).(map[string]*docServer)
	s := &docServer{stdout: &syncBuffer{}, log: ts.MkAbs(name + ".log"), done: make(chan error, 1)}
	logFile, err := os.Create(s.log)
	ts.Check(err)
	defer logFile.Close()
	s.cmd = osexec.Command(bin, args...)
	s.cmd.Dir = ts.Getenv("WORK")
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, logFile
	s.cmd.Env = []string{"PATH=" + ts.Getenv("PATH"), "HOME=" + ts.Getenv("HOME"), "TMPDIR=" + ts.Getenv("TMPDIR"),
		"OFFSETD_LISTEN=" + ts.Getenv("OFFSETD_LISTEN")}
	if !slices.Contains(args, "-peers") {
		s.cmd.Env = append(s.cmd.Env, "OFFSETD_KAFKA_LISTEN="+ts.Getenv("OFFSETD_KAFKA_LISTEN"))
	}
	ts.Check(s.cmd.Start())
	servers[name] = s
	go func() { s.done <- s.cmd.Wait() }()
	ts.Defer(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
		}
	})

	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-s.done:
			s.done <- err
			log, _ := os.ReadFile(s.log)
			ts.Fatalf("%s exited (%v) before %s answered 200:\n%s%s", name, err, url, s.stdout, log)
		case <-time.After(20 * time.Millisecond): // polling a process: nothing to wait on
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s did not answer 200 within 30 s (last: %v)", url, err)
		}
	}
}

// cmdDocStop stops servers (SIGINT) together and waits for them, each of
// which must exit 0: docstop NAME[=N=WHERE]... With N, what the server
// printed on stdout is compared with what its document shows.
func cmdDocStop(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: docstop NAME[=N=WHERE]...")
	}
	servers := ts.Value(docServersKey{}).(map[string]*docServer)
	for _, arg := range args {
		name, _, _ := strings.Cut(arg, "=")
		s := servers[name]
		if s == nil {
			ts.Fatalf("no server %s", name)
		}
		s.cmd.Process.Signal(os.Interrupt)
	}
	for _, arg := range args {
		name, shown, _ := strings.Cut(arg, "=")
		s := servers[name]
		select {
		case err := <-s.done:
			if err != nil {
				log, _ := os.ReadFile(s.log)
				ts.Fatalf("%s: %v, stopping:\n%s", name, err, log)
			}
		case <-time.After(time.Minute):
			ts.Fatalf("%s did not stop within a minute of SIGINT", name)
		}
		if n, where, ok := strings.Cut(shown, "="); ok {
			compareDocOutput(ts, n, where, s.stdout.String(), "")
		}
	}
}

// cmdWaitLeaders waits until every partition has a leader, as each of
// the cluster nodes named sees it: waitleaders HOST:PORT...
func cmdWaitLeaders(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: waitleaders HOST:PORT...")
	}
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(time.Minute)
	for _, addr := range args {
		for {
			var parts []partitionLeader
			err := getJSON(hc, "http://"+addr+"/v1/cluster/partitions", &parts)
			if err == nil && len(parts) > 0 && !slices.ContainsFunc(parts, partitionLeader.none) {
				break
			}
			if time.Now().After(deadline) {
				ts.Fatalf("%s: not every partition had a leader within a minute (last: %v)", addr, err)
			}
			time.Sleep(20 * time.Millisecond) // polling a process: nothing to wait on
		}
	}
}

// partitionLeader is the leader of an entry of GET /v1/cluster/partitions.
type partitionLeader struct {
	Leader uint64 `json:"leader"`
}

func (p partitionLeader) none() bool { return p.Leader == 0 }

// getJSON decodes a 200 answer of url into v.
func getJSON(hc *http.Client, url string, v any) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// writeDocUpdates writes the outputs -update collected into the documents.
func writeDocUpdates(t *testing.T, root string) {
	for _, doc := range docFiles(t, root) {
		file := filepath.Join(root, doc)
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseDoc(doc, string(src))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(src), "\n")
		changed := false
		for _, b := range slices.Backward(blocks) {
			for _, c := range slices.Backward(b.commands) {
				got, ok := docUpdates.Load(fmt.Sprintf("%s:%d", doc, c.line))
				if !ok {
					continue
				}
				out := strings.Split(strings.TrimSuffix(got.(string), "\n"), "\n")
				if got.(string) == "" {
					out = nil
				}
				for i := range out {
					out[i] = b.indent + out[i]
				}
				lines = slices.Replace(lines, c.outFrom, c.outTo, out...)
				changed = true
			}
		}
		if changed {
			if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("updated %s", doc)
		}
	}
}

// TestREADMESize holds README.md to a user guide's length: the rest
// belongs in docs/.
func TestREADMESize(t *testing.T) {
	fi, err := os.Stat("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 25<<10 {
		t.Errorf("README.md is %d bytes, over 25 KiB: move the detail to docs/", fi.Size())
	}
}
