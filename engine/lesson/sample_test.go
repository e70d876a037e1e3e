package lesson

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/philox"
)

// sampleRun builds a sample run of rows random rows of vocab logits, every
// row with the filters of f, quantised so that some rows hold exact ties.
func sampleRun(rng *rand.Rand, rows, vocab int, f sampleFilters) *engine.Run {
	p := engine.Params{Method: f.method, FilterOrder: f.order, TopKTies: f.ties, TemperatureOrder: f.tempOrder}
	flat := make([]float32, 0, rows*vocab)
	for r := range rows {
		scale := 0.5 + 3*rng.Float64()
		shift := rng.Float64()*20 - 10
		for range vocab {
			v := float32(shift + scale*rng.NormFloat64())
			if r%3 == 2 {
				v = float32(math.Round(float64(v)*2) / 2) // ties
			}
			flat = append(flat, v)
		}
		p.Temperature = append(p.Temperature, f.temp)
		p.TopK = append(p.TopK, f.topK)
		p.TopP = append(p.TopP, f.topP)
		p.MinP = append(p.MinP, f.minP)
		p.Seed = append(p.Seed, rng.Uint64())
		p.Offset = append(p.Offset, uint64(rng.IntN(1000)))
	}
	return &engine.Run{Source: "test", Op: engine.OpSample,
		Logits: engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, flat), Params: p}
}

type sampleFilters struct {
	method     engine.SampleMethod
	temp       float64
	topK       int
	topP, minP float64
	order      engine.FilterOrder
	ties       engine.TopKTies
	tempOrder  engine.TemperatureOrder
}

// twinDraw is the CPU twin's draw for row r, draw d, with method, made the
// way engine/cpu's sample op makes draw 0, through the exported samplers.
func twinDraw(t *testing.T, run *engine.Run, r, d int, method engine.SampleMethod, seed uint64) int {
	t.Helper()
	kp, err := run.Params.ForOp(run.Op, run.Rows())
	if err != nil {
		t.Fatal(err)
	}
	v := run.Vocab()
	x := make([]float32, v)
	run.Logits.Floats32(r*v, x)
	w := make([]float32, v)
	if !cpu.Weights(x, kp.Temperature[r], w) {
		return -1
	}
	var keep []bool
	if kp.Filtered(r, v) {
		keep = make([]bool, v)
		fw := w
		if kp.TemperatureOrder == engine.TemperatureLast && kp.Temperature[r] != 1 {
			fw = make([]float32, v)
			cpu.Weights(x, 1, fw)
		}
		cpu.Filter(fw, kp.TopK[r], kp.TopP[r], kp.MinP[r], kp.Order, kp.Ties, keep)
	}
	s := philox.NewStream(seed, kp.Offset[r], r, d)
	switch method {
	case engine.SampleGumbel:
		return cpu.SampleGumbel(x, kp.Temperature[r], keep, s)
	case engine.SampleRejection:
		return cpu.SampleRejection(w, keep, kp.Ties, s)
	}
	return cpu.SampleInverseCDF(w, keep, s)
}

// A lesson's token is the CPU twin's draw for the same seed, offset, row
// and draw, for every method, on random rows under several filters; draw 0
// of the run's own method is the token the backend wrote, and the inverse
// CDF's draws are its many-draws samples.
func TestTeachSampleMatchesTheTwin(t *testing.T) {
	tests := []struct {
		name string
		f    sampleFilters
	}{
		{"no filter", sampleFilters{temp: 1, topP: 1}},
		{"top-k", sampleFilters{temp: 0.8, topK: 1 + rand.IntN(40), topP: 1}},
		{"top-p", sampleFilters{temp: 1.3, topP: 0.5 + 0.45*rand.Float64()}},
		{"min-p", sampleFilters{temp: 0.7, topP: 1, minP: 0.02 + 0.2*rand.Float64()}},
		{"top-k then top-p", sampleFilters{temp: 0.9, topK: 5 + rand.IntN(60), topP: 0.6 + 0.3*rand.Float64()}},
		{"joint, lowest index ties", sampleFilters{temp: 1, topK: 3 + rand.IntN(10), topP: 0.8, order: engine.Joint, ties: engine.TiesLowestIndex}},
		{"min_p_first, all three", sampleFilters{temp: 1.1, topK: 30, topP: 0.9, minP: 0.05, order: engine.MinPFirst}},
		{"temperature last", sampleFilters{temp: 0.5, topK: 20, topP: 0.85, tempOrder: engine.TemperatureLast}},
		{"top-k 1", sampleFilters{temp: 2, topK: 1, topP: 1}},
	}
	methods := []engine.SampleMethod{engine.SampleInverseCDF, engine.SampleRejection, engine.SampleGumbel}
	for _, tt := range tests {
		for _, method := range methods {
			t.Run(tt.name+"/"+string(method), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
				f := tt.f
				f.method = method
				const draws = 6
				run := sampleRun(rng, 7, 200+rng.IntN(3000), f)
				run.Params.Draws = draws
				out, err := cpu.New().Run(context.Background(), run)
				if err != nil {
					t.Fatal(err)
				}
				for r := range run.Rows() {
					for d := range draws {
						st, err := TeachSample(context.Background(), run, r, SampleLesson{Method: method, Draw: d})
						if err != nil {
							t.Fatal(err)
						}
						if st.Invalid != "" {
							t.Fatalf("row %d: %s", r, st.Invalid)
						}
						if want := twinDraw(t, run, r, d, method, run.Params.Seed[r]); st.Token != want {
							t.Errorf("row %d draw %d: the lesson emits %d, the twin draws %d", r, d, st.Token, want)
						}
						if d == 0 && int(out.Tokens.Int(r)) != st.Token {
							t.Errorf("row %d: the lesson emits %d, the backend's token is %d", r, st.Token, out.Tokens.Int(r))
						}
						if method == engine.SampleInverseCDF && int(out.Samples.Int(r*draws+d)) != st.Token {
							t.Errorf("row %d draw %d: the lesson emits %d, the backend's sample is %d", r, d, st.Token, out.Samples.Int(r*draws+d))
						}
						checkSampleSteps(t, st)
					}
				}
				// Another seed is another draw, still the twin's.
				seed := rng.Uint64()
				st, err := TeachSample(context.Background(), run, 1, SampleLesson{Method: method, Draw: 3, Seed: &seed})
				if err != nil {
					t.Fatal(err)
				}
				if want := twinDraw(t, run, 1, 3, method, seed); st.Token != want || st.Seed != seed {
					t.Errorf("seed %d: the lesson emits %d with seed %d, the twin draws %d", seed, st.Token, st.Seed, want)
				}
			})
		}
	}
}

// checkSampleSteps checks what a lesson's steps say against each other.
func checkSampleSteps(t *testing.T, st *SampleState) {
	t.Helper()
	shown := map[int]SampleToken{}
	for _, tk := range st.Tokens {
		shown[tk.Token] = tk
	}
	if tk, ok := shown[st.Token]; !ok || !tk.Kept {
		t.Errorf("the emitted token %d is not shown as kept: %+v", st.Token, tk)
	}
	switch st.Method {
	case engine.SampleInverseCDF:
		c := st.CDF
		if c == nil || !(c.Before <= c.Target && c.Target < c.After) || c.After > c.Total {
			t.Errorf("the inverse CDF's target is not in the token's bracket: %+v", c)
		}
	case engine.SampleRejection:
		n := len(st.Rounds)
		if n == 0 || !st.Rounds[n-1].Accepted {
			t.Fatalf("the rounds do not end in an accepted candidate: %+v", st.Rounds)
		}
		for i, rd := range st.Rounds {
			if i < n-1 && rd.Accepted {
				t.Errorf("round %d accepts but is not the last", i)
			}
			if i > 0 {
				prev := st.Rounds[i-1]
				if rd.PivotToken != prev.Candidate || rd.Candidates >= prev.Candidates || rd.Total >= prev.Total {
					t.Errorf("round %d does not shrink round %d's candidates: %+v after %+v", i, i-1, rd, prev)
				}
				if rd.CandRank >= prev.CandRank {
					t.Errorf("round %d's candidate (rank %d) is not before round %d's (rank %d)", i, rd.CandRank, i-1, prev.CandRank)
				}
			}
			if !(rd.Outside >= 0 && rd.Outside < 1) {
				t.Errorf("round %d: mass outside the filters %v", i, rd.Outside)
			}
			if !st.Filtered && (rd.Outside != 0 || !rd.Accepted) {
				t.Errorf("round %d of an unfiltered row rejects: %+v", i, rd)
			}
		}
	case engine.SampleGumbel:
		g := st.Gumbel
		if g.Winner != st.Token || shown[g.Winner].Score != g.WinnerScore {
			t.Errorf("the winner %d is not the token %d with its score: %+v", g.Winner, st.Token, g)
		}
		for _, tk := range st.Tokens {
			if tk.Kept && tk.Score > g.WinnerScore {
				t.Errorf("token %d scores %v, past the winner's %v", tk.Token, tk.Score, g.WinnerScore)
			}
		}
		if g.RunnerUp >= 0 && g.RunnerUpScore > g.WinnerScore {
			t.Errorf("the runner-up outscores the winner: %+v", g)
		}
	}
}

// Rejection over a top-k filter of a peaked row usually needs more than one
// round; the rounds' rejection probabilities are the mass outside the
// filters among the candidates, and the accepted round's candidate is kept.
func TestTeachSampleRejectionRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	run := sampleRun(rng, 4, 4000, sampleFilters{method: engine.SampleRejection, temp: 1.5, topK: 3, topP: 1})
	many := 0
	for d := range 50 {
		st, err := TeachSample(context.Background(), run, 0, SampleLesson{Draw: d})
		if err != nil {
			t.Fatal(err)
		}
		if st.Method != engine.SampleRejection {
			t.Fatalf("the run's method is rejection, the lesson teaches %s", st.Method)
		}
		if len(st.Rounds) > 1 {
			many++
		}
		if r0 := st.Rounds[0]; r0.PivotToken != -1 || r0.Candidates != st.Positive || math.Abs(float64(r0.Mass)-1) > 1e-12 ||
			math.Abs(float64(r0.Outside)-(1-float64(st.KeptMass))) > 1e-12 {
			t.Errorf("round 0 is not the whole row: %+v, kept mass %v", r0, st.KeptMass)
		}
	}
	if many == 0 {
		t.Errorf("no draw of 50 took more than one round with top-k 3 of 4000 at T = 1.5")
	}
}

// A lesson that cannot be given says why in one sentence.
func TestTeachSampleErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	run := sampleRun(rng, 3, 100, sampleFilters{temp: 1, topP: 1})
	greedy := sampleRun(rng, 2, 100, sampleFilters{temp: 0, topP: 1})
	spec := &engine.Run{Source: "spec.safetensors", Op: engine.OpSpecVerify}
	tests := []struct {
		name string
		run  *engine.Run
		row  int
		l    SampleLesson
		want string
	}{
		{"row past the end", run, 3, SampleLesson{}, "There is no row 3"},
		{"negative row", run, -1, SampleLesson{}, "There is no row -1"},
		{"negative draw", run, 0, SampleLesson{Draw: -1}, "Draw -1 is out of range"},
		{"draw past the end", run, 0, SampleLesson{Draw: MaxDraw}, "out of range"},
		{"unknown method", run, 0, SampleLesson{Method: "beam"}, `There is no sampler "beam"`},
		{"greedy row", greedy, 1, SampleLesson{Method: engine.SampleGumbel}, "Row 1 is greedy"},
		{"not a sample run", spec, 0, SampleLesson{}, "not sample"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := TeachSample(context.Background(), tt.run, tt.row, tt.l)
			var le *Error
			if !errors.As(err, &le) || !strings.Contains(le.Msg, tt.want) || !strings.HasSuffix(le.Msg, ".") {
				t.Errorf("err = %v, want an *Error with %q", err, tt.want)
			}
		})
	}
}

// A row without a distribution is taught as invalid, not as an error.
func TestTeachSampleInvalidRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	run := sampleRun(rng, 2, 50, sampleFilters{temp: 1, topP: 1})
	x := make([]float32, 100)
	run.Logits.Floats32(0, x)
	x[60] = float32(math.NaN())
	run.Logits = engine.FromFloat32s("logits", engine.F32, []int{2, 50}, x)
	for _, m := range []engine.SampleMethod{engine.SampleInverseCDF, engine.SampleRejection, engine.SampleGumbel} {
		st, err := TeachSample(context.Background(), run, 1, SampleLesson{Method: m})
		if err != nil || st.Invalid == "" || st.Token != -1 {
			t.Errorf("%s: %v, %+v", m, err, st)
		}
	}
}
