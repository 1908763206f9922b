package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets testscript run this test binary as the offsetd command of
// a script: scripts call offsetd as an operator would, in a process of its
// own, and see its output and exit status.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"offsetd": main})
}

// TestCLIScripts runs testdata/script/*.txtar: the CLI as an operator
// sees it.
func TestCLIScripts(t *testing.T) {
	testscript.Run(t, scriptParams("testdata/script"))
}

// scriptParams are the testscript parameters of offsetd's scripts in dir.
// Besides testscript's own commands, a script has:
//
//	serve NAME [flags]   start offsetd serve in the background, as its own
//	                     process, with -listen 127.0.0.1:0 (flags given
//	                     win); return once every partition has loaded. It
//	                     sets $OFFSETD_ADDR (what admin commands talk to) and
//	                     $NAME_ADDR to its URL, $NAME_KAFKA to its Kafka
//	                     listener, and logs to $WORK/NAME.log.
//	stopserve NAME       SIGTERM it and wait; fails unless it exits 0
//	                     (! stopserve: unless it fails).
//
// The server's working directory is $WORK, so the default -data is
// $WORK/offsetd-data. Its environment is the test's, with the script's
// PATH, HOME, TMPDIR and the OFFSETD_ variables in scriptServeEnv; other
// options go as flags. Kafka listens on a free port unless the script sets
// OFFSETD_KAFKA_LISTEN (-kafka-listen= turns it off). Servers still
// running at the end are stopped.
func scriptParams(dir string) testscript.Params {
	return testscript.Params{
		Dir: dir,
		Setup: func(env *testscript.Env) error {
			env.Setenv("OFFSETD_KAFKA_LISTEN", "127.0.0.1:0")
			env.Values[scriptServersKey{}] = map[string]*scriptServer{}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"serve":     scriptServe,
			"stopserve": scriptStopServe,
		},
	}
}

// scriptServeEnv are the variables a script's server takes from the
// script, beyond PATH, HOME and TMPDIR.
var scriptServeEnv = []string{"OFFSETD_KAFKA_LISTEN", "OFFSETD_LOG_LEVEL", "OFFSETD_PARTITIONS", "OFFSETD_RETENTION", "OFFSETD_AUTH_TOKEN_FILE"}

// scriptServer is a server a script started.
type scriptServer struct {
	cmd  *exec.Cmd
	done chan error // Wait's result
}

func scriptServe(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! serve")
	}
	if len(args) < 1 {
		ts.Fatalf("usage: serve NAME [flags]")
	}
	name := args[0]
	if scriptServers(ts)[name] != nil {
		ts.Fatalf("server %s is already running", name)
	}
	cmd := exec.Command("offsetd", append([]string{"serve", "-listen", "127.0.0.1:0"}, args[1:]...)...)
	cmd.Dir = ts.Getenv("WORK")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OFFSETD_") {
			env = append(env, kv)
		}
	}
	for _, k := range append([]string{"PATH", "HOME", "TMPDIR"}, scriptServeEnv...) {
		env = append(env, k+"="+ts.Getenv(k))
	}
	cmd.Env = env
	logFile, err := os.Create(filepath.Join(cmd.Dir, name+".log"))
	ts.Check(err)
	stdout, err := cmd.StdoutPipe()
	ts.Check(err)
	stderr, err := cmd.StderrPipe()
	ts.Check(err)
	ts.Check(cmd.Start())
	s := &scriptServer{cmd: cmd, done: make(chan error, 1)}
	loaded := make(chan struct{})
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	logged := make(chan struct{})
	var kafka string // from the log line of the options in effect, before loaded closes
	go func() {
		defer close(logged)
		seen := false
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			if m := servingKafka.FindStringSubmatch(line); m != nil && !seen {
				kafka = m[1]
			}
			if !seen && strings.Contains(line, "every partition loaded") {
				close(loaded)
				seen = true
			}
		}
	}()
	go func() {
		<-logged
		err := cmd.Wait()
		logFile.Close()
		s.done <- err
	}()
	ts.Defer(func() { stopScriptServer(s) })
	url, data, ok := waitListening(lines, s.done)
	if !ok {
		ts.Fatalf("offsetd serve %s stopped before listening; see %s.log", name, name)
	}
	select {
	case <-loaded:
	case err := <-s.done:
		s.done <- err
		ts.Fatalf("offsetd serve %s stopped while loading (%v); see %s.log", name, err, name)
	case <-time.After(time.Minute):
		ts.Fatalf("offsetd serve %s: not loaded after a minute", name)
	}
	if kafka != "off" {
		ts.Setenv(name+"_KAFKA", kafka)
	}
	ts.Logf("server %s: %s, data in %s", name, url, data)
	ts.Setenv("OFFSETD_ADDR", url)
	ts.Setenv(name+"_ADDR", url)
	ts.Setenv(name+"_DATA", data)
	scriptServers(ts)[name] = s
}

// servingKafka finds the Kafka listener in serve's log of its options.
var servingKafka = regexp.MustCompile(` msg=serving .* kafka=(\S+)`)

// waitListening returns serve's first line: "offsetd listening on URL,
// data in DIR".
func waitListening(lines <-chan string, done chan error) (url, dir string, ok bool) {
	select {
	case line, open := <-lines:
		if !open {
			return "", "", false
		}
		m := listeningLine.FindStringSubmatch(line)
		if m == nil {
			return "", "", false
		}
		return m[1], m[2], true
	case err := <-done:
		done <- err
		return "", "", false
	}
}

type scriptServersKey struct{}

// scriptServers are the servers running in a script, by name.
func scriptServers(ts *testscript.TestScript) map[string]*scriptServer {
	return ts.Value(scriptServersKey{}).(map[string]*scriptServer)
}

func scriptStopServe(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: stopserve NAME")
	}
	servers := scriptServers(ts)
	s := servers[args[0]]
	if s == nil {
		ts.Fatalf("no server %s running", args[0])
	}
	delete(servers, args[0])
	err := stopScriptServer(s)
	switch {
	case err != nil && !neg:
		ts.Fatalf("offsetd serve %s: %v; see %s.log", args[0], err, args[0])
	case err == nil && neg:
		ts.Fatalf("offsetd serve %s exited 0", args[0])
	}
}

// stopScriptServer stops s with SIGTERM, as an operator would, and returns
// how it exited. Called twice, it returns the first result.
func stopScriptServer(s *scriptServer) error {
	s.cmd.Process.Signal(syscall.SIGTERM) // fails only if it has exited
	err := <-s.done
	s.done <- err
	return err
}
