package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/store"
)

func init() {
	commands["diff"] = command{
		summary: "compare two runs: the rows a fix (or a new engine) changed, drifts and modes before and after",
		run:     func(args []string) int { return runDiff(args, os.Stdout, os.Stderr) },
	}
}

// diffFlags are the flags of `sampviz diff`.
type diffFlags struct {
	fs        *flag.FlagSet
	backend   string
	kernels   string
	data      string
	jsonOut   bool
	maxRows   int
	maxMemory byteSize
}

func newDiffFlags(stderr io.Writer) *diffFlags {
	c := &diffFlags{fs: flag.NewFlagSet("diff", flag.ContinueOnError)}
	fs := c.fs
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sampviz diff [flags] A B\n\n"+
			"Judges A (before) and B (after), two dumps, or with --data two runs that\n"+
			"sampviz serve stored (their outputs are judged again, no kernel runs), and\n"+
			"compares them: on the same inputs, the rows that changed verdict, every\n"+
			"row's drift before and after, the mode tables side by side and the\n"+
			"acceptance by position; on different inputs, the summaries and where the\n"+
			"inputs part. Exit status: 0 when nothing got worse, 1 when a row went from\n"+
			"pass to fail or a drift grew past its tolerance, 2 when a file cannot be\n"+
			"used or the runs are of two ops.\n\nflags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.backend, "backend", "auto", "where our kernels run for dumps: cpu, cuda, auto, or none (judge only the dumps' external outputs)")
	fs.StringVar(&c.kernels, "kernels", "", "path of libsampviz_kernels.so (default: $SAMPVIZ_KERNELS, next to the binary, ./build)")
	fs.StringVar(&c.data, "data", "", "sampviz serve's data directory: A and B are run ids stored there")
	fs.BoolVar(&c.jsonOut, "json", false, "print the comparison as JSON")
	fs.IntVar(&c.maxRows, "max-rows", 20, "changed rows listed per output in the text (0: all)")
	c.maxMemory = byteSize(defaultMaxMemory())
	fs.Var(&c.maxMemory, "max-memory", "most memory one run may take to judge (default: half the machine's memory, at most 8GiB)")
	return c
}

// runDiff is `sampviz diff`: two jobs of the judging session compared by
// engine/diff (session.Diff), printed as text or JSON.
func runDiff(args []string, stdout, stderr io.Writer) int {
	c := newDiffFlags(stderr)
	c.fs.SetOutput(io.Discard)
	pos, err := parseInterleaved(c.fs, args)
	c.fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		c.fs.Usage()
		return exitOK
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sampviz diff: "+format+"\n", a...)
		return exitUnusable
	}
	if err != nil {
		return fail("%v (sampviz diff -h lists the flags)", err)
	}
	if len(pos) != 2 {
		c.fs.Usage()
		return exitUnusable
	}
	jobs, closeJobs, err := c.jobs(pos[0], pos[1])
	if err != nil {
		return fail("%v", err)
	}
	defer closeJobs()
	backend := c.backend
	switch {
	case c.data != "":
		backend = session.NoBackend // stored runs are judged again, no kernel runs
	case backend == session.NoBackend:
		jobs[0].Backend, jobs[1].Backend = session.NoBackend, session.NoBackend
	}
	sess, closeBackend, err := newSession(backend, c.kernels, int64(c.maxMemory), 0)
	if err != nil {
		return fail("%v", err)
	}
	defer closeBackend()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	d, err := sess.Diff(ctx, jobs[0], jobs[1])
	if err != nil {
		return fail("%v", err)
	}
	if c.jsonOut {
		if err := writeJSON(stdout, d); err != nil {
			return fail("write the comparison: %v", err)
		}
	} else {
		writeDiffText(stdout, d, c.maxRows)
	}
	if d.Worse {
		return exitViolated
	}
	return exitOK
}

// jobs turns the two arguments into the session's jobs: dumps, or with
// --data the runs stored there (their dump, their stored outputs, their
// backend and parameters).
func (c *diffFlags) jobs(a, b string) ([2]session.Job, func(), error) {
	if c.data == "" {
		return [2]session.Job{{DumpPath: a}, {DumpPath: b}}, func() {}, nil
	}
	st, err := store.Open(c.data)
	if err != nil {
		return [2]session.Job{}, nil, fmt.Errorf("open the data directory: %w", err)
	}
	var jobs [2]session.Job
	for i, id := range []string{a, b} {
		if !store.ValidID(id) {
			st.Close()
			return jobs, nil, fmt.Errorf("%q is not a run id (10 characters of a-z and 2-7)", id)
		}
		run, err := st.Run(id)
		if err != nil {
			st.Close()
			if errors.Is(err, store.ErrNotFound) {
				return jobs, nil, fmt.Errorf("%s holds no run %s", c.data, id)
			}
			return jobs, nil, fmt.Errorf("read run %s: %w", id, err)
		}
		var p engine.Overrides
		if err := json.Unmarshal(run.Params, &p); err != nil {
			st.Close()
			return jobs, nil, fmt.Errorf("decode the parameters of run %s: %w", id, err)
		}
		jobs[i] = session.Job{
			DumpPath: st.DumpPath(run.DumpSHA, run.DumpExt), FileName: id + " (" + run.FileName + ")",
			OutputsPath: st.OutputsPath(run.ID), Overrides: p,
		}
	}
	return jobs, func() { st.Close() }, nil
}

// parseInterleaved parses flags that may come before or after the
// positional arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
