package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// offsetd, offsetd -h and offsetd help print the same list, which names
// every command, each on one line.
func TestCommandList(t *testing.T) {
	list := mustRun(t, 0, nil)
	for _, args := range [][]string{{"-h"}, {"help"}, {"--help"}} {
		if out := mustRun(t, 0, nil, args...); out != list {
			t.Fatalf("offsetd %s differs from offsetd:\n%s", args[0], out)
		}
	}
	for _, c := range commands {
		if n := strings.Count(list, "\n  "+c.name+" "); n != 1 {
			t.Errorf("the list names %q on %d lines, want 1", c.name, n)
		}
	}
}

// Every command and every group command explains itself with -h, exit 0
// on stdout: the synopsis, each argument and each flag.
func TestEveryCommandHelp(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			args := append(strings.Fields(c.name), "-h")
			code, out, errs := runCmd(t, nil, args...)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			if !strings.HasPrefix(out, "usage: offsetd "+c.name) {
				t.Fatalf("help does not start with the synopsis:\n%s", out)
			}
			for _, a := range c.args {
				if !strings.Contains(out, "\n  "+a.name+" ") {
					t.Errorf("help lacks argument %s:\n%s", a.name, out)
				}
			}
			if setup := adminSetups[c.name]; setup != nil {
				fs, _ := newAdminFlagSet(c.name)
				setup(fs)
				fs.VisitAll(func(f *flag.Flag) {
					if !strings.Contains(out, "\n  -"+f.Name+" ") && !strings.Contains(out, "\n  -"+f.Name+"\n") {
						t.Errorf("help lacks flag -%s:\n%s", f.Name, out)
					}
				})
			}
			if again := mustRun(t, 0, nil, append([]string{"help"}, strings.Fields(c.name)...)...); again != out {
				t.Errorf("offsetd help %s differs from -h:\n%s", c.name, again)
			}
		})
	}
	for group := range groups {
		for _, args := range [][]string{{group}, {group, "-h"}, {"help", group}} {
			out := mustRun(t, 0, nil, args...)
			for _, c := range subcommands(group) {
				if !strings.Contains(out, "\n  "+strings.TrimPrefix(c.name, group+" ")+" ") {
					t.Errorf("offsetd %s lacks %s:\n%s", strings.Join(args, " "), c.name, out)
				}
			}
		}
	}
}

// Every flag of serve is in its help: the help is built from the flag set.
func TestServeHelpListsEveryFlag(t *testing.T) {
	out := mustRun(t, 0, nil, "serve", "-h")
	for _, name := range []string{"data", "listen", "kafka-listen", "partitions", "retention", "tls-cert", "peers", "log-level"} {
		if !strings.Contains(out, "\n  -"+name+" ") {
			t.Errorf("serve -h lacks -%s", name)
		}
	}
	if _, err := parseServeConfig([]string{"-h"}, envOf(nil), io.Discard); err != flag.ErrHelp {
		t.Fatalf("parseServeConfig(-h) = %v", err)
	}
}

// A usage error exits 2 with what is wrong on its first line, then the
// synopsis and where to read more, not the whole help; nothing on
// stdout.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args  []string
		first string
	}{
		{[]string{"commit", "payments", "orders", "0"}, "offsetd: commit: want 4 arguments, GROUP TOPIC PARTITION OFFSET; got 3"},
		{[]string{"static", "create", "-scope", "clusterA", "TopicX"}, "offsetd: static create: -queues is missing"},
		{[]string{"static", "create", "-scope", "clusterA", "-queues", "0", "-brokers", "b1", "TopicX"}, "offsetd: static create: -queues 0: want 1 to"},
		{[]string{"static", "route", "TopicX"}, "offsetd: static route: -scope is missing"},
		{[]string{"static", "describe", "-o", "yaml"}, "offsetd: static describe: -o yaml: want table or json"},
		{[]string{"global-read", "clusterA", "maybe"}, `offsetd: global-read: the switch is on or off, not "maybe"`},
		{[]string{"groups", "-nope"}, "offsetd: groups: flag provided but not defined: -nope"},
		{[]string{"serve", "now"}, `offsetd: serve: serve takes no arguments, got ["now"]`},
		{[]string{"-nope"}, "offsetd: serve: flag provided but not defined: -nope"}, // flags first: serve
		{[]string{"version", "now"}, `offsetd: version: takes no arguments`},
	} {
		code, out, errs := runCmd(t, nil, c.args...)
		lines := strings.Split(errs, "\n")
		if code != 2 || out != "" || !strings.HasPrefix(lines[0], c.first) || len(lines) != 4 ||
			!strings.HasPrefix(lines[1], "usage: offsetd ") || !strings.Contains(lines[2], "-h'") {
			t.Errorf("offsetd %s: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and first %q", strings.Join(c.args, " "), code, out, errs, c.first)
		}
	}
	for _, args := range [][]string{{"frob"}, {"static", "frob"}} {
		code, _, errs := runCmd(t, nil, args...)
		if code != 2 || !strings.Contains(errs, "unknown") || strings.Count(errs, "\n") != 2 {
			t.Errorf("offsetd %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, errs)
		}
	}
}

// Flags may follow the arguments; a negative number is an argument, and
// "--" ends the flags.
func TestFlagsAfterArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		gen  int
	}{
		{[]string{"g", "t", "0", "42", "-generation", "7"}, []string{"g", "t", "0", "42"}, 7},
		{[]string{"-generation", "7", "g", "t", "0", "42"}, []string{"g", "t", "0", "42"}, 7},
		{[]string{"g", "-generation=7", "t", "0", "42"}, []string{"g", "t", "0", "42"}, 7},
		{[]string{"g", "t", "0", "-1"}, []string{"g", "t", "0", "-1"}, -1},
		{[]string{"g", "--", "t", "-generation", "7"}, []string{"g", "t", "-generation", "7"}, -1},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		gen := fs.Int("generation", -1, "")
		if err := parseInterspersed(fs, c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if strings.Join(fs.Args(), " ") != strings.Join(c.pos, " ") || *gen != c.gen {
			t.Errorf("%q: arguments %q generation %d, want %q %d", c.args, fs.Args(), *gen, c.pos, c.gen)
		}
	}
}
