package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/samplertest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// writeDump writes tensors and metadata as a safetensors file in dir.
func writeDump(t *testing.T, dir, name string, meta map[string]string, tensors ...*engine.Tensor) string {
	t.Helper()
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// softmaxRows computes a float64 softmax of each row at temperature temp.
func softmaxRows(logits []float64, rows, vocab int, temp float64) []float64 {
	out := make([]float64, len(logits))
	for r := 0; r < rows; r++ {
		row := logits[r*vocab : (r+1)*vocab]
		m := math.Inf(-1)
		for _, x := range row {
			m = math.Max(m, x)
		}
		var s float64
		for i, x := range row {
			out[r*vocab+i] = math.Exp((x - m) / temp)
			s += out[r*vocab+i]
		}
		for i := range row {
			out[r*vocab+i] /= s
		}
	}
	return out
}

// checkDumps writes the dumps the golden tests judge. Values come from a
// fixed seed so the reports do not change between runs.
func checkDumps(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 11))
	const rows, vocab = 6, 1000

	// softmax, f32 logits, external probs from a correct float32 computation.
	logits := make([]float64, rows*vocab)
	for i := range logits {
		logits[i] = float64(float32(rng.NormFloat64() * 4))
	}
	probs := softmaxRows(logits, rows, vocab, 0.5)
	good := writeDump(t, dir, "softmax_good.safetensors", map[string]string{"op": "softmax"},
		engine.FromFloat64s("logits", engine.F32, []int{rows, vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, nil, []float64{0.5}),
		engine.FromFloat64s("probs", engine.F32, []int{rows, vocab}, probs))

	// The same with faults: row 1 holds a NaN, row 4 is scaled by 1.01.
	bad := append([]float64(nil), probs...)
	bad[1*vocab+3] = math.NaN()
	for i := 4 * vocab; i < 5*vocab; i++ {
		bad[i] *= 1.01
	}
	faulty := writeDump(t, dir, "softmax_faulty.safetensors", map[string]string{"op": "softmax"},
		engine.FromFloat64s("logits", engine.F32, []int{rows, vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, nil, []float64{0.5}),
		engine.FromFloat64s("probs", engine.F32, []int{rows, vocab}, bad))

	// argmax, bf16 logits, tokens: row 2 wrong, row 5 outside the vocabulary.
	tokens := make([]int64, rows)
	for r := range tokens {
		best := 0
		for i := 1; i < vocab; i++ {
			if float32(logits[r*vocab+i]) > float32(logits[r*vocab+best]) {
				best = i
			}
		}
		tokens[r] = int64(best)
	}
	tokens[2] = (tokens[2] + 1) % vocab
	tokens[5] = vocab + 7
	argmax := writeDump(t, dir, "argmax.safetensors", nil,
		engine.FromFloat64s("logits", engine.BF16, []int{rows, vocab}, logits),
		engine.FromInts("tokens", engine.I64, []int{rows}, tokens))

	// A file that is not a dump.
	broken := filepath.Join(dir, "broken.safetensors")
	if err := os.WriteFile(broken, []byte("\x10\x00\x00\x00\x00\x00\x00\x00{\"logits\": 1}   "), 0o644); err != nil {
		t.Fatal(err)
	}
	// sample: external draws of a sampler that moves 5% of the top token's
	// mass to the second; spec_verify: a chain that accepts with p(x)
	// ignoring the draft probabilities.
	sample := writeCase(t, dir, "sample_biased.safetensors", func(rng *rand.Rand) ([]*engine.Tensor, map[string]string) {
		return samplertest.SampleDump(rng, samplertest.SampleCase{Rows: 3, V: 1000, N: 20000, DType: engine.F32, Sigma: 2.5,
			Params: samplertest.Params{Temperature: 0.8, TopK: 100, TopP: 0.95}, Sampler: samplertest.Sampler{Mistake: samplertest.TopTwoBias, Bias: 0.05}})
	})
	spec := writeCase(t, dir, "spec_wrong_acceptance.safetensors", func(rng *rand.Rand) ([]*engine.Tensor, map[string]string) {
		return samplertest.SpecDump(rng, samplertest.SpecCase{Rows: 3, K: 3, V: 200, Trials: 3000, Sigma: 2, DraftNoise: 1,
			Params: samplertest.Params{Temperature: 0.8, TopP: 1}, Mistake: samplertest.AcceptIgnoresDraft})
	})
	return map[string]string{"good": good, "faulty": faulty, "argmax": argmax, "broken": broken, "sample": sample, "spec": spec}
}

// writeCase writes the dump that build returns, from a fixed seed, as name
// in dir.
func writeCase(t *testing.T, dir, name string, build func(*rand.Rand) ([]*engine.Tensor, map[string]string)) string {
	t.Helper()
	tensors, meta := build(rand.New(rand.NewPCG(uint64(len(name)), 5)))
	data, err := samplertest.Encode(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// volatile matches the parts of a text report that depend on the machine.
var volatile = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`(?m)^  backend cpu: .*$`), "  backend cpu: CPU"},
	{regexp.MustCompile(`computed in [0-9.]+[µnm]?s`), "computed in TIME"},
}

func normalise(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.repl)
	}
	return s
}

func TestCheckGolden(t *testing.T) {
	dumps := checkDumps(t)
	tests := []struct {
		name   string
		args   []string
		exit   int
		golden string
	}{
		{"softmax passes", []string{"--backend", "cpu", dumps["good"]}, exitOK, "softmax_good.txt"},
		{"softmax faults", []string{"--backend", "cpu", dumps["faulty"]}, exitViolated, "softmax_faulty.txt"},
		{"softmax faults json", []string{"--backend", "none", "--json", dumps["faulty"]}, exitViolated, "softmax_faulty.json"},
		{"argmax wrong tokens", []string{dumps["argmax"], "--backend", "cpu"}, exitViolated, "argmax.txt"},
		{"argmax json", []string{"--backend", "none", "--json", dumps["argmax"]}, exitViolated, "argmax.json"},
		{"looser tolerance clears the scaled row", []string{"--backend", "none", "--rtol", "0.02", "--atol", "1e-4", dumps["faulty"]}, exitViolated, "softmax_faulty_loose.txt"},
		{"tolerance table", []string{"--tolerances"}, exitOK, "tolerances.txt"},
		{"biased sampler", []string{"--backend", "cpu", "--draws", "20000", dumps["sample"]}, exitViolated, "sample_biased.txt"},
		{"wrong acceptance rule", []string{"--backend", "cpu", "--trials", "3000", dumps["spec"]}, exitViolated, "spec_wrong_acceptance.txt"},
		{"logprobs raw, processed and confused", []string{"--backend", "cpu", logprobsScenario}, exitViolated, "logprobs_kinds.txt"},
		{"logprobs all judged as processed", []string{"--backend", "none", "--logprobs-kind", "processed", logprobsScenario}, exitViolated, "logprobs_processed.txt"},
		{"NaN and masked input rows", []string{"--backend", "cpu", nanMaskedScenario}, exitViolated, "nan_masked.txt"},
		{"sampler bugs named", []string{"--backend", "cpu", "--draws", "10000", diagnosesScenario}, exitViolated, "sampler_diagnoses.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runCheck(tt.args, &stdout, &stderr)
			if code != tt.exit {
				t.Fatalf("exit %d, want %d; stderr: %s\nstdout:\n%s", code, tt.exit, stderr.String(), stdout.String())
			}
			got := normalise(stdout.String())
			got = strings.ReplaceAll(got, filepath.Dir(dumps["good"])+string(filepath.Separator), "")
			checkGolden(t, tt.golden, got)
		})
	}
}

// logprobsScenario is the scenario whose logprobs outputs the golden
// reports of logprobs judge.
var logprobsScenario = filepath.Join("..", "..", "scenarios", "logprobs-kinds", "logprobs-kinds.safetensors")

// nanMaskedScenario has a row of NaN logits and a masked row: the rows fail
// on their input, and the report says so.
var nanMaskedScenario = filepath.Join("..", "..", "scenarios", "nan-and-masked-rows", "nan-and-masked-rows.safetensors")

// diagnosesScenario is the scenario whose samplers' bugs the golden report
// sampler_diagnoses names.
var diagnosesScenario = filepath.Join("..", "..", "scenarios", "sampler-diagnoses", "sampler-diagnoses.safetensors")

// checkGolden compares got with the golden file testdata/name, or writes it
// there with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (-got +want):\n%s", path, lineDiff(got, string(want)))
	}
}

func TestCheckJSONShape(t *testing.T) {
	dumps := checkDumps(t)
	var stdout, stderr bytes.Buffer
	if code := runCheck([]string{"--json", "--backend", "cpu", dumps["faulty"]}, &stdout, &stderr); code != exitViolated {
		t.Fatalf("exit %d; stderr %s", code, stderr.String())
	}
	var report struct {
		Pass    *bool   `json:"pass"`
		Op      *string `json:"op"`
		Outputs []struct {
			Name *string `json:"name"`
			Pass *bool   `json:"pass"`
			Rows []struct {
				Row        *int     `json:"row"`
				Pass       *bool    `json:"pass"`
				Violations []string `json:"violations"`
			} `json:"rows"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("report is not JSON: %v", err)
	}
	if report.Pass == nil || *report.Pass || report.Op == nil || *report.Op != "softmax" || len(report.Outputs) != 2 {
		t.Fatalf("top level: pass %v op %v outputs %d", report.Pass, report.Op, len(report.Outputs))
	}
	failing := map[string][]int{}
	for _, o := range report.Outputs {
		if o.Name == nil || o.Pass == nil {
			t.Fatalf("output without name or pass")
		}
		for _, r := range o.Rows {
			if r.Row == nil || r.Pass == nil || r.Violations == nil {
				t.Fatalf("output %s: row without row, pass or violations", *o.Name)
			}
			if !*r.Pass {
				failing[*o.Name] = append(failing[*o.Name], *r.Row)
			}
		}
	}
	if got := failing["cpu"]; len(got) != 0 {
		t.Errorf("our cpu output fails rows %v, want none", got)
	}
	if got := failing["probs"]; len(got) != 2 || got[0] != 1 || got[1] != 4 {
		t.Errorf("external probs fail rows %v, want [1 4]", got)
	}
}

func TestCheckUnusableFile(t *testing.T) {
	dumps := checkDumps(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"malformed dump", []string{dumps["broken"]}, "broken.safetensors"},
		{"missing file", []string{filepath.Join(t.TempDir(), "nope.safetensors")}, "nope.safetensors"},
		{"no dump given", nil, "usage"},
		{"bad override", []string{"--filter-order", "sideways", dumps["good"]}, "filter_order must be top_k_first, joint or min_p_first"},
		{"unknown backend", []string{"--backend", "tpu", dumps["good"]}, "tpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runCheck(tt.args, &stdout, &stderr); code != exitUnusable {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUnusable, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q does not mention %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty: %q", stdout.String())
			}
		})
	}
}

func TestCheckExample(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runCheck([]string{"--example", "--backend", "cpu"}, &stdout, &stderr); code != exitViolated {
		t.Fatalf("exit %d; stderr %s", code, stderr.String())
	}
	for _, want := range []string{"row 2:", "row 3:", "row 6: input logits contain NaN"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("example report lacks %q:\n%s", want, stdout.String())
		}
	}
}

// checkJSON runs `sampviz check --json` with args and returns the report.
func checkJSON(t *testing.T, wantExit int, args ...string) *engine.Report {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runCheck(append([]string{"--json"}, args...), &stdout, &stderr)
	var rep engine.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, stderr %s: report is not JSON: %v", code, stderr.String(), err)
	}
	if code != wantExit {
		var fails []string
		for _, o := range rep.Outputs {
			for _, r := range o.Rows {
				fails = append(fails, r.Violations...)
			}
			fails = append(fails, o.Violations...)
		}
		t.Fatalf("exit %d, want %d; stderr %s; violations:\n%s", code, wantExit, stderr.String(), strings.Join(fails, "\n"))
	}
	return &rep
}

// outputNamed returns the report of the output named name.
func outputNamed(t *testing.T, rep *engine.Report, name string) *engine.OutputReport {
	t.Helper()
	for i := range rep.Outputs {
		if rep.Outputs[i].Name == name {
			return &rep.Outputs[i]
		}
	}
	t.Fatalf("no output %q", name)
	return nil
}

// hasNoteWith reports whether an output has a note that contains s.
func hasNoteWith(o *engine.OutputReport, s string) bool {
	for _, n := range o.Notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// TestCheckSamplers judges, end to end, torch.multinomial draws on correct
// probabilities at a 128256-token vocabulary beside our own sampler at the
// default 10^5 draws per row (with the seed rules), and a biased sampler.
func TestCheckSamplers(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		c       samplertest.SampleCase
		exit    int
		extPass bool
	}{
		{"torch.multinomial, V 128256", samplertest.SampleCase{Rows: 2, V: 128256, N: 100000, DType: engine.BF16, Sigma: 3,
			Params: samplertest.Params{Temperature: 0.9, TopP: 1}}, exitOK, true},
		{"mass moved to the second token", samplertest.SampleCase{Rows: 2, V: 1000, N: 100000, DType: engine.F32, Sigma: 2.5,
			Params: samplertest.Params{Temperature: 0.9, TopP: 0.95}, Sampler: samplertest.Sampler{Mistake: samplertest.TopTwoBias, Bias: 0.01}}, exitViolated, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeCase(t, dir, fmt.Sprintf("sample%d.safetensors", i), func(rng *rand.Rand) ([]*engine.Tensor, map[string]string) {
				return samplertest.SampleDump(rng, tt.c)
			})
			rep := checkJSON(t, tt.exit, "--backend", "cpu", path)
			ours := outputNamed(t, rep, "cpu")
			if !ours.Pass || ours.Kind != "samples" {
				t.Errorf("our sampler: pass %v kind %q, notes %q", ours.Pass, ours.Kind, ours.Notes)
			}
			for _, r := range ours.Rows {
				if r.Fit == nil || r.Fit.Draws != engine.DefaultDraws || r.PValue == nil || *r.PValue < compare.DefaultPValue {
					t.Errorf("our row %d: fit %+v p %v, want %d draws that pass", r.Row, r.Fit, r.PValue, engine.DefaultDraws)
				}
			}
			for _, want := range []string{"seeds: the same seed gave the same 2 draws", "seeds: different seeds agree at"} {
				if !hasNoteWith(ours, want) {
					t.Errorf("our output lacks the note %q: %q", want, ours.Notes)
				}
			}
			ext := outputNamed(t, rep, "samples")
			if ext.Pass != tt.extPass {
				t.Fatalf("external samples pass %v, want %v", ext.Pass, tt.extPass)
			}
			for _, r := range ext.Rows {
				switch {
				case r.PValue == nil || r.Fit == nil:
					t.Errorf("external row %d: no fit", r.Row)
				case tt.extPass && (*r.PValue < compare.DefaultPValue || r.Fit.DF < 1000):
					t.Errorf("external row %d: p %v over %d bins, want a pass over many bins", r.Row, *r.PValue, r.Fit.Bins)
				case !tt.extPass && !slices.ContainsFunc(r.Findings, func(f engine.Finding) bool { return f.Rule == engine.RuleFit && f.Severity == engine.Violation }):
					t.Errorf("external row %d: violations %q, want a goodness-of-fit violation", r.Row, r.Violations)
				}
			}
		})
	}
}

// TestCheckSpeculative judges, end to end, our spec_verify at the default
// number of trials beside external chains: correct ones with draft
// probabilities, with one-hot drafts and with a draft equal to the target
// (acceptance 1 up to float32 rounding, which our float32 kernel meets),
// and wrong ones.
func TestCheckSpeculative(t *testing.T) {
	dir := t.TempDir()
	base := samplertest.SpecCase{Rows: 6, K: 4, V: 1000, Trials: 10000, Sigma: 2.5, DraftNoise: 1, Params: samplertest.Params{Temperature: 0.8, TopP: 1}}
	with := func(f func(c *samplertest.SpecCase)) samplertest.SpecCase {
		c := base
		f(&c)
		return c
	}
	tests := []struct {
		name string
		c    samplertest.SpecCase
		exit int
		// bad is the external output that must fail, with a violation of
		// one of rules in its failing rows.
		bad   string
		rules []engine.Rule
	}{
		{"exact chain, draft probabilities", base, exitOK, "", nil},
		{"exact chain, one-hot drafts", with(func(c *samplertest.SpecCase) { c.OneHot = true }), exitOK, "", nil},
		{"exact chain, draft equal to the target", with(func(c *samplertest.SpecCase) { c.DraftNoise = 0 }), exitOK, "", nil},
		{"rejection resampled from the target", with(func(c *samplertest.SpecCase) { c.Mistake = samplertest.ResampleFromTarget }), exitViolated,
			"spec_trials", []engine.Rule{engine.RuleSupport, engine.RuleFit}},
		{"spec_emitted reports the accepted count", with(func(c *samplertest.SpecCase) { c.Rows = 16; c.EmittedIsAccepted = true }), exitViolated,
			"spec_tokens", []engine.Rule{engine.RuleCounter}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeCase(t, dir, fmt.Sprintf("spec%d.safetensors", i), func(rng *rand.Rand) ([]*engine.Tensor, map[string]string) {
				return samplertest.SpecDump(rng, tt.c)
			})
			rep := checkJSON(t, tt.exit, "--backend", "cpu", path)
			ours := outputNamed(t, rep, "cpu")
			if !ours.Pass || ours.Spec == nil || ours.Spec.Trials != tt.c.Rows*engine.DefaultTrials || len(ours.Spec.Positions) != tt.c.K {
				t.Fatalf("our spec_verify: pass %v, pooled %+v, want %d trials over %d positions", ours.Pass, ours.Spec, tt.c.Rows*engine.DefaultTrials, tt.c.K)
			}
			for _, r := range ours.Rows {
				if r.Spec == nil || len(r.Spec.Lossless) != tt.c.K+1 || r.PValue == nil {
					t.Errorf("our row %d: statistics %+v", r.Row, r.Spec)
				}
			}
			if !hasNoteWith(ours, "spec_accepted sums to") {
				t.Errorf("our output lacks the spec_accepted note: %q", ours.Notes)
			}
			for _, name := range []string{"spec_tokens", "spec_trials"} {
				o := outputNamed(t, rep, name)
				if name != tt.bad {
					if tt.bad == "" && !o.Pass {
						t.Errorf("%s of an exact chain fails", name)
					}
					continue
				}
				if o.Pass {
					t.Fatalf("%s of a wrong chain passes", name)
				}
				for _, r := range o.Rows {
					if !r.Pass && !slices.ContainsFunc(r.Findings, func(f engine.Finding) bool {
						return f.Severity == engine.Violation && slices.Contains(tt.rules, f.Rule)
					}) {
						t.Errorf("%s row %d: violations %q, want one of %v", name, r.Row, r.Violations, tt.rules)
					}
				}
			}
		})
	}
}

// TestDefaultWork checks that check sets our backend's draws and trials
// when neither the dump nor the flags do, and leaves them alone otherwise.
func TestDefaultWork(t *testing.T) {
	tests := []struct {
		name          string
		op            engine.Op
		args          []string
		draws, trials int
	}{
		{"sample, unset", engine.OpSample, nil, engine.DefaultDraws, 0},
		{"sample, --draws 7", engine.OpSample, []string{"--draws", "7"}, 7, 0},
		{"sample, --draws 0", engine.OpSample, []string{"--draws", "0"}, 0, 0},
		{"spec_verify, unset", engine.OpSpecVerify, nil, 0, engine.DefaultTrials},
		{"spec_verify, --trials 3", engine.OpSpecVerify, []string{"--trials", "3"}, 0, 3},
		{"softmax", engine.OpSoftmax, nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCheckFlags(io.Discard)
			if _, err := c.parse(append(tt.args, "dump")); err != nil {
				t.Fatal(err)
			}
			ov := c.overrides
			run := &engine.Run{Op: tt.op}
			if ov.Draws != nil {
				run.Params.Draws = *ov.Draws
			}
			if ov.Trials != nil {
				run.Params.Trials = *ov.Trials
			}
			run.SetWorkDefaults(ov)
			if run.Params.Draws != tt.draws || run.Params.Trials != tt.trials {
				t.Errorf("draws %d trials %d, want %d and %d", run.Params.Draws, run.Params.Trials, tt.draws, tt.trials)
			}
		})
	}
}

// lineDiff prints the lines that differ, marked - (got) and + (want).
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			b.WriteString("-" + gl + "\n+" + wl + "\n")
		}
	}
	return b.String()
}

// TestCheckTokenText: the text report names tokens with their text, from
// the dump's tokenizer metadata or --tokenizer; a file that is not a
// tokenizer.json is unusable input, in one line naming it.
func TestCheckTokenText(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "vocab.json")
	if err := os.WriteFile(bad, []byte(`{"model": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join("..", "..", "scenarios", "real-softmax", "real-softmax.safetensors")
	tests := []struct {
		name  string
		args  []string
		exit  int
		words []string // in stdout, or in stderr when exit is 2
	}{
		{"the dump's tokenizer metadata", []string{real}, exitOK, []string{"at row ", " ‹"}},
		{"a file that is not a tokenizer", []string{"--tokenizer", bad, real}, exitUnusable, []string{"vocab.json: "}},
		{"a missing tokenizer", []string{"--tokenizer", filepath.Join(dir, "none.json"), real}, exitUnusable, []string{"none.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runCheck(append([]string{"--backend", "cpu"}, tt.args...), &stdout, &stderr)
			if code != tt.exit {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.exit, stderr.String())
			}
			out := stdout.String()
			if tt.exit == exitUnusable {
				out = stderr.String()
				if strings.Count(strings.TrimSpace(out), "\n") > 0 {
					t.Errorf("stderr is more than a line: %q", out)
				}
			}
			for _, w := range tt.words {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
