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
	"strconv"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/dump"
)

func init() {
	commands["check"] = command{
		summary: "judge a dump: run the op on a backend, compare every output with the float64 reference",
		run:     func(args []string) int { return runCheck(args, os.Stdout, os.Stderr) },
	}
}

// checkFlags are the flags of `sampviz check`.
type checkFlags struct {
	fs         *flag.FlagSet
	backend    string
	kernels    string
	jsonOut    bool
	tolerances bool
	example    bool
	maxRows    int

	atol, rtol             float64
	nativeAtol, nativeRtol float64
	pvalue                 float64

	op, filterOrder, topKTies, method string
	temperature, topP, minP           float64
	topK, draws, trials               int
	seed, offset                      uint64
	maxNgram, maxDraft, threshold     int
}

func newCheckFlags(stderr io.Writer) *checkFlags {
	c := &checkFlags{fs: flag.NewFlagSet("check", flag.ContinueOnError)}
	fs := c.fs
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sampviz check [flags] DUMP\n\n"+
			"Runs the dump's op on a backend, computes the float64 reference, and judges\n"+
			"our output and every external output in the dump. Exit status: 0 when\n"+
			"everything passes, 1 when any violation is found, 2 when the file cannot be used.\n\nflags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.backend, "backend", "auto", "where our kernels run: cpu, cuda, auto, or none (judge only the dump's external outputs)")
	fs.StringVar(&c.kernels, "kernels", "", "path of libsampviz_kernels.so (default: $SAMPVIZ_KERNELS, next to the binary, ./build)")
	fs.BoolVar(&c.jsonOut, "json", false, "print the report as JSON")
	fs.BoolVar(&c.tolerances, "tolerances", false, "print the default tolerance table and exit")
	fs.BoolVar(&c.example, "example", false, "check the built-in example dump instead of a file")
	fs.IntVar(&c.maxRows, "max-rows", 20, "failing rows described per output in the text report (0: all)")

	fs.Float64Var(&c.atol, "atol", 0, "strict tolerance: absolute part (default: the table's, by dtype)")
	fs.Float64Var(&c.rtol, "rtol", 0, "strict tolerance: relative part (default: the table's, by dtype)")
	fs.Float64Var(&c.nativeAtol, "native-atol", 0, "native tolerance: absolute part (default: the table's)")
	fs.Float64Var(&c.nativeRtol, "native-rtol", 0, "native tolerance: relative part (default: the table's)")
	fs.Float64Var(&c.pvalue, "pvalue", 0, "goodness-of-fit threshold of the statistical checks (default 1e-6)")

	fs.StringVar(&c.op, "op", "", "override the op: argmax, softmax, renorm, sample, spec_verify, ngram_match")
	fs.Float64Var(&c.temperature, "temperature", 0, "override every row's temperature (0: greedy)")
	fs.IntVar(&c.topK, "top-k", 0, "override every row's top-k (0: off)")
	fs.Float64Var(&c.topP, "top-p", 0, "override every row's top-p (1: off)")
	fs.Float64Var(&c.minP, "min-p", 0, "override every row's min-p (0: off)")
	fs.Uint64Var(&c.seed, "seed", 0, "override every row's RNG seed")
	fs.Uint64Var(&c.offset, "offset", 0, "override every row's RNG offset")
	fs.StringVar(&c.filterOrder, "filter-order", "", "override the filter order: top_k_first or joint")
	fs.StringVar(&c.topKTies, "top-k-ties", "", "override the top-k tie rule: keep or lowest_index")
	fs.StringVar(&c.method, "method", "", "sampler: inverse_cdf, gumbel or rejection (default: inverse_cdf)")
	fs.IntVar(&c.draws, "draws", engine.DefaultDraws, "independent draws per row that our sampler makes on sample runs (judged statistically)")
	fs.IntVar(&c.trials, "trials", engine.DefaultTrials, "speculative trials per row that our backend runs on spec_verify runs (1: spec_tokens alone)")
	fs.IntVar(&c.maxNgram, "max-ngram-size", 0, "override max_ngram_size")
	fs.IntVar(&c.maxDraft, "max-draft-tokens", 0, "override max_draft_tokens")
	fs.IntVar(&c.threshold, "threshold", 0, "override the n-gram draft budget (threshold)")
	return c
}

// parse parses flags that may come before or after the one positional
// argument, as `sampviz check dump.safetensors --json` is typed.
func (c *checkFlags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, err
		}
		args = c.fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// overrides turns the flags a person set into engine.Overrides.
func (c *checkFlags) overrides() (engine.Overrides, error) {
	var o engine.Overrides
	var err error
	c.fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		switch f.Name {
		case "op":
			var op engine.Op
			op, err = engine.ParseOp(c.op)
			o.Op = &op
		case "temperature":
			o.Temperature = &c.temperature
		case "top-k":
			o.TopK = &c.topK
		case "top-p":
			o.TopP = &c.topP
		case "min-p":
			o.MinP = &c.minP
		case "seed":
			o.Seed = &c.seed
		case "offset":
			o.Offset = &c.offset
		case "filter-order":
			v := engine.FilterOrder(c.filterOrder)
			if v != engine.TopKFirst && v != engine.Joint {
				err = fmt.Errorf("--filter-order %q: want top_k_first or joint", c.filterOrder)
			}
			o.FilterOrder = &v
		case "top-k-ties":
			v := engine.TopKTies(c.topKTies)
			if v != engine.TiesKeep && v != engine.TiesLowestIndex {
				err = fmt.Errorf("--top-k-ties %q: want keep or lowest_index", c.topKTies)
			}
			o.TopKTies = &v
		case "method":
			v := engine.SampleMethod(c.method)
			if v != engine.SampleInverseCDF && v != engine.SampleGumbel && v != engine.SampleRejection {
				err = fmt.Errorf("--method %q: want inverse_cdf, gumbel or rejection", c.method)
			}
			o.Method = &v
		case "draws":
			o.Draws = &c.draws
		case "trials":
			o.Trials = &c.trials
		case "max-ngram-size":
			o.MaxNgramSize = &c.maxNgram
		case "max-draft-tokens":
			o.MaxDraftTokens = &c.maxDraft
		case "threshold":
			o.Threshold = &c.threshold
		}
	})
	return o, err
}

// options turns the tolerance flags a person set into compare.Options. A
// tolerance given in part takes the other part from the table (filled later
// by the judge), so "--rtol 1e-3" alone keeps the table's atol.
func (c *checkFlags) options() compare.Options {
	var o compare.Options
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["atol"] || set["rtol"] {
		o.Strict = &engine.Tolerance{Atol: c.atol, Rtol: c.rtol}
		if !set["atol"] {
			o.Strict.Atol = -1
		}
		if !set["rtol"] {
			o.Strict.Rtol = -1
		}
	}
	if set["native-atol"] || set["native-rtol"] {
		o.Native = &engine.Tolerance{Atol: c.nativeAtol, Rtol: c.nativeRtol}
		if !set["native-atol"] {
			o.Native.Atol = -1
		}
		if !set["native-rtol"] {
			o.Native.Rtol = -1
		}
	}
	o.PValue = c.pvalue
	return o
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	c := newCheckFlags(stderr)
	pos, err := c.parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUnusable
	}
	if c.tolerances {
		writeToleranceTable(stdout)
		return exitOK
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sampviz check: "+format+"\n", a...)
		return exitUnusable
	}
	switch {
	case c.example && len(pos) > 0:
		return fail("give a dump or --example, not both")
	case !c.example && len(pos) != 1:
		c.fs.Usage()
		return exitUnusable
	}
	ov, err := c.overrides()
	if err != nil {
		return fail("%v", err)
	}

	var run *engine.Run
	if c.example {
		run, err = exampleRun(ov)
	} else {
		var f *dump.File
		run, f, err = dump.Load(pos[0], ov)
		if f != nil {
			defer f.Close()
		}
	}
	if err != nil {
		return fail("%v", err)
	}
	run.SetWorkDefaults(ov)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var outs []*engine.Output
	var device *engine.Device
	var backend engine.Backend
	if c.backend != "none" {
		b, err := openBackend(c.backend, c.kernels)
		if err != nil {
			return fail("%v", err)
		}
		if cl, ok := b.(io.Closer); ok {
			defer cl.Close()
		}
		backend = b
		d := b.Device()
		device = &d
		out, err := b.Run(ctx, run)
		if err != nil {
			return fail("%s backend: %v", b.Name(), err)
		}
		outs = append(outs, out)
	}
	opts := c.options()
	if len(outs) > 0 && run.Op == engine.OpSample {
		rr, err := seedReruns(ctx, backend, run)
		if err != nil {
			return fail("%s backend, seed reruns: %v", backend.Name(), err)
		}
		opts.Reruns = rr
	}
	outs = append(outs, compare.ExternalOutputs(run)...)
	if len(outs) == 0 {
		return fail("%s: nothing to judge: --backend none and the dump holds no external outputs", run.Source)
	}

	report, err := compare.Judge(ctx, run, outs, opts, nil)
	if err != nil {
		return fail("judge %s: %v", run.Source, err)
	}
	report.Device = device

	if c.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return fail("write report: %v", err)
		}
	} else {
		writeTextReport(stdout, report, c.maxRows)
	}
	if !report.Pass {
		return exitViolated
	}
	return exitOK
}

// otherSeed is added to every row's seed for the rerun that must draw
// differently (the golden ratio's 64-bit fraction: far from any seed a
// person picks by hand).
const otherSeed = 0x9e3779b97f4a7c15

// seedReruns runs our sampler twice more on a sample run, one token per row
// (Draws 0), first with the same seeds and offsets, then with other seeds,
// for the seed rules; our output must be outs[0].
func seedReruns(ctx context.Context, b engine.Backend, run *engine.Run) (*compare.Reruns, error) {
	rerun := *run
	rerun.Params.Draws = 0
	same, err := b.Run(ctx, &rerun)
	if err != nil {
		return nil, err
	}
	rerun.Params.Seed = make([]uint64, len(run.Params.Seed))
	for r, s := range run.Params.Seed {
		rerun.Params.Seed[r] = s + otherSeed
	}
	other, err := b.Run(ctx, &rerun)
	if err != nil {
		return nil, err
	}
	return &compare.Reruns{Output: 0, SameSeed: same.Tokens, OtherSeed: other.Tokens}, nil
}

// writeToleranceTable prints the default tolerances per dtype.
func writeToleranceTable(w io.Writer) {
	fmt.Fprintln(w, "Default tolerances (|out - ref| <= atol + rtol*|ref|), close to torch.testing's:")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %-6s %-10s %-10s\n", "dtype", "atol", "rtol")
	for _, row := range compare.ToleranceTable() {
		fmt.Fprintf(w, "  %-6s %-10s %-10s\n", row.DType, fmtNum(row.Atol), fmtNum(row.Rtol))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "strict: the entry of the less precise of the input and output dtypes, against")
	fmt.Fprintln(w, "        the float64 reference on the exact inputs.")
	fmt.Fprintln(w, "native: the output dtype's entry, against the reference whose scaled logits")
	fmt.Fprintln(w, "        were first rounded to the input dtype (a kernel dividing in bf16).")
	fmt.Fprintln(w, "A row passes when it is within either. Override with --atol/--rtol and")
	fmt.Fprintln(w, "--native-atol/--native-rtol.")
}

// fmtNum prints a number the way reports do: %.2g, plain for integers.
func fmtNum(v float64) string {
	if v == float64(int64(v)) && v < 1e6 && v > -1e6 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}
