package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sampviz/sampviz/engine"
)

func TestDevice(t *testing.T) {
	b := New()
	if b.Name() != "cpu" {
		t.Errorf("Name = %q", b.Name())
	}
	d := b.Device()
	if d.Backend != "cpu" || !strings.Contains(d.Name, "cores)") || d.SMs != 0 {
		t.Errorf("Device = %+v", d)
	}
}

func TestProbsByHand(t *testing.T) {
	x := [][]float32{{1, 2, 3}, {3, 2, 1}}
	tests := []struct {
		name   string
		op     engine.Op
		temp   float64
		topK   int
		topP   float64
		minP   float64
		want   []float64
		exactZ bool // zeros must be exact
	}{
		{"softmax", engine.OpSoftmax, 1, 0, 1, 0, []float64{0.09003057317, 0.24472847105, 0.66524095577}, false},
		{"softmax at T=2", engine.OpSoftmax, 2, 0, 1, 0, []float64{0.18632372, 0.30719589, 0.50648039}, false},
		{"softmax greedy", engine.OpSoftmax, 0, 0, 1, 0, []float64{0, 0, 1}, true},
		{"renorm top-k 2", engine.OpRenorm, 1, 2, 1, 0, []float64{0, 0.26894142137, 0.73105857863}, true},
		{"renorm top-p 0.7", engine.OpRenorm, 1, 0, 0.7, 0, []float64{0, 0.26894142137, 0.73105857863}, true},
		{"renorm top-p 0.6", engine.OpRenorm, 1, 0, 0.6, 0, []float64{0, 0, 1}, true},
		{"renorm min-p 0.3", engine.OpRenorm, 1, 0, 1, 0.3, []float64{0, 0.26894142137, 0.73105857863}, true},
		{"renorm min-p 0.1", engine.OpRenorm, 1, 0, 1, 0.1, []float64{0.09003057317, 0.24472847105, 0.66524095577}, false},
		{"renorm greedy ignores filters", engine.OpRenorm, 0, 2, 0.5, 0.5, []float64{0, 0, 1}, true},
	}
	for _, dtype := range floatDTypes {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s %s", dtype, tt.name), func(t *testing.T) {
				p := defaultParams(2)
				for r := range 2 {
					p.Temperature[r], p.TopK[r], p.TopP[r], p.MinP[r] = tt.temp, tt.topK, tt.topP, tt.minP
				}
				out := mustRun(t, logitsRun(tt.op, dtype, x, p))
				if out.Probs.DType != engine.F32 || fmt.Sprint(out.Probs.Shape) != "[2 3]" {
					t.Fatalf("probs %s %v", out.Probs.DType, out.Probs.Shape)
				}
				for r := range 2 {
					got := rowFloats(out.Probs, r)
					for i := range got {
						want := tt.want[i]
						if r == 1 {
							want = tt.want[2-i]
						}
						if want == 0 && tt.exactZ {
							if got[i] != 0 {
								t.Errorf("row %d token %d: %v, want exactly 0", r, i, got[i])
							}
							continue
						}
						if math.Abs(float64(got[i])-want) > 1e-6 {
							t.Errorf("row %d token %d: %v, want %v", r, i, got[i], want)
						}
					}
				}
			})
		}
	}
}

func TestArgmaxRun(t *testing.T) {
	x := [][]float32{
		{0.5, 2, -1, 2},
		{-3, -2.5, -2.75, -4},
		{1, nan, 3, 0},
		{ninf, ninf, ninf, ninf},
		{1, inf, 3, inf},
		{ninf, -100, ninf, 7},
	}
	want := []int64{1, 1, -1, -1, 1, 3}
	for _, dtype := range floatDTypes {
		t.Run(dtype.String(), func(t *testing.T) {
			out := mustRun(t, logitsRun(engine.OpArgmax, dtype, x, engine.Params{}))
			if out.Tokens.DType != engine.I32 {
				t.Fatalf("tokens dtype %s", out.Tokens.DType)
			}
			if got := out.Tokens.Ints(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("tokens %v, want %v", got, want)
			}
		})
	}
}

func TestArgmaxRandomRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for _, dtype := range floatDTypes {
		xs := make([][]float32, 16)
		for r := range xs {
			xs[r] = randomLogits(rng, 1000, 3)
		}
		out := mustRun(t, logitsRun(engine.OpArgmax, dtype, xs, engine.Params{}))
		for r := range xs {
			x := stored(xs[r], dtype)
			got := out.Tokens.Int(r)
			for i, v := range x {
				if v > x[got] || v == x[got] && int64(i) < got {
					t.Fatalf("%s row %d: token %d (%v), but token %d has %v", dtype, r, got, x[got], i, v)
				}
			}
		}
	}
}

func TestRenormInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(63, 64))
	const rows, vocab = 10, 5000
	for _, dtype := range floatDTypes {
		for _, order := range []engine.FilterOrder{engine.TopKFirst, engine.Joint} {
			for _, ties := range []engine.TopKTies{engine.TiesKeep, engine.TiesLowestIndex} {
				t.Run(fmt.Sprintf("%s %s %s", dtype, order, ties), func(t *testing.T) {
					xs := make([][]float32, rows)
					for r := range xs {
						xs[r] = quantised(randomLogits(rng, vocab, 2), 0.0625)
					}
					p := defaultParams(rows)
					p.FilterOrder, p.TopKTies = order, ties
					for r := range rows {
						p.Temperature[r] = []float64{1, 0.5, 2, 1e-4, 30}[r%5]
						p.TopK[r] = []int{0, 50, 1000, 3}[r%4]
						p.TopP[r] = []float64{1, 0.9, 0.5}[r%3]
						p.MinP[r] = []float64{0, 0.01, 0, 0.2}[r%4]
					}
					run := logitsRun(engine.OpRenorm, dtype, xs, p)
					out := mustRun(t, run)
					for r := range rows {
						x := rowFloats(run.Logits, r)
						temp := float32(p.Temperature[r])
						w := weightsOf(x, temp)
						keep := make([]bool, vocab)
						Filter(w, p.TopK[r], float32(p.TopP[r]), float32(p.MinP[r]), order, ties, keep)
						ref := restricted(softmax64(x, p.Temperature[r]), keep)
						got := rowFloats(out.Probs, r)
						var sum float64
						for i, v := range got {
							sum += float64(v)
							if !keep[i] && v != 0 {
								t.Fatalf("row %d token %d: filtered but %v", r, i, v)
							}
							if keep[i] && math.Abs(float64(v)-ref[i]) > 1e-5+1.3e-6*ref[i] {
								t.Fatalf("row %d token %d: %v, float64 renorm %v", r, i, v, ref[i])
							}
							if keep[i] && w[i] > 1e-30 && v == 0 {
								t.Fatalf("row %d token %d: kept with weight %v but 0", r, i, w[i])
							}
						}
						if math.Abs(sum-1) > 1e-5 {
							t.Errorf("row %d: sums to %v", r, sum)
						}
					}
				})
			}
		}
	}
}

func TestProbsInvalidRows(t *testing.T) {
	x := [][]float32{{1, nan, 2}, {1, inf, 2}, {ninf, ninf, ninf}, {0.5, ninf, 1}}
	for _, op := range []engine.Op{engine.OpSoftmax, engine.OpRenorm} {
		for _, temp := range []float64{0, 1} {
			t.Run(fmt.Sprintf("%s T=%g", op, temp), func(t *testing.T) {
				p := defaultParams(4)
				for r := range 4 {
					p.Temperature[r] = temp
					p.TopK[r] = 1
				}
				out := mustRun(t, logitsRun(op, engine.F32, x, p))
				for r := range 3 {
					for i, v := range rowFloats(out.Probs, r) {
						if v == v {
							t.Errorf("row %d token %d: %v, want NaN", r, i, v)
						}
					}
				}
				if got := rowFloats(out.Probs, 3); got[1] != 0 || got[0]+got[2] < 0.999 || got[0]+got[2] > 1.001 {
					t.Errorf("valid row: %v", got)
				}
			})
		}
	}
}

func TestRunErrors(t *testing.T) {
	good := func() *engine.Run {
		return logitsRun(engine.OpSample, engine.F32, [][]float32{{1, 2, 3}, {0.5, 0.25, 1}}, defaultParams(2))
	}
	spec := func() *engine.Run {
		return specCase{
			target: [][][]float32{{{1, 2, 3}, {3, 2, 1}}},
			drafts: [][]int64{{2}},
		}.run(engine.F32, 1)
	}
	ngram := func() *engine.Run {
		return ngramRun([][]int64{{1, 2, 3}}, [][]int64{{2}}, engine.I64, 3, 4, 10)
	}
	tests := []struct {
		name        string
		run         func() *engine.Run
		change      func(r *engine.Run)
		unsupported bool
	}{
		{"unknown op", good, func(r *engine.Run) { r.Op = "topk" }, true},
		{"no logits", good, func(r *engine.Run) { r.Logits = nil }, true},
		{"integer logits", good, func(r *engine.Run) { r.Logits = engine.FromInts("logits", engine.I32, []int{1, 2}, []int64{1, 2}) }, true},
		{"1-d logits", good, func(r *engine.Run) {
			r.Logits = engine.FromFloat32s("logits", engine.F32, []int{3}, []float32{1, 2, 3})
		}, true},
		{"truncated data", good, func(r *engine.Run) { r.Logits.Data = r.Logits.Data[:5] }, true},
		{"negative temperature", good, func(r *engine.Run) { r.Params.Temperature[1] = -1 }, false},
		{"NaN temperature", good, func(r *engine.Run) { r.Params.Temperature[0] = math.NaN() }, false},
		{"temperature beyond float32", good, func(r *engine.Run) { r.Params.Temperature[0] = 1e39 }, false},
		{"top_p 0", good, func(r *engine.Run) { r.Params.TopP[0] = 0 }, false},
		{"top_p above 1", good, func(r *engine.Run) { r.Params.TopP[0] = 1.5 }, false},
		{"min_p above 1", good, func(r *engine.Run) { r.Params.MinP[1] = 2 }, false},
		{"negative top_k", good, func(r *engine.Run) { r.Params.TopK[0] = -1 }, false},
		{"short temperature", good, func(r *engine.Run) { r.Params.Temperature = r.Params.Temperature[:1] }, false},
		{"missing seeds", good, func(r *engine.Run) { r.Params.Seed = nil }, false},
		{"unknown filter order", good, func(r *engine.Run) { r.Params.FilterOrder = "sideways" }, true},
		{"unknown ties", good, func(r *engine.Run) { r.Params.TopKTies = "random" }, true},
		{"unknown method", good, func(r *engine.Run) { r.Params.Method = "magic" }, true},
		{"negative draws", good, func(r *engine.Run) { r.Params.Draws = -3 }, false},
		{"draws over the kept", good, func(r *engine.Run) { r.Params.Draws = engine.MaxKeptDraws + 1 }, true},
		{"draft token out of range", spec, func(r *engine.Run) { r.DraftTokens.SetInt(0, 3) }, false},
		{"negative draft token", spec, func(r *engine.Run) { r.DraftTokens.SetInt(0, -1) }, false},
		{"target positions not K+1", spec, func(r *engine.Run) { r.DraftTokens = engine.FromInts("d", engine.I64, []int{1, 2}, []int64{1, 1}) }, true},
		{"draft probs of the wrong shape", spec, func(r *engine.Run) {
			r.DraftProbs = engine.FromFloat32s("q", engine.F32, []int{1, 1, 2}, []float32{0.5, 0.5})
		}, true},
		{"no target logits", spec, func(r *engine.Run) { r.TargetLogits = nil }, true},
		{"negative trials", spec, func(r *engine.Run) { r.Params.Trials = -1 }, false},
		{"input_ids_len beyond the row", ngram, func(r *engine.Run) { r.InputIDsLen.SetInt(0, 4) }, false},
		{"negative step_idx", ngram, func(r *engine.Run) { r.StepIdx.SetInt(0, -1) }, false},
		{"negative max_draft_tokens", ngram, func(r *engine.Run) { r.Params.MaxDraftTokens = -1 }, false},
		{"rows disagree", ngram, func(r *engine.Run) { r.StepIdx = engine.FromInts("s", engine.I64, []int{2}, []int64{1, 1}) }, true},
		{"no pre_ids", ngram, func(r *engine.Run) { r.PreIDs = nil }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := tt.run()
			tt.change(run)
			out, err := New().Run(context.Background(), run)
			if err == nil {
				t.Fatalf("no error; output %+v", out)
			}
			if got := errors.Is(err, engine.ErrUnsupported); got != tt.unsupported {
				t.Errorf("error %q: wraps ErrUnsupported = %v, want %v", err, got, tt.unsupported)
			}
		})
	}
}

func TestRunCancellation(t *testing.T) {
	rng := rand.New(rand.NewPCG(65, 66))
	run := sampleRun(rng, engine.BF16, 8, 20000)
	run.Params.Draws = engine.MaxKeptDraws

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New().Run(ctx, run); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before the start: error %v", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := New().Run(ctx, run)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the deadline", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v to notice the deadline", took)
	}
}

func TestWorkersDoNotChangeResults(t *testing.T) {
	rng := rand.New(rand.NewPCG(67, 68))
	samp := sampleRun(rng, engine.F16, 9, 800)
	samp.Params.Draws = 50
	for r := range 9 {
		samp.Params.TopP[r] = 0.8
	}
	spec := randomSpec(rng, 7, 3, 100, false).run(engine.BF16, 20)
	soft := sampleRun(rng, engine.F32, 9, 800)
	soft.Op = engine.OpRenorm
	for _, run := range []*engine.Run{samp, spec, soft} {
		t.Run(string(run.Op), func(t *testing.T) {
			one, err := (&Backend{workers: 1}).Run(context.Background(), run)
			if err != nil {
				t.Fatal(err)
			}
			many, err := (&Backend{workers: 4}).Run(context.Background(), run)
			if err != nil {
				t.Fatal(err)
			}
			for _, pair := range [][2]*engine.Tensor{
				{one.Probs, many.Probs}, {one.Tokens, many.Tokens}, {one.Samples, many.Samples},
				{one.SpecTokens, many.SpecTokens}, {one.SpecTrials, many.SpecTrials}, {one.SpecAccepted, many.SpecAccepted},
			} {
				if (pair[0] == nil) != (pair[1] == nil) || pair[0] != nil && string(pair[0].Data) != string(pair[1].Data) {
					t.Errorf("%v differs between 1 and 4 workers", pair[0].Name)
				}
			}
			if run.Op == engine.OpSpecVerify && fmt.Sprint(one.Trace.Step) != fmt.Sprint(many.Trace.Step) {
				t.Errorf("trace differs between 1 and 4 workers")
			}
		})
	}
}

func TestTiming(t *testing.T) {
	rng := rand.New(rand.NewPCG(69, 70))
	const rows, vocab, draws = 4, 1000, 30
	tests := []struct {
		name  string
		run   *engine.Run
		bytes int64
	}{
		{"softmax bf16", func() *engine.Run {
			r := sampleRun(rng, engine.BF16, rows, vocab)
			r.Op = engine.OpSoftmax
			return r
		}(), rows*vocab*2 + rows*4 + rows*vocab*4},
		{"argmax f16", func() *engine.Run {
			r := sampleRun(rng, engine.F16, rows, vocab)
			r.Op = engine.OpArgmax
			return r
		}(), rows*vocab*2 + rows*4},
		{"sample with draws f32", func() *engine.Run {
			r := sampleRun(rng, engine.F32, rows, vocab)
			r.Params.Draws = draws
			return r
		}(), rows*vocab*4 + rows*(4+12+16) + rows*4 + rows*draws*4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := mustRun(t, tt.run)
			if out.Name != "cpu" || out.External {
				t.Errorf("output %q external=%v", out.Name, out.External)
			}
			tm := out.Timing
			if tm == nil || tm.Kernel <= 0 || tm.Wall != tm.Kernel {
				t.Fatalf("timing %+v", tm)
			}
			if tm.Bytes != tt.bytes {
				t.Errorf("bytes %d, want %d", tm.Bytes, tt.bytes)
			}
		})
	}
}
