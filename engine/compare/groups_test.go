package compare

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// TestGroupsMeasureAsTokens judges rows of 16-bit logits by group and token
// by token and checks that the reports agree: every count, index, maximum,
// percentile and finding exactly, the sums (means, KL, TV, row sums) to
// 1e-12 relative, which is all their order of addition may change.
func TestGroupsMeasureAsTokens(t *testing.T) {
	type output struct {
		dtype engine.DType
		spoil func(rng *rand.Rand, p []float64, v int) // changes the reference's probabilities in place
	}
	exact := func(*rand.Rand, []float64, int) {}
	tests := []struct {
		name   string
		logits engine.DType
		op     engine.Op
		params []rowParams
		outs   []output
	}{
		{"softmax bf16, T 1", engine.BF16, engine.OpSoftmax, []rowParams{{temp: 1, Filter: ref.NoFilter()}},
			[]output{{engine.F32, exact}, {engine.BF16, exact}, {engine.F16, exact}}},
		{"softmax f16, T 0.7 and 1.3", engine.F16, engine.OpSoftmax, []rowParams{{temp: 0.7, Filter: ref.NoFilter()}, {temp: 1.3, Filter: ref.NoFilter()}},
			[]output{{engine.F32, exact}, {engine.BF16, exact}}},
		{"renorm with every filter", engine.BF16, engine.OpRenorm, []rowParams{
			{temp: 0.7, Filter: ref.Filter{TopK: 50, TopP: 1}},
			{temp: 1, Filter: ref.Filter{TopP: 0.9}},
			{temp: 0.8, Filter: ref.Filter{TopK: 100, TopP: 0.95, MinP: 0.05}}},
			[]output{{engine.F32, exact}, {engine.BF16, exact}}},
		{"faults", engine.BF16, engine.OpSoftmax, []rowParams{{temp: 1, Filter: ref.NoFilter()}, {temp: 0.9, Filter: ref.NoFilter()}},
			[]output{
				{engine.F32, func(rng *rand.Rand, p []float64, v int) { // one pattern of a row scaled off
					for r := 0; r < len(p)/v; r++ {
						x := p[r*v+rng.IntN(v)]
						for i := r * v; i < (r+1)*v; i++ {
							if p[i] == x {
								p[i] *= 1.5
							}
						}
					}
				}},
				{engine.F32, func(rng *rand.Rand, p []float64, v int) { // NaN on a pattern, zeros on another
					a, b := p[rng.IntN(v)], p[v+rng.IntN(v)]
					for i := range p {
						switch p[i] {
						case a:
							p[i] = math.NaN()
						case b:
							p[i] = 0
						}
					}
				}},
				{engine.F32, func(rng *rand.Rand, p []float64, v int) { // noise per token: read token by token
					for i := range p {
						p[i] *= 1 + 1e-3*rng.NormFloat64()
					}
				}},
			}},
		{"renorm with extra and missing tokens", engine.BF16, engine.OpRenorm, []rowParams{{temp: 1, Filter: ref.Filter{TopK: 20, TopP: 1}}},
			[]output{{engine.F32, func(rng *rand.Rand, p []float64, v int) {
				for r := 0; r < len(p)/v; r++ {
					row := p[r*v : (r+1)*v]
					for i := range row {
						if row[i] == 0 {
							row[i] = 1e-3 // every dropped token kept
							break
						}
					}
				}
			}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(23, 9))
			run := logitsRun(rng, tt.op, tt.logits, 6, 3000, 3, tt.params...)
			eps := ref.BoundaryEps(DefaultTolerance(engine.BF16).Rtol)
			var outs []*engine.Output
			for k, o := range tt.outs {
				p := refProbs(run, false, eps)
				for i := range p {
					if math.IsNaN(p[i]) {
						p[i] = 0
					}
				}
				o.spoil(rng, p, run.Vocab())
				out := probsOutput(run, o.dtype, p)
				out.Name = fmt.Sprintf("probs@%d", k)
				outs = append(outs, out)
			}
			groupRows = false
			byTokens := judgeRun(t, run, outs...)
			groupRows = true
			byGroups := judgeRun(t, run, outs...)
			if diffs := sameReport(reflect.ValueOf(byGroups), reflect.ValueOf(byTokens), "report"); len(diffs) > 0 {
				if len(diffs) > 12 {
					diffs = append(diffs[:12], fmt.Sprintf("... and %d more", len(diffs)-12))
				}
				t.Errorf("by group and by token differ (-groups +tokens):\n%s", strings.Join(diffs, "\n"))
			}
		})
	}
}

// sums are the fields whose values are sums, which the order of addition
// may change in their last bits.
var sums = map[string]bool{"Mean": true, "KL": true, "TV": true, "RowSumError": true, "MissingMass": true, "ExtraMass": true, "MeanAbs": true}

// sameReport lists where two reports differ, sums compared to 1e-12.
func sameReport(a, b reflect.Value, path string) []string {
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return []string{path + ": one is nil"}
			}
			return nil
		}
		return sameReport(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		var diffs []string
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			fa, fb := a.Field(i), b.Field(i)
			if fa.Kind() == reflect.Pointer && !fa.IsNil() && !fb.IsNil() {
				fa, fb = fa.Elem(), fb.Elem()
			}
			if sums[f.Name] && fa.Kind() == reflect.Float64 {
				x, y := fa.Float(), fb.Float()
				// |Σ - 1| cancels: its error is the sum's, absolute.
				scale := math.Max(math.Abs(x), math.Abs(y))
				if f.Name == "RowSumError" {
					scale = 1
				}
				if !(x == y || math.IsNaN(x) && math.IsNaN(y) || math.Abs(x-y) <= 1e-12*scale) {
					diffs = append(diffs, fmt.Sprintf("%s.%s: %v against %v", path, f.Name, x, y))
				}
				continue
			}
			diffs = append(diffs, sameReport(a.Field(i), b.Field(i), path+"."+f.Name)...)
		}
		return diffs
	case reflect.Slice:
		if a.Len() != b.Len() {
			return []string{fmt.Sprintf("%s: %d elements against %d", path, a.Len(), b.Len())}
		}
		var diffs []string
		for i := range a.Len() {
			diffs = append(diffs, sameReport(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return diffs
	case reflect.Float64:
		x, y := a.Float(), b.Float()
		if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
			return []string{fmt.Sprintf("%s: %v against %v", path, x, y)}
		}
		return nil
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return []string{fmt.Sprintf("%s: %v against %v", path, a.Interface(), b.Interface())}
	}
	return nil
}
