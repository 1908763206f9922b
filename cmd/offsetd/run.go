package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/offsetd/offsetd/internal/buildinfo"
)

// run is offsetd with its arguments, environment and output; it returns
// the exit status: 0 done, 1 failed, 2 bad usage.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printCommandList(stdout)
		return 0
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if args[0] == "help" && len(args) > 1 {
			if isHelpFlag(args[1]) {
				printHelp(stdout, commandNamed("help"), nil)
				return 0
			}
			return run(ctx, append(slices.Clone(args[1:]), "-h"), getenv, stdout, stderr)
		}
		printCommandList(stdout)
		return 0
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	if strings.HasPrefix(args[0], "-") {
		args = append([]string{"serve"}, args...) // flags first: serve
	}
	if _, ok := groups[args[0]]; ok && (len(args) == 1 || isHelpFlag(args[1])) {
		printGroupHelp(stdout, args[0])
		return 0
	}
	c, rest := lookup(args)
	if c == nil {
		return unknownCommand(stderr, args)
	}
	if helpRequested(rest) {
		stderr = stdout // asked for, help is the output
	}
	switch c.name {
	case "serve":
		return serve(ctx, rest, getenv, stdout, stderr)
	case "verify":
		return verify(rest, stdout, stderr)
	case "dump":
		return dump(rest, stdout, stderr)
	case "version":
		return version(c, rest, stdout, stderr)
	}
	return admin(ctx, c, rest, getenv, stdout, stderr)
}

// unknownCommand reports a command or subcommand that does not exist.
func unknownCommand(stderr io.Writer, args []string) int {
	if _, ok := groups[args[0]]; ok {
		fmt.Fprintf(stderr, "offsetd: %s: unknown subcommand %q\nRun 'offsetd %s -h' for its subcommands.\n", args[0], args[1], args[0])
		return 2
	}
	fmt.Fprintf(stderr, "offsetd: unknown command %q\nRun 'offsetd help' for the commands.\n", args[0])
	return 2
}

func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}

// helpRequested reports whether args ask for help before any "--".
func helpRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// commandNamed returns the command of that name, which must exist.
func commandNamed(name string) *command {
	c, _ := lookup(strings.Fields(name))
	if c == nil {
		panic("offsetd: no command " + name)
	}
	return c
}

// version is offsetd version: the build information Go stamped into the
// binary.
func version(c *command, args []string, stdout, stderr io.Writer) int {
	if helpRequested(args) {
		printHelp(stdout, c, nil)
		return 0
	}
	if len(args) > 0 {
		return usageError(stderr, c, fmt.Errorf("takes no arguments, got %q", args))
	}
	fmt.Fprintln(stdout, buildinfo.Read())
	return 0
}

// usageStatus reports an error of verify or dump and returns its exit
// status.
func usageStatus(err error, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "offsetd: %s\n", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
	if isUsage(err) {
		fmt.Fprint(stderr, "Run 'offsetd help' for the commands, 'offsetd COMMAND -h' for one's arguments and flags.\n")
		return 2
	}
	return 1
}

func isUsage(err error) bool { return errors.Is(err, errUsage) }
