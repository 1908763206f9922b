package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// printCommandList writes what offsetd, offsetd -h and offsetd help show:
// every command with one line.
func printCommandList(w io.Writer) {
	fmt.Fprint(w, "offsetd is an offset coordinator: consumer-group offsets over HTTP and the Kafka\n"+
		"protocol, and RocketMQ static topics.\n\n"+
		"usage: offsetd COMMAND [flags] [arguments]\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, section := range sections {
		fmt.Fprintf(w, "\n%s:\n", section)
		for _, c := range commands {
			if c.section == section {
				fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
			}
		}
	}
	fmt.Fprint(w, "\nRun 'offsetd COMMAND -h' (or 'offsetd help COMMAND') for a command's synopsis, arguments\n"+
		"and flags. Commands that talk to a server take -addr, -token-file, -ca-file and -timeout,\n"+
		"or OFFSETD_ADDR, OFFSETD_TOKEN_FILE, OFFSETD_CA_FILE and OFFSETD_TIMEOUT.\n"+
		"Exit status: 0 done, 1 failed, 2 bad usage.\n")
}

// printGroupHelp writes what offsetd GROUP -h shows: its subcommands.
func printGroupHelp(w io.Writer, group string) {
	fmt.Fprintf(w, "usage: offsetd %s SUBCOMMAND [flags] [arguments]\n\n%s.\n\nSubcommands:\n", group, capitalize(groups[group]))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range subcommands(group) {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimPrefix(c.name, group+" "), c.summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun 'offsetd %s SUBCOMMAND -h' for a subcommand's synopsis, arguments and flags.\n", group)
}

// printHelp writes what offsetd CMD -h shows: the synopsis, what the
// command does, its arguments and its flags (those of fs, which may be
// nil), the server connection flags apart.
func printHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: offsetd %s", c.name)
	if c.synopsis != "" {
		fmt.Fprintf(w, " %s", c.synopsis)
	}
	fmt.Fprintf(w, "\n\n%s.\n", capitalize(c.summary))
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", c.about)
	}
	if len(c.args) > 0 {
		fmt.Fprint(w, "\nArguments:\n")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, a := range c.args {
			fmt.Fprintf(tw, "  %s\t%s\n", a.name, a.meaning)
		}
		tw.Flush()
	}
	if fs == nil {
		return
	}
	own := func(name string) bool { return !slices.Contains(adminEnvFlags, name) || adminSetups[c.name] == nil }
	if hasFlags(fs, own) {
		fmt.Fprint(w, "\nFlags:\n")
		printFlags(w, fs, own)
	}
	server := func(name string) bool { return !own(name) }
	if hasFlags(fs, server) {
		fmt.Fprint(w, "\nServer flags (or OFFSETD_ADDR, OFFSETD_TOKEN_FILE, OFFSETD_CA_FILE, OFFSETD_TIMEOUT):\n")
		printFlags(w, fs, server)
	}
}

func hasFlags(fs *flag.FlagSet, keep func(string) bool) bool {
	found := false
	fs.VisitAll(func(f *flag.Flag) { found = found || keep(f.Name) })
	return found
}

// printFlags writes fs's flags that keep takes, as flag.PrintDefaults
// does.
func printFlags(w io.Writer, fs *flag.FlagSet, keep func(string) bool) {
	fs.VisitAll(func(f *flag.Flag) {
		if !keep(f.Name) {
			return
		}
		typ, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  -%s", f.Name)
		if typ != "" {
			fmt.Fprintf(w, " %s", typ)
		}
		fmt.Fprintf(w, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
		switch {
		case f.DefValue == "" || f.DefValue == "0" || f.DefValue == "false" || f.DefValue == "0s":
		case typ == "string":
			fmt.Fprintf(w, " (default %q)", f.DefValue)
		default:
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// usageError reports a mistake on the command line of c: what is wrong
// first, then the synopsis and where to read more. It returns exit
// status 2.
func usageError(w io.Writer, c *command, err error) int {
	msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
	fmt.Fprintf(w, "offsetd: %s: %s\nusage: offsetd %s", c.name, msg, c.name)
	if c.synopsis != "" {
		fmt.Fprintf(w, " %s", strings.SplitN(c.synopsis, "\n", 2)[0])
	}
	fmt.Fprintf(w, "\nRun 'offsetd %s -h' for its arguments and flags.\n", c.name)
	return 2
}

// failure reports an error of a command that ran and returns exit status 1
// (2 for a usage error found late). The client's errors already say
// "offsetd:"; it is printed once.
func failure(w io.Writer, c *command, err error) int {
	if isUsage(err) {
		return usageError(w, c, err)
	}
	fmt.Fprintf(w, "offsetd: %s\n", strings.TrimPrefix(err.Error(), "offsetd: "))
	return 1
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
