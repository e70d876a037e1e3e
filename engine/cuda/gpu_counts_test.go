package cuda

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/session"
)

// histogramOf counts the draws of samples [B, N] per token into [B, vocab]
// I32, dropping draws outside [0, vocab) as the counts kernel does.
func histogramOf(samples *engine.Tensor, vocab int) *engine.Tensor {
	rows, n := samples.Dim(0), samples.Dim(1)
	counts := make([]int64, rows*vocab)
	for r := range rows {
		for k := range n {
			if tok := samples.Int(r*n + k); tok >= 0 && tok < int64(vocab) {
				counts[r*vocab+int(tok)]++
			}
		}
	}
	return engine.FromInts("sample_counts", engine.I32, []int{rows, vocab}, counts)
}

// sameDraws checks the GPU's many draws against engine/cpu's: bit for bit
// when the GPU kept them, else its counts against the histogram of the
// CPU's draws, with the draws they count.
func sameDraws(t *testing.T, run *engine.Run, gpu, host *engine.Output) {
	t.Helper()
	switch {
	case gpu.Samples != nil || host.Samples == nil:
		sameBits(t, "samples", gpu.Samples, host.Samples)
	case gpu.SampleCounts == nil:
		t.Errorf("cuda made neither samples nor sample_counts for %d draws a row", run.Params.Draws)
	default:
		if gpu.SampleDraws != run.Params.Draws {
			t.Errorf("sample_counts count %d draws a row, want %d", gpu.SampleDraws, run.Params.Draws)
		}
		sameBits(t, "sample_counts", gpu.SampleCounts, histogramOf(host.Samples, run.Vocab()))
	}
}

// sparseRows makes every row of x [rows, vocab] -inf but for kept tokens
// of random logits, half among its first 1000 tokens and half among its
// last 1000, so that a row's mass jumps across a stretch of more than
// 2^16 tokens of none (the counts kernel's guide must bound such a jump
// exactly). It returns the rows without a distribution: none.
func sparseRows(rng *rand.Rand, x *engine.Tensor, kept int) map[int]bool {
	rows, vocab := x.Dim(0), x.Dim(1)
	for r := range rows {
		for i := range vocab {
			x.SetFloat(r*vocab+i, math.Inf(-1))
		}
		for k := range kept {
			i := rng.IntN(min(1000, vocab))
			if k%2 == 1 {
				i = vocab - 1 - i
			}
			x.SetFloat(r*vocab+i, 2*rng.NormFloat64())
		}
	}
	return map[int]bool{}
}

// TestGPUSampleCounts checks the counts kernel on fresh random rows: its
// counts equal the histogram of draws_kernel's draws (keep_draws) and of
// engine/cpu's draws for the same seeds, whatever the dtype, the filters,
// greedy and invalid rows, the vocabulary and the draws (small, odd, and
// across the kernel's blocks of 16384 draws).
func TestGPUSampleCounts(t *testing.T) {
	gpuBackend(t)
	rng := newRand(t)
	tests := []struct {
		name    string
		dtype   engine.DType
		rows    int
		vocab   int
		filters bool
		draws   int
		// method draws the row's token (draw 0); the many draws are
		// inverse-CDF draws whatever it is.
		method engine.SampleMethod
		// sparse > 0 keeps that many finite logits a row, half in the
		// row's first 1000 tokens and half in its last (sparseRows).
		sparse int
	}{
		{"f32 tiny vocabulary, 1 draw", engine.F32, 5, 2, false, 1, "", 0},
		{"f32 filtered, 7 draws", engine.F32, 7, 111, true, 7, "", 0},
		{"bf16 unfiltered, odd draws", engine.BF16, 6, 32003, false, 16385, "", 0},
		{"bf16 few tokens far apart, 128256", engine.BF16, 4, 128256, false, 70001, "", 4},
		{"bf16 filtered, 128256", engine.BF16, 4, 128256, true, 40001, "", 0},
		{"f16 unfiltered, 151936", engine.F16, 3, 151936, false, 100003, "", 0},
		{"f16 filtered, 151936", engine.F16, 3, 151936, true, 33, "", 0},
		{"f32 two tokens far apart, 151936", engine.F32, 3, 151936, false, 20001, "", 2},
		{"bf16 many rows", engine.BF16, 72, 4099, true, 3000, "", 0},
		{"bf16 filtered, rejection token", engine.BF16, 5, 4099, true, 2049, engine.SampleRejection, 0},
		{"f32 unfiltered, gumbel token", engine.F32, 5, 4099, false, 999, engine.SampleGumbel, 0},
	}
	if quick() {
		tests = tests[:4]
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, invalid := logits(rng, tt.dtype, tt.rows, tt.vocab, true)
			p := params(rng, tt.rows, tt.vocab, tt.filters)
			if tt.sparse > 0 {
				invalid = sparseRows(rng, x, tt.sparse)
				for r := range p.Temperature {
					p.Temperature[r] = 0.5 + rng.Float64()
				}
			}
			p.Temperature[0] = 0 // a greedy row: every draw on its argmax
			p.Draws, p.Method = tt.draws, tt.method
			run := &engine.Run{Op: engine.OpSample, Logits: x, Params: p}
			gpu, host := runBoth(t, run)
			if gpu.Samples != nil || gpu.SampleCounts == nil {
				t.Fatalf("cuda without keep_draws: samples %v, sample_counts %v; want the counts only", gpu.Samples, gpu.SampleCounts)
			}
			sameBits(t, "tokens", gpu.Tokens, host.Tokens)
			sameDraws(t, run, gpu, host)

			kept := *run
			kept.Params.KeepDraws = true
			drawn, err := gpuBackend(t).Run(context.Background(), &kept)
			if err != nil {
				t.Fatalf("cuda, keep_draws: %v", err)
			}
			sameBits(t, "sample_counts (against draws_kernel)", gpu.SampleCounts, histogramOf(drawn.Samples, tt.vocab))
			judge(t, run, gpu, host, invalid)
		})
	}
}

// TestGPUCheckTenMillionDraws runs a sample check through the product's
// path (engine/session, as `sampviz check --backend cuda` does) with no
// draws named: the cuda backend's default, 10^7 draws a row, counted on the
// device, judged from the counts, every row passing, and the report saying
// what the draws catch beside what 10^5 would.
func TestGPUCheckTenMillionDraws(t *testing.T) {
	b := gpuBackend(t)
	rng := newRand(t)
	rows, vocab := 64, 128256
	if quick() {
		rows, vocab = 4, 4099
	}
	x, _ := logits(rng, engine.BF16, rows, vocab, false)
	// No filters: at 10^7 draws a row the fit would see a top-p cut that
	// float32 places a token off the float64 reference's, which is not
	// what this test is about (TestGPUSampleCounts covers filtered rows).
	p := params(rng, rows, vocab, false)
	for r := range rows {
		p.Temperature[r] = 0.5 + rng.Float64() // every row sampled
	}
	run := &engine.Run{Op: engine.OpSample, Logits: x, Params: p}
	s := session.New(b, cpu.New())
	rep, err := s.Execute(context.Background(), session.Job{Run: run, Backend: "cuda"}, nil)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if run.Params.Draws != engine.DefaultCountedDraws {
		t.Errorf("the run made %d draws a row, want the cuda default %d", run.Params.Draws, engine.DefaultCountedDraws)
	}
	var ours *engine.OutputReport
	for i := range rep.Outputs {
		if rep.Outputs[i].Name == "cuda" {
			ours = &rep.Outputs[i]
		}
	}
	if ours == nil || ours.Kind != "samples" {
		t.Fatalf("no cuda samples output in %+v", rep.Outputs)
	}
	for _, r := range ours.Rows {
		if !r.Pass {
			t.Errorf("row %d failed: %v", r.Row, r.Violations)
		}
		if r.Fit == nil || r.Fit.Draws != engine.DefaultCountedDraws {
			t.Errorf("row %d: fit %+v, want one of %d draws", r.Row, r.Fit, engine.DefaultCountedDraws)
		}
	}
	g := ours.Power.Gain()
	if !strings.HasPrefix(g, "10^7 draws a row catch a total-variation bias of ") || !strings.Contains(g, "; 10^5 would catch ") {
		t.Errorf("power gained %q, want what 10^7 draws catch beside 10^5", g)
	}
	t.Logf("%s (power %+v)", g, ours.Power)
}
