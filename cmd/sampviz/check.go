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
	"strings"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/session"
)

func init() {
	commands["check"] = command{
		summary: "judge a dump: run the op on a backend, compare every output with the float64 reference",
		run:     func(args []string) int { return runCheck(args, os.Stdout, os.Stderr) },
	}
}

// checkFlags are the flags of `sampviz check`. The run parameters are the
// parameter table's (engine.Param): one flag each, parsed and checked there.
type checkFlags struct {
	fs         *flag.FlagSet
	backend    string
	kernels    string
	jsonOut    bool
	junit      string
	format     string
	tolerances bool
	example    bool
	maxRows    int
	maxMemory  byteSize
	tokenizer  string
	gpu        gpuNumber

	atol, rtol             float64
	nativeAtol, nativeRtol float64
	pvalue                 float64

	overrides engine.Overrides
}

func newCheckFlags(stderr io.Writer) *checkFlags {
	c := &checkFlags{fs: flag.NewFlagSet("check", flag.ContinueOnError)}
	fs := c.fs
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sampviz check [flags] DUMP...\n\n"+
			"Runs the dump's op on a backend, computes the float64 reference, and judges\n"+
			"our output and every external output in the dump. Exit status: 0 when\n"+
			"everything passes, 1 when any violation is found, 2 when the file cannot be used.\n"+
			"--semantics any judges the dump's outputs under every engine's filter chain\n"+
			"instead, and exits 0 when one passes.\n"+
			"Several dumps, folders (their dumps, recursively) and patterns (*.safetensors)\n"+
			"give one line per file and a total, and the worst exit status.\n\nflags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.backend, "backend", "auto", "where our kernels run: cpu, cuda, auto, or none (judge only the dump's external outputs)")
	fs.StringVar(&c.kernels, "kernels", "", "path of libsampviz_kernels.so (default: $SAMPVIZ_KERNELS, next to the binary, ./build)")
	fs.Var(&c.gpu, "gpu", "the GPU the cuda backend runs on, as CUDA numbers them (one run uses one GPU)")
	fs.BoolVar(&c.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&c.junit, "junit", "", "also write a JUnit XML report to this file: a test case per dump, a failure per failing row")
	fs.StringVar(&c.format, "format", "text", "text, or github: GitHub Actions annotations (::error file=...::) per failing row")
	fs.BoolVar(&c.tolerances, "tolerances", false, "print the default tolerance table and exit")
	fs.BoolVar(&c.example, "example", false, "check the built-in example dump instead of a file")
	fs.StringVar(&c.tokenizer, "tokenizer", "", "a Hugging Face tokenizer.json: token text beside ids (default: the dump's tokenizer metadata, if any)")
	fs.IntVar(&c.maxRows, "max-rows", 20, "failing rows described per output in the text report (0: all)")
	c.maxMemory = byteSize(defaultMaxMemory())
	fs.Var(&c.maxMemory, "max-memory", "most memory a dump may take to judge; one that needs more is refused (default: half the machine's memory, at most 8GiB)")

	fs.Float64Var(&c.atol, "atol", 0, "strict tolerance: absolute part (default: the table's, by dtype)")
	fs.Float64Var(&c.rtol, "rtol", 0, "strict tolerance: relative part (default: the table's, by dtype)")
	fs.Float64Var(&c.nativeAtol, "native-atol", 0, "native tolerance: absolute part (default: the table's)")
	fs.Float64Var(&c.nativeRtol, "native-rtol", 0, "native tolerance: relative part (default: the table's)")
	fs.Float64Var(&c.pvalue, "pvalue", 0, "goodness-of-fit threshold of the statistical checks (default 1e-6)")

	for _, p := range engine.ParamTable() {
		usage := "override " + p.Usage
		if p.Rule != "" && (p.Kind != engine.KindChoice || !strings.Contains(p.Usage, p.Choices[0])) {
			usage += "; " + p.Rule
		}
		fs.Func(p.Flag, usage, func(text string) error { return c.overrides.Set(p.Name, text) })
	}
	return c
}

// parse parses flags that may come before or after the one positional
// argument, as `sampviz check dump.safetensors --json` is typed.
func (c *checkFlags) parse(args []string) ([]string, error) {
	return parseInterleaved(c.fs, args)
}

// tolerancesSet turns the tolerance flags a person set into the session's
// tolerances, or nil when none was set. A tolerance given in part keeps the
// table's other part (a negative value), so "--rtol 1e-3" alone keeps the
// table's atol.
func (c *checkFlags) tolerancesSet() *engine.Tolerances {
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	part := func(name string, v float64) float64 {
		if set[name] {
			return v
		}
		return -1
	}
	if !set["atol"] && !set["rtol"] && !set["native-atol"] && !set["native-rtol"] && !set["pvalue"] {
		return nil
	}
	return &engine.Tolerances{
		Strict: engine.Tolerance{Atol: part("atol", c.atol), Rtol: part("rtol", c.rtol)},
		Native: engine.Tolerance{Atol: part("native-atol", c.nativeAtol), Rtol: part("native-rtol", c.nativeRtol)},
		PValue: c.pvalue,
	}
}

// gpuFits refuses --gpu with a backend that runs on no GPU, as serve
// refuses --gpus with --backend cpu.
func (c *checkFlags) gpuFits() error {
	if c.backend != "cpu" && c.backend != session.NoBackend {
		return nil
	}
	given := false
	c.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "gpu" })
	if !given {
		return nil
	}
	return fmt.Errorf("--gpu picks the GPU of the cuda backend; --backend %s runs on none", c.backend)
}

// runCheck is `sampviz check`: one job of the judging session
// (engine/session), printed as text or JSON.
func runCheck(args []string, stdout, stderr io.Writer) int {
	c := newCheckFlags(stderr)
	c.fs.SetOutput(io.Discard) // a bad flag is one sentence, not the whole usage
	pos, err := c.parse(args)
	c.fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		c.fs.Usage()
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "sampviz check: %v (sampviz check -h lists the flags)\n", err)
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
		return fail("give dumps or --example, not both")
	case !c.example && len(pos) == 0:
		c.fs.Usage()
		return exitUnusable
	case c.format != "text" && c.format != "github":
		return fail("--format %q: want text or github", c.format)
	}
	if err := c.gpuFits(); err != nil {
		return fail("%v", err)
	}
	files, err := expandDumps(pos)
	if err != nil {
		return fail("%v", err)
	}
	sess, closeBackend, err := newSession(c.backend, c.kernels, int64(c.maxMemory), int(c.gpu))
	if err != nil {
		return fail("%v", err)
	}
	defer closeBackend()
	backend := session.NoBackend
	if c.backend != session.NoBackend {
		backend = ""
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	judge := func(file string) checked {
		job := session.Job{Overrides: c.overrides, Tolerances: c.tolerancesSet(), Backend: backend, DumpPath: file, TokenizerPath: c.tokenizer}
		out := checked{File: file}
		if c.example {
			out.File = "example.safetensors"
			if job.Run, err = exampleRun(c.overrides); err != nil {
				out.Exit, out.Error = exitUnusable, err.Error()
				return out
			}
		}
		if out.Tokens, err = sess.Tokens(job); err != nil {
			out.Exit, out.Error = exitUnusable, err.Error()
			return out
		}
		start := time.Now()
		rep, err := sess.Execute(ctx, job, nil)
		out.Took = time.Since(start)
		switch {
		case err != nil:
			out.Exit, out.Error = exitUnusable, err.Error()
		case !rep.Pass:
			out.Exit, out.Report = exitViolated, rep
		default:
			out.Report = rep
		}
		return out
	}
	if c.example {
		files = []string{""}
	}
	var results []checked
	exit := exitOK
	for _, f := range files {
		r := judge(f)
		results = append(results, r)
		exit = max(exit, r.Exit)
		if ctx.Err() != nil {
			break
		}
	}
	if c.junit != "" {
		if err := writeJUnit(c.junit, results); err != nil {
			return fail("write %s: %v", c.junit, err)
		}
	}
	switch {
	case c.format == "github":
		writeGitHub(stdout, results, c.maxRows)
	case len(results) > 1 && c.jsonOut:
		if err := writeManyJSON(stdout, results, exit); err != nil {
			return fail("write report: %v", err)
		}
	case len(results) > 1:
		writeSummary(stdout, results)
	case results[0].Error != "":
		return fail("%s", results[0].Error)
	case c.jsonOut:
		if err := writeJSON(stdout, results[0].Report); err != nil {
			return fail("write report: %v", err)
		}
	default:
		writeTextReport(stdout, results[0].Report, c.maxRows, results[0].Tokens)
	}
	return exit
}

// writeToleranceTable prints the default tolerances per dtype.
func writeToleranceTable(w io.Writer) {
	fmt.Fprintln(w, "Default tolerances (|out - ref| <= atol + rtol*|ref|), close to torch.testing's:")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %-6s %-10s %-10s\n", "dtype", "atol", "rtol")
	for _, row := range compare.ToleranceTable() {
		fmt.Fprintf(w, "  %-6s %-10s %-10s\n", row.DType, engine.FormatFloat(row.Atol), engine.FormatFloat(row.Rtol))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "strict: the entry of the less precise of the input and output dtypes, against")
	fmt.Fprintln(w, "        the float64 reference on the exact inputs.")
	fmt.Fprintln(w, "native: the output dtype's entry, against the reference whose scaled logits")
	fmt.Fprintln(w, "        were first rounded to the input dtype (a kernel dividing in bf16).")
	fmt.Fprintln(w, "A row passes when it is within either. Override with --atol/--rtol and")
	fmt.Fprintln(w, "--native-atol/--native-rtol.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Logprobs, on the log scale in nats, by output dtype (|out - ref| <= atol + rtol*|ref|):")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %-6s %-10s %-10s\n", "dtype", "atol", "rtol")
	for _, row := range compare.LogprobTable() {
		fmt.Fprintf(w, "  %-6s %-10s %-10s\n", row.DType, engine.FormatFloat(row.Atol), engine.FormatFloat(row.Rtol))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "A row's atol adds 2^-22 times its largest |logit/T| (float32 rounding of the")
	fmt.Fprintln(w, "scaled logits); --atol/--rtol override these too.")
}

// newSession returns the session of a command's --backend ("none": no
// backend, only the dumps' outputs are judged; "auto": the GPU's where there
// is one, with the cpu backend behind it for what its kernels do not
// serve) under its memory budget, which it also sets as the process's
// memory limit, and the function that closes the backend. A backend named
// by the user runs alone: what it cannot run is an error. The cuda backend
// runs on GPU gpu (check's --gpu; 0 elsewhere).
func newSession(backend, kernels string, maxMemory int64, gpu int) (*session.Session, func(), error) {
	sess, closer := session.New(), func() {}
	if backend != session.NoBackend {
		b, err := openBackend(backend, kernels, gpu)
		if err != nil {
			return nil, nil, err
		}
		if cl, ok := b.(io.Closer); ok {
			closer = func() { cl.Close() }
		}
		sess = session.New(b)
		if (backend == "auto" || backend == "") && b.Name() != "cpu" {
			sess = session.New(b, cpu.New())
		}
	}
	sess.MaxMemory = maxMemory
	limitMemory(maxMemory)
	return sess, closer, nil
}

// writeJSON writes v as indented JSON, as check --json and diff --json
// print their reports.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
