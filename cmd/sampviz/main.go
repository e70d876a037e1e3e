// Command sampviz is the one binary of sampviz: the web server (serve, the
// default), the dump checker (check), the kernel benchmarks (bench), the
// scenario catalogue (scenarios) and the internal GPU worker (worker).
package main

import (
	"fmt"
	"os"
	"sort"
)

// Exit codes shared by every subcommand.
const (
	exitOK       = 0 // everything passed
	exitViolated = 1 // a violation was found
	exitUnusable = 2 // bad usage or a file that cannot be used
)

// command is one subcommand. run gets the arguments after the subcommand's
// name and returns the process exit code.
type command struct {
	summary string
	run     func(args []string) int
	hidden  bool
}

// commands is filled by each subcommand's file in its init.
var commands = map[string]command{}

const defaultCommand = "serve"

func main() {
	os.Exit(dispatch(os.Args[1:]))
}

func dispatch(args []string) int {
	name := defaultCommand
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		usage()
		return exitOK
	}
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "sampviz: unknown command %q\n", name)
		usage()
		return exitUnusable
	}
	return cmd.run(args)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: sampviz [command] [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		def := ""
		if n == defaultCommand {
			def = " (default)"
		}
		fmt.Fprintf(os.Stderr, "  %-10s %s%s\n", n, commands[n].summary, def)
	}
	fmt.Fprintln(os.Stderr, "\nrun 'sampviz COMMAND -h' for a command's flags")
}
