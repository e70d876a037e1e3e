package scenarios_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/diff"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/ref"
	"github.com/sampviz/sampviz/engine/stats"
	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/scenarios/internal/generate"
)

// TestDiffPairs judges both dumps of every before/after pair as `sampviz
// diff` does and checks the comparison its config declares: whether
// something got worse, and exactly the rows fixed and broken.
func TestDiffPairs(t *testing.T) {
	checked := 0
	for _, sc := range scenarios.Catalogue() {
		if sc.Diff == nil {
			continue
		}
		checked++
		t.Run(sc.Name, func(t *testing.T) {
			runA, _, repA := judge(t, sc, sc.Overrides.Engine())
			after, err := sc.AfterBytes()
			if err != nil {
				t.Fatal(err)
			}
			runB, _, repB := judgeBytes(t, sc, sc.Diff.After, after, sc.Overrides.Engine())
			d, err := diff.Compare(diff.Side{Name: sc.Dump, Run: runA, Report: repA}, diff.Side{Name: sc.Diff.After, Run: runB, Report: repB})
			if err != nil {
				t.Fatal(err)
			}
			if !d.Inputs.Same {
				t.Errorf("the pair's inputs differ: %s", d.Inputs.Why)
			}
			if d.Worse != sc.Diff.Worse {
				t.Errorf("worse %t, want %t: %q", d.Worse, sc.Diff.Worse, d.Why)
			}
			for _, o := range d.Outputs {
				if o.Name == sc.Diff.Output && (!slices.Equal(o.Fixed, sc.Diff.Fixed) || !slices.Equal(o.Broken, sc.Diff.Broken)) {
					t.Errorf("%s: fixed %v and broken %v, want %v and %v", o.Name, o.Fixed, o.Broken, sc.Diff.Fixed, sc.Diff.Broken)
				}
			}
		})
	}
	if checked == 0 {
		t.Fatal("no scenario is a before/after pair")
	}
}

// judge runs sc's dump on the CPU backend with o and judges our output (nil
// for an op without kernels) and every external output, as `sampviz check`
// does.
func judge(t *testing.T, sc scenarios.Scenario, o engine.Overrides) (*engine.Run, *engine.Output, *engine.Report) {
	t.Helper()
	b, err := sc.DumpBytes()
	if err != nil {
		t.Fatal(err)
	}
	return judgeBytes(t, sc, sc.FileName(), b, o)
}

// judgeBytes is judge on the dump b, called name, of scenario sc.
func judgeBytes(t *testing.T, sc scenarios.Scenario, name string, b []byte, o engine.Overrides) (*engine.Run, *engine.Output, *engine.Report) {
	t.Helper()
	f, err := dump.Parse(name, b)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	run, err := dump.BuildRun(f, o)
	if err != nil {
		t.Fatalf("build run: %v", err)
	}
	if run.Op != sc.Op {
		t.Fatalf("the dump loads as op %s, the config says %s", run.Op, sc.Op)
	}
	ctx := context.Background()
	var outs []*engine.Output
	var ours *engine.Output
	if !run.Op.Spec().NoKernel {
		if ours, err = cpu.New().Run(ctx, run); err != nil {
			t.Fatalf("cpu backend: %v", err)
		}
		outs = append(outs, ours)
	}
	rep, err := compare.Judge(ctx, run, append(outs, compare.ExternalOutputs(run)...), compare.Options{}, nil)
	if err != nil {
		t.Fatalf("judge: %v", err)
	}
	return run, ours, rep
}

// TestCatalogueVerdicts runs every scenario on the CPU backend and checks
// that the judgement is exactly the verdict its config declares: with the
// config's overrides (as `sampviz check` runs it) and without them (as the
// web opens it).
func TestCatalogueVerdicts(t *testing.T) {
	for _, sc := range scenarios.Catalogue() {
		t.Run(sc.Name, func(t *testing.T) {
			variants := []struct {
				name string
				o    engine.Overrides
			}{{"overrides", sc.Overrides.Engine()}}
			if !sc.Overrides.Empty() {
				variants = append(variants, struct {
					name string
					o    engine.Overrides
				}{"plain", engine.Overrides{}})
			}
			for _, v := range variants {
				_, _, rep := judge(t, sc, v.o)
				for _, d := range sc.Expect.Mismatches(rep) {
					t.Errorf("%s: %s", v.name, d)
				}
			}
		})
	}
}

// TestSeededDeterminism checks the scenarios that record our draws: the same
// seeds draw exactly the recorded tokens and samples again, and another seed
// draws differently (where independent draws would agree by chance with
// probability below stats.DefaultPValue).
func TestSeededDeterminism(t *testing.T) {
	checked := 0
	for _, sc := range scenarios.Catalogue() {
		det := sc.Determinism
		if det == nil {
			continue
		}
		checked++
		t.Run(sc.Name, func(t *testing.T) {
			run, ours, _ := judge(t, sc, sc.Overrides.Engine())
			for _, name := range det.Recorded {
				rec := run.External[name]
				if rec == nil {
					t.Fatalf("the dump has no recorded %q", name)
				}
				got := ourTensor(t, ours, name)
				for r := range run.Rows() {
					c := stats.SameSeedSame(rowInts(got, r), rowInts(rec, r))
					if !c.Pass {
						t.Errorf("%s, row %d: %s", name, r, c.Message)
					}
				}
			}
			o := sc.Overrides.Engine()
			o.Seed = &det.OtherSeed
			other, oursOther, _ := judge(t, sc, o)
			for r := range run.Rows() {
				a := append(rowInts(ourTensor(t, ours, "tokens"), r), rowInts(ourTensor(t, ours, "samples"), r)...)
				b := append(rowInts(ourTensor(t, oursOther, "tokens"), r), rowInts(ourTensor(t, oursOther, "samples"), r)...)
				q := stats.CollisionProbability(ref.Sample(other, r, ref.BoundaryEps(0)).Probs)
				collision := make([]float64, len(a))
				for i := range collision {
					collision[i] = q
				}
				c := stats.DifferentSeedsDiffer(a, b, collision, 0)
				if !c.Pass || c.ChanceIdentical >= stats.DefaultPValue {
					t.Errorf("row %d, seed %d: %s", r, det.OtherSeed, c.Message)
				}
			}
		})
	}
	if checked == 0 {
		t.Fatal("no scenario records its draws")
	}
}

// ourTensor returns our output's tokens or samples.
func ourTensor(t *testing.T, o *engine.Output, name string) *engine.Tensor {
	t.Helper()
	var x *engine.Tensor
	switch name {
	case "tokens":
		x = o.Tokens
	case "samples":
		x = o.Samples
	}
	if x == nil {
		t.Fatalf("our output has no %s", name)
	}
	return x
}

// rowInts returns row r of a [B] or [B, N] integer tensor as int32.
func rowInts(x *engine.Tensor, r int) []int32 {
	n := 1
	if len(x.Shape) == 2 {
		n = x.Shape[1]
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(x.Int(r*n + i))
	}
	return out
}

// TestCatalogueMatchesGenerator checks that the embedded dumps and configs
// are exactly what `go run ./scenarios/gen` writes now, so they cannot drift
// from the code that documents how they were made.
func TestCatalogueMatchesGenerator(t *testing.T) {
	folders, err := generate.All()
	if err != nil {
		t.Fatal(err)
	}
	var generated []string
	for _, f := range folders {
		generated = append(generated, f.Config.Name)
		t.Run(f.Config.Name, func(t *testing.T) {
			sc, ok := scenarios.Lookup(f.Config.Name)
			if !ok {
				t.Fatal("not in the catalogue: run `make scenarios` and write its README.md")
			}
			b, err := sc.DumpBytes()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, f.Dump) {
				t.Errorf("the embedded dump (%d bytes) differs from the generator's (%d bytes): run `make scenarios`", len(b), len(f.Dump))
			}
			if sc.Diff != nil {
				if after, err := sc.AfterBytes(); err != nil || !bytes.Equal(after, f.After) {
					t.Errorf("the embedded after dump differs from the generator's (%v): run `make scenarios`", err)
				}
			}
			cfg, err := os.ReadFile(filepath.Join(sc.Name, scenarios.ConfigFile))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(cfg, f.ConfigJSON) {
				t.Errorf("%s differs from the generator's: run `make scenarios`\n(-got +want)\n-%s\n+%s", scenarios.ConfigFile, cfg, f.ConfigJSON)
			}
		})
	}
	var embedded []string
	for _, sc := range scenarios.Catalogue() {
		if sc.Generator == "" {
			embedded = append(embedded, sc.Name)
		}
	}
	if !slices.Equal(embedded, generated) {
		t.Errorf("the catalogue holds %q, the generator writes %q", embedded, generated)
	}
}

// TestCatalogueEntries checks what the pages and the command line show of
// each scenario: unique names and orders, a title and summary, a view the
// web can append to a run URL, a README of a few paragraphs, and a config
// that round-trips through JSON.
func TestCatalogueEntries(t *testing.T) {
	cat := scenarios.Catalogue()
	if len(cat) < 12 {
		t.Fatalf("the catalogue holds %d scenarios, want at least 12", len(cat))
	}
	names, orders := map[string]bool{}, map[int]bool{}
	for _, sc := range cat {
		t.Run(sc.Name, func(t *testing.T) {
			if names[sc.Name] || orders[sc.Order] {
				t.Errorf("name %q or order %d is not unique", sc.Name, sc.Order)
			}
			names[sc.Name], orders[sc.Order] = true, true
			if sc.Title == "" || sc.Summary == "" {
				t.Error("no title or summary")
			}
			if sc.View != "" && !strings.HasPrefix(sc.View, "/") && !strings.HasPrefix(sc.View, "?") {
				t.Errorf("view %q is neither a path under the run nor a query", sc.View)
			}
			if paras := strings.Count(strings.TrimSpace(sc.README), "\n\n") + 1; paras < 3 || !strings.HasPrefix(sc.README, "# ") {
				t.Errorf("README.md has %d paragraphs and starts %q; want a title and a few paragraphs", paras, firstLine(sc.README))
			}
			f, err := sc.Open()
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			b, err := json.Marshal(sc.Config)
			if err != nil {
				t.Fatal(err)
			}
			var back scenarios.Config
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mustJSON(t, back), b) {
				t.Error("the config does not round-trip through JSON")
			}
		})
	}
	if _, ok := scenarios.Lookup("no-such-scenario"); ok {
		t.Error("Lookup found a scenario that does not exist")
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTreeChainDrawsSpecVerify checks that our tree verifier, run on the
// tree-chain scenario (spec_verify's rows written as one-child trees), draws
// exactly what spec_verify drew for the same seeds, which the dump records.
func TestTreeChainDrawsSpecVerify(t *testing.T) {
	sc, ok := scenarios.Lookup("tree-chain")
	if !ok {
		t.Fatal("no tree-chain scenario")
	}
	run, ours, _ := judge(t, sc, sc.Overrides.Engine())
	for _, c := range []struct {
		name string
		got  *engine.Tensor
	}{
		{"tree_path", ours.TreePath}, {"tree_tokens", ours.TreeTokens}, {"tree_accepted", ours.TreeAccepted},
		{"tree_path_trials", ours.TreePathTrials}, {"tree_trials", ours.TreeTrials},
	} {
		want := run.External[c.name]
		if c.got == nil || want == nil || !slices.Equal(c.got.Ints(), want.Ints()) {
			t.Errorf("%s differs from spec_verify's recorded draws", c.name)
		}
	}
}

// TestReadmesNameTheSampler checks that a README which says our sampler
// draws with the rejection sampler belongs to a dump that asks for it: the
// default method is inverse CDF.
func TestReadmesNameTheSampler(t *testing.T) {
	for _, sc := range scenarios.Catalogue() {
		if sc.Op != engine.OpSample {
			continue
		}
		b, err := sc.DumpBytes()
		if err != nil {
			t.Fatal(err)
		}
		d, err := dump.Parse(sc.Dump, b)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		method := d.Meta["method"]
		text := strings.Join(strings.Fields(sc.README), " ")
		for _, claim := range []string{"with the sort-free rejection sampler", "(the rejection sampler)"} {
			if strings.Contains(text, claim) && method != string(engine.SampleRejection) {
				t.Errorf("%s: README says %q, but the dump's method is %q (the default is %s)", sc.Name, claim, method, engine.SampleInverseCDF)
			}
		}
	}
}
