package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/web"
)

func init() {
	commands["scenarios"] = command{
		summary: "list the built-in scenarios, show one's README, or write their dumps out",
		run:     func(args []string) int { return runScenarios(args, os.Stdout, os.Stderr) },
	}
}

// webScenarios returns the catalogue as the web server lists it on "/".
func webScenarios() []web.Scenario {
	var out []web.Scenario
	for _, s := range scenarios.Catalogue() {
		ws := web.Scenario{
			Name: s.Name, Title: s.Title, Summary: s.Summary,
			FileName: s.FileName(), Open: s.Open, View: s.View,
			Params: engine.Overrides{Draws: s.Overrides.Draws, Trials: s.Overrides.Trials},
		}
		if s.Diff != nil {
			ws.AfterFileName, ws.OpenAfter = s.Diff.After, s.OpenAfter
		}
		out = append(out, ws)
	}
	return out
}

func runScenarios(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scenarios", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("write", "", "write the dumps (all, or NAME's) into this directory, for `sampviz check`")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sampviz scenarios [--write DIR] [NAME]\n\n"+
			"Lists the built-in scenarios; with NAME, prints its README and how to open it;\n"+
			"with --write DIR, writes the dumps (all, or NAME's) so that `sampviz check` can run them.\n\nflags:")
		fs.PrintDefaults()
	}
	// Flags may come before or after the name.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUnusable
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "sampviz scenarios: one scenario at a time, not %q\n", pos)
		return exitUnusable
	}
	chosen := scenarios.Catalogue()
	if len(pos) == 1 {
		s, ok := scenarios.Lookup(pos[0])
		if !ok {
			fmt.Fprintf(stderr, "sampviz scenarios: there is no scenario %q (run 'sampviz scenarios' for the list)\n", pos[0])
			return exitUnusable
		}
		chosen = []scenarios.Scenario{s}
	}
	switch {
	case *dir != "":
		if err := writeScenarios(stdout, *dir, chosen); err != nil {
			fmt.Fprintf(stderr, "sampviz scenarios: %v\n", err)
			return exitUnusable
		}
	case len(pos) == 1:
		showScenario(stdout, chosen[0])
	default:
		listScenarios(stdout, chosen)
	}
	return exitOK
}

// listScenarios prints one line per scenario.
func listScenarios(w io.Writer, list []scenarios.Scenario) {
	width := 0
	for _, s := range list {
		width = max(width, len(s.Name))
	}
	for _, s := range list {
		fmt.Fprintf(w, "%-*s  %s\n", width, s.Name, s.Title)
	}
	fmt.Fprintln(w, "\nrun 'sampviz scenarios NAME' for one's README, 'sampviz scenarios --write DIR' for the dumps")
}

// showScenario prints a scenario's README and where to open it.
func showScenario(w io.Writer, s scenarios.Scenario) {
	fmt.Fprint(w, strings.TrimRight(s.README, "\n")+"\n\n")
	fmt.Fprintln(w, "Open it:")
	fmt.Fprintf(w, "  in the browser: run 'sampviz serve' and pick %q under Scenarios on the home page\n", s.Title)
	view := "the run page"
	if s.View != "" {
		view = "/runs/ID" + s.View
	}
	fmt.Fprintf(w, "                  (it opens %s)\n", view)
	fmt.Fprintf(w, "  from a terminal: sampviz scenarios --write DIR %s\n", s.Name)
	fmt.Fprintf(w, "                   %s\n", checkCommand(filepath.Join("DIR", s.FileName()), s))
	if s.Diff != nil {
		fmt.Fprintf(w, "                   %s\n", diffCommand(filepath.Join("DIR", s.FileName()), filepath.Join("DIR", s.Diff.After)))
	}
}

// diffCommand is the `sampviz diff` line that compares a written
// before/after pair.
func diffCommand(before, after string) string {
	return strings.Join([]string{"sampviz", "diff", before, after}, " ")
}

// checkCommand is the `sampviz check` line that judges a written dump.
func checkCommand(path string, s scenarios.Scenario) string {
	return strings.Join(append(append([]string{"sampviz", "check"}, s.Overrides.Flags()...), path), " ")
}

// writeScenarios writes the dumps of list into dir and prints how to check
// each.
func writeScenarios(w io.Writer, dir string, list []scenarios.Scenario) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, s := range list {
		b, err := s.DumpBytes()
		if err != nil {
			return err
		}
		path := filepath.Join(dir, s.FileName())
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		fmt.Fprintln(w, checkCommand(path, s))
		if s.Diff == nil {
			continue
		}
		after, err := s.AfterBytes()
		if err != nil {
			return err
		}
		afterPath := filepath.Join(dir, s.Diff.After)
		if err := os.WriteFile(afterPath, after, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", afterPath, err)
		}
		fmt.Fprintln(w, diffCommand(path, afterPath))
	}
	return nil
}
