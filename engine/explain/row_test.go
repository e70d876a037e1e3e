package explain

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// The row detail carries each probability output's own cut beside the
// reference's: an output that applies top-p to the whole mass after top-k
// (instead of the top-k mass) keeps more tokens, and its cut shows it.
func TestRowDetailOutputCuts(t *testing.T) {
	const v, k, topP = 64, 20, 0.8
	x := make([]float64, v)
	for i := range x {
		x[i] = rand.NormFloat64() * 0.5
	}
	run := &engine.Run{
		Op:     engine.OpRenorm,
		Logits: engine.FromFloat64s("logits", engine.F32, []int{1, v}, x),
		Params: engine.Params{Temperature: []float64{1}, TopK: []int{k}, TopP: []float64{topP}, MinP: []float64{0}},
	}
	// The buggy output: softmax, then keep the top-k tokens while the mass
	// before each (of the whole distribution) is under top_p.
	p := make([]float64, v)
	m := math.Inf(-1)
	for _, z := range x {
		m = max(m, float64(float32(z)))
	}
	s := 0.0
	for i, z := range x {
		p[i] = math.Exp(float64(float32(z)) - m)
		s += p[i]
	}
	order := make([]int, v)
	for i := range order {
		order[i] = i
		p[i] /= s
	}
	sort.SliceStable(order, func(a, b int) bool { return p[order[a]] > p[order[b]] })
	wrong := make([]float64, v)
	mass, kept := 0.0, 0
	for i, tk := range order {
		if i >= k || mass >= topP {
			break
		}
		wrong[tk] = p[tk]
		mass += p[tk]
		kept++
	}
	for i := range wrong {
		wrong[i] /= mass
	}
	out := &engine.Output{Name: "probs", External: true, Probs: engine.FromFloat64s("probs", engine.F32, []int{1, v}, wrong)}
	d := Row(run, []*engine.Output{out}, nil, nil, &engine.Tolerances{Strict: engine.Tolerance{Atol: 1e-5}}, 0, 20)
	if d.Invalid != "" {
		t.Fatal(d.Invalid)
	}
	if len(d.Cuts.Outputs) != 1 {
		t.Fatalf("%d output cuts, want 1", len(d.Cuts.Outputs))
	}
	oc := d.Cuts.Outputs[0]
	if oc.Name != "probs" || oc.Kept != kept || oc.Rank != kept {
		t.Errorf("output cut %+v, want %d kept up to rank %d", oc, kept, kept)
	}
	if oc.Kept == d.Cuts.Kept {
		t.Errorf("the output and the reference both keep %d: the test's bug should keep another count", oc.Kept)
	}
}
