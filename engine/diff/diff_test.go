package diff

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/ref"
)

// softmaxRun builds a softmax run of rows x vocab f32 logits from seed.
func softmaxRun(seed uint64, rows, vocab int) *engine.Run {
	rng := rand.New(rand.NewPCG(seed, 7))
	x := make([]float64, rows*vocab)
	for i := range x {
		x[i] = float64(float32(rng.NormFloat64() * 2))
	}
	run := &engine.Run{Source: "test", Op: engine.OpSoftmax, Logits: engine.FromFloat64s("logits", engine.F32, []int{rows, vocab}, x)}
	p := &run.Params
	for range rows {
		p.Temperature = append(p.Temperature, 1)
		p.TopK = append(p.TopK, 0)
		p.TopP = append(p.TopP, 1)
		p.MinP = append(p.MinP, 0)
		p.Seed = append(p.Seed, 0)
		p.Offset = append(p.Offset, 0)
	}
	p.FilterOrder, p.TopKTies = engine.TopKFirst, engine.TiesKeep
	return run
}

// probsSide judges probs: the reference of run, with the rows in off moved
// by delta at token 0, as the dump's output "probs".
func probsSide(t *testing.T, name string, run *engine.Run, delta float64, off ...int) Side {
	t.Helper()
	v := run.Vocab()
	probs := engine.NewTensor("probs", engine.F32, run.Rows(), v)
	for r := range run.Rows() {
		d := ref.Softmax(run, r, false)
		for i, p := range d.Probs {
			if i == 0 && slices.Contains(off, r) {
				p += delta
			}
			probs.SetFloat(r*v+i, p)
		}
	}
	rep, err := compare.Judge(context.Background(), run, []*engine.Output{{Name: "probs", External: true, Probs: probs}}, compare.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Side{Name: name, Run: run, Report: rep}
}

func TestCompareSameInputs(t *testing.T) {
	tests := []struct {
		name          string
		offA, offB    []int
		worse         bool
		fixed, broken []int
	}{
		{"nothing changed", []int{1}, []int{1}, false, []int{}, []int{}},
		{"a fix", []int{1, 3}, nil, false, []int{1, 3}, []int{}},
		{"a regression", nil, []int{2}, true, []int{}, []int{2}},
		{"a fix and a regression", []int{0}, []int{4}, true, []int{0}, []int{4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := softmaxRun(1, 5, 64), softmaxRun(1, 5, 64)
			d, err := Compare(probsSide(t, "a", a, 0.01, tt.offA...), probsSide(t, "b", b, 0.01, tt.offB...))
			if err != nil {
				t.Fatal(err)
			}
			if !d.Inputs.Same {
				t.Fatalf("inputs differ: %s", d.Inputs.Why)
			}
			if d.Worse != tt.worse {
				t.Errorf("worse %t, want %t (%q)", d.Worse, tt.worse, d.Why)
			}
			o := d.Outputs[0]
			if !slices.Equal(o.Fixed, tt.fixed) || !slices.Equal(o.Broken, tt.broken) {
				t.Errorf("fixed %v broken %v, want %v and %v", o.Fixed, o.Broken, tt.fixed, tt.broken)
			}
			if len(o.Rows) != 5 {
				t.Fatalf("%d rows compared, want 5", len(o.Rows))
			}
			for _, r := range o.Rows {
				if r.DriftA == nil || r.DriftB == nil || r.WithinA == nil {
					t.Errorf("row %d: no drift before or after", r.Row)
				}
			}
			if !strings.Contains(d.Summary, "on the same inputs") {
				t.Errorf("summary %q does not say the inputs are the same", d.Summary)
			}
		})
	}
}

func TestCompareDifferentInputs(t *testing.T) {
	base := softmaxRun(1, 5, 64)
	otherLogits := softmaxRun(1, 5, 64)
	otherLogits.Logits.SetFloat(3*64+9, 42)
	otherTemp := softmaxRun(1, 5, 64)
	otherTemp.Params.Temperature[2] = 0.5
	otherShape := softmaxRun(1, 6, 64)
	padded := softmaxRun(1, 5, 64)
	padded.Params.ValidRows = 4
	tests := []struct {
		name   string
		b      *engine.Run
		tensor string
		row    int
	}{
		{"a logit", otherLogits, "logits", 3},
		{"a temperature", otherTemp, "temperature", 2},
		{"the shape", otherShape, "logits", -1},
		{"the padding", padded, "valid", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Compare(probsSide(t, "a", base, 0), probsSide(t, "b", tt.b, 0.01, 1))
			if err != nil {
				t.Fatal(err)
			}
			if d.Inputs.Same || d.Inputs.Tensor != tt.tensor || d.Inputs.Row != tt.row {
				t.Fatalf("inputs %+v, want %s differing at row %d", d.Inputs, tt.tensor, tt.row)
			}
			if len(d.Outputs[0].Rows) != 0 {
				t.Error("rows compared on different inputs")
			}
			if !d.Worse || !strings.Contains(d.Why[0], "passed in A and fails in B") {
				t.Errorf("worse %t %q, want the output's verdict", d.Worse, d.Why)
			}
		})
	}
}

func TestCompareRefusesTwoOps(t *testing.T) {
	a := probsSide(t, "a.safetensors", softmaxRun(1, 3, 16), 0)
	b := a
	b.Name, b.Run = "b.safetensors", &engine.Run{Op: engine.OpArgmax}
	_, err := Compare(a, b)
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v, want a *Refusal", err)
	}
	if want := "a.safetensors is a run of op softmax and b.safetensors one of op argmax: diff compares two runs of one op"; r.Msg != want {
		t.Errorf("refusal %q, want %q", r.Msg, want)
	}
}

func TestCompareAcceptanceByPosition(t *testing.T) {
	pos := func(rate float64) engine.PositionRate {
		return engine.PositionRate{Rate: engine.Float(rate), Lo: engine.Float(rate - 0.01), Hi: engine.Float(rate + 0.01), Theory: 0.8}
	}
	spec := func(rates ...float64) *engine.Report {
		s := &engine.SpecStats{}
		for i, r := range rates {
			p := pos(r)
			p.Position = i
			s.Positions = append(s.Positions, p)
		}
		return &engine.Report{Pass: true, Op: engine.OpSpecVerify, Outputs: []engine.OutputReport{{Name: "spec_tokens", External: true, Kind: "spec", Pass: true, Spec: s}}}
	}
	run := &engine.Run{Op: engine.OpSpecVerify}
	d, err := Compare(Side{Name: "a", Run: run, Report: spec(0.8, 0.6)}, Side{Name: "b", Run: run, Report: spec(0.7, 0.5)})
	if err != nil {
		t.Fatal(err)
	}
	ps := d.Outputs[0].Positions
	if len(ps) != 2 || ps[1].A.Rate != 0.6 || ps[1].B.Rate != 0.5 || ps[1].B.Lo != 0.49 {
		t.Errorf("positions %+v, want both runs' rates and intervals side by side", ps)
	}
}
