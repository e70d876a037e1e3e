package explain

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// TestSampleDetailFromCounts checks that a row's sample histogram is the
// same whether its draws come one by one or counted per token, that a
// counted output's draws beyond its counts are out of range, and that
// counts of the same draws count as the same draws.
func TestSampleDetailFromCounts(t *testing.T) {
	const rows, v, n = 2, 96, 500
	rng := rand.New(rand.NewPCG(8, 9))
	x := make([]float64, rows*v)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	run := &engine.Run{
		Op:     engine.OpSample,
		Logits: engine.FromFloat64s("logits", engine.F32, []int{rows, v}, x),
		Params: engine.Params{Temperature: []float64{1, 1}, TopK: []int{0, 0}, TopP: []float64{1, 1}, MinP: []float64{0, 0},
			Seed: []uint64{1, 2}, Offset: []uint64{0, 0}},
	}
	draws := make([]int64, rows*n)
	counts := make([]int64, rows*v)
	for i := range draws {
		draws[i] = int64(rng.IntN(v))
	}
	draws[n+3] = v + 9 // row 1: one draw out of range, counted nowhere
	for i, tok := range draws {
		if tok < v {
			counts[(i/n)*v+int(tok)]++
		}
	}
	drawn := &engine.Output{Name: "cpu", Samples: engine.FromInts("samples", engine.I32, []int{rows, n}, draws)}
	counted := &engine.Output{Name: "cuda", SampleDraws: n, SampleCounts: engine.FromInts("sample_counts", engine.I32, []int{rows, v}, counts)}
	tests := []struct {
		name       string
		outs       []*engine.Output
		outOfRange []int64
	}{
		{"drawn then counted", []*engine.Output{drawn, counted}, []int64{1, 1}},
		{"counted then drawn", []*engine.Output{counted, drawn}, []int64{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sd := sampleDetail(run, tt.outs, 1, 10, 0)
			if sd == nil {
				t.Fatal("no sample detail")
			}
			if !reflect.DeepEqual(sd.Draws, []int{n, n}) || !reflect.DeepEqual(sd.OutOfRange, tt.outOfRange) {
				t.Errorf("draws %v out of range %v, want [%d %d] and %v", sd.Draws, sd.OutOfRange, n, n, tt.outOfRange)
			}
			if !sd.SameAsFirst[1] {
				t.Error("the same draws, counted, are not the same as the first")
			}
			for _, st := range sd.Tokens {
				if st.Observed[0] != st.Observed[1] || st.Observed[0] != counts[v+st.Token] {
					t.Errorf("token %d observed %v, want %d twice", st.Token, st.Observed, counts[v+st.Token])
				}
			}
		})
	}
}

// TestSampleDetailUnusableCounts checks that a dump's counts that cannot be
// counts on the row shown (negative, or summing past an int64, which the
// judge refuses) are left out of the row's histogram rather than drawn as
// negative or wrapped draws.
func TestSampleDetailUnusableCounts(t *testing.T) {
	const rows, v, n = 2, 64, 300
	rng := rand.New(rand.NewPCG(10, 11))
	x := make([]float64, rows*v)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	run := &engine.Run{
		Op:     engine.OpSample,
		Logits: engine.FromFloat64s("logits", engine.F32, []int{rows, v}, x),
		Params: engine.Params{Temperature: []float64{1, 1}, TopK: []int{0, 0}, TopP: []float64{1, 1}, MinP: []float64{0, 0},
			Seed: []uint64{1, 2}, Offset: []uint64{0, 0}},
	}
	draws := make([]int64, rows*n)
	for i := range draws {
		draws[i] = int64(rng.IntN(v))
	}
	drawn := &engine.Output{Name: "cpu", Samples: engine.FromInts("samples", engine.I32, []int{rows, n}, draws)}
	huge := make([]int64, rows*v)
	for tok := range 8 {
		huge[v+tok] = math.MaxInt64 / 4
	}
	negative := make([]int64, rows*v)
	negative[v+5] = -3
	counts := func(name string, c []int64) *engine.Output {
		return &engine.Output{Name: name, External: true, SampleCounts: engine.FromInts("sample_counts", engine.I64, []int{rows, v}, c)}
	}
	tests := []struct {
		name  string
		outs  []*engine.Output
		names []string // the outputs the histogram shows; nil: no detail
	}{
		{"summing past an int64, beside draws", []*engine.Output{drawn, counts("sample_counts", huge)}, []string{"cpu"}},
		{"summing past an int64, alone", []*engine.Output{counts("sample_counts", huge)}, nil},
		{"negative, beside draws", []*engine.Output{counts("sample_counts", negative), drawn}, []string{"cpu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sd := sampleDetail(run, tt.outs, 1, 10, 0)
			var got []string
			if sd != nil {
				for _, o := range sd.Outputs {
					got = append(got, o.Name)
				}
				for _, d := range sd.Draws {
					if d < 0 {
						t.Errorf("draws %v: a negative count of draws", sd.Draws)
					}
				}
			}
			if !reflect.DeepEqual(got, tt.names) {
				t.Errorf("outputs shown %v, want %v", got, tt.names)
			}
		})
	}
}
