package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// specRun builds a one-row spec_verify run from target logits [K+1][V],
// draft tokens [K] and draft probs [K][V] (nil: one-hot).
func specRun(target [][]float64, drafts []int64, q [][]float64) *engine.Run {
	k, v := len(drafts), len(target[0])
	run := &engine.Run{
		Op:           engine.OpSpecVerify,
		TargetLogits: engine.FromFloat64s("target_logits", engine.F64, []int{1, k + 1, v}, slices.Concat(target...)),
		DraftTokens:  engine.FromInts("draft_tokens", engine.I64, []int{1, k}, drafts),
		Params:       engine.Params{Temperature: []float64{1}, TopK: []int{0}, TopP: []float64{1}, MinP: []float64{0}},
	}
	if q != nil {
		run.DraftProbs = engine.FromFloat64s("draft_probs", engine.F64, []int{1, k, v}, slices.Concat(q...))
	}
	return run
}

// softmaxOf is a plain softmax, independent of the package's code.
func softmaxOf(x []float64) []float64 {
	m := slices.Max(x)
	p := make([]float64, len(x))
	s := 0.0
	for i, v := range x {
		p[i] = math.Exp(v - m)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// bruteForce enumerates every path of the chain (accept or reject at each
// position, then the resampled or bonus token) and returns the law of the
// emitted length, the law of each position's token given the chain reaches
// it, and the mean number of acceptances over all K independent tests.
func bruteForce(target [][]float64, drafts []int64, q [][]float64) (emitted []float64, position [][]float64, meanAccepted float64) {
	k, v := len(drafts), len(target[0])
	p := make([][]float64, k+1)
	for i := range p {
		p[i] = softmaxOf(target[i])
	}
	qOf := func(i, j int) float64 {
		if q != nil {
			return q[i][j]
		}
		if int64(j) == drafts[i] {
			return 1
		}
		return 0
	}
	accept := make([]float64, k)
	residual := make([][]float64, k)
	for i := range k {
		x := int(drafts[i])
		switch {
		case p[i][x] == 0:
		case qOf(i, x) == 0:
			accept[i] = 1
		default:
			accept[i] = math.Min(1, p[i][x]/qOf(i, x))
		}
		r := make([]float64, v)
		s := 0.0
		for j := range r {
			r[j] = math.Max(p[i][j]-qOf(i, j), 0)
			s += r[j]
		}
		for j := range r {
			r[j] /= s
		}
		residual[i] = r
	}
	emitted = make([]float64, k+1)
	position = make([][]float64, k+1)
	reach := make([]float64, k+1)
	for i := range position {
		position[i] = make([]float64, v)
	}
	// Every accept/reject pattern of the K independent tests.
	for mask := 0; mask < 1<<k; mask++ {
		prob := 1.0
		accepted := 0
		for i := range k {
			if mask>>i&1 == 1 {
				prob *= accept[i]
				accepted++
			} else {
				prob *= 1 - accept[i]
			}
		}
		meanAccepted += prob * float64(accepted)
		// The chain stops at the first rejection.
		e := k
		for i := range k {
			if mask>>i&1 == 0 {
				e = i
				break
			}
		}
		emitted[e] += prob
		for i := 0; i <= e; i++ {
			reach[i] += prob
			switch {
			case i < e:
				position[i][drafts[i]] += prob
			case e < k:
				for j := range v {
					position[i][j] += prob * residual[i][j]
				}
			default:
				for j := range v {
					position[i][j] += prob * p[k][j]
				}
			}
		}
	}
	for i := range position {
		for j := range position[i] {
			position[i][j] /= reach[i]
		}
	}
	return emitted, position, meanAccepted
}

// randomDraft returns a random distribution over v tokens with some zeros.
func randomDraft(rng *rand.Rand, v int) []float64 {
	q := make([]float64, v)
	s := 0.0
	for j := range q {
		if rng.IntN(4) > 0 {
			q[j] = rng.Float64()
			s += q[j]
		}
	}
	if s == 0 {
		q[0], s = 1, 1
	}
	for j := range q {
		q[j] /= s
	}
	return q
}

func TestSpecVerifyMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, oneHot := range []bool{true, false} {
		for trial := range 200 {
			k, v := 1+rng.IntN(4), 2+rng.IntN(5)
			target := make([][]float64, k+1)
			for i := range target {
				target[i] = make([]float64, v)
				for j := range target[i] {
					target[i][j] = rng.NormFloat64() * 2
				}
			}
			drafts := make([]int64, k)
			var q [][]float64
			for i := range drafts {
				drafts[i] = int64(rng.IntN(v))
			}
			if !oneHot {
				q = make([][]float64, k)
				for i := range q {
					q[i] = randomDraft(rng, v)
				}
			}
			s := SpecVerify(specRun(target, drafts, q), 0, 1e-6)
			if s.Invalid != "" {
				t.Fatalf("invalid: %s", s.Invalid)
			}
			emitted, position, mean := bruteForce(target, drafts, q)
			total := 0.0
			for _, e := range s.Emitted {
				total += e
			}
			if math.Abs(total-1) > 1e-12 {
				t.Errorf("trial %d: emitted-length law sums to %v", trial, total)
			}
			if !closeSlices(s.Emitted, emitted, 1e-12) {
				t.Errorf("trial %d (one-hot %v): Emitted = %v, brute force %v", trial, oneHot, s.Emitted, emitted)
			}
			for j := range position {
				if !closeSlices(s.Position[j], position[j], 1e-12) {
					t.Errorf("trial %d: Position[%d] = %v, brute force %v", trial, j, s.Position[j], position[j])
				}
			}
			if math.Abs(s.MeanAccepted-mean) > 1e-12 {
				t.Errorf("trial %d: MeanAccepted = %v, brute force %v", trial, s.MeanAccepted, mean)
			}
		}
	}
}

func closeSlices(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol {
			return false
		}
	}
	return true
}

func TestSpecVerifyIsLossless(t *testing.T) {
	// Drawing the draft token from q and then verifying emits tokens that
	// follow p: averaged over x ~ q, the first position's law is p_0.
	rng := rand.New(rand.NewPCG(13, 14))
	for trial := range 50 {
		v := 2 + rng.IntN(6)
		target := [][]float64{make([]float64, v), make([]float64, v)}
		for i := range target {
			for j := range target[i] {
				target[i][j] = rng.NormFloat64()
			}
		}
		for _, oneHot := range []bool{true, false} {
			q := randomDraft(rng, v)
			mix := make([]float64, v)
			for x := range v {
				var qs [][]float64
				weight := q[x]
				if oneHot {
					weight = 1.0 / float64(v) // any drafter: each x alone is lossless
				} else {
					qs = [][]float64{q}
				}
				s := SpecVerify(specRun(target, []int64{int64(x)}, qs), 0, 1e-6)
				for j := range mix {
					mix[j] += weight * s.Position[0][j]
				}
			}
			if want := softmaxOf(target[0]); !closeSlices(mix, want, 1e-12) {
				t.Errorf("trial %d (one-hot %v): mixture %v, want p_0 = %v", trial, oneHot, mix, want)
			}
		}
	}
}

func TestSpecVerifyInvalidRows(t *testing.T) {
	ok := [][]float64{{0, 1, 2}, {2, 1, 0}}
	tests := []struct {
		name   string
		target [][]float64
		drafts []int64
		q      [][]float64
		want   string
	}{
		{"NaN target", [][]float64{{0, 1, 2}, {0, math.NaN(), 1}}, []int64{1}, nil, "target logits at position 1 contain NaN at 1 of 3 tokens, first at token 1"},
		{"draft token out of range", ok, []int64{3}, nil, "draft token 3 at position 0 is outside [0, 3)"},
		{"negative draft prob", ok, []int64{0}, [][]float64{{0.5, 0.7, -0.2}}, "draft probs at position 0 contain the negative value -0.2 at token 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := SpecVerify(specRun(tt.target, tt.drafts, tt.q), 0, 1e-6)
			if s.Invalid != tt.want {
				t.Errorf("Invalid = %q, want %q", s.Invalid, tt.want)
			}
		})
	}
}

func TestNgramMatch(t *testing.T) {
	type row struct {
		prompt []int64
		gen    []int64
	}
	tests := []struct {
		name      string
		rows      []row
		maxN      int
		width     int
		threshold int
		want      [][]int64
		// matches says per row where NgramRows found the match and the
		// budget the row saw: "prompt@0 n=3 budget=100", or "none budget=6".
		matches []string
	}{
		{
			name: "leftmost match in the prompt",
			rows: []row{{prompt: []int64{1, 2, 3, 9, 1, 2, 3, 7, 8}, gen: []int64{5, 1, 2, 3}}},
			maxN: 3, width: 4, threshold: 100,
			want:    [][]int64{{9, 1, 2, 3}},
			matches: []string{"prompt@0 n=3 budget=100"},
		},
		{
			name: "the prompt is searched before the generated tokens",
			rows: []row{{prompt: []int64{6, 9, 9}, gen: []int64{6, 7, 6}}},
			maxN: 3, width: 4, threshold: 100,
			want:    [][]int64{{9, 9, -1, -1}},
			matches: []string{"prompt@0 n=1 budget=100"},
		},
		{
			name: "generated tokens when the prompt has no match",
			rows: []row{{prompt: []int64{4, 4, 6}, gen: []int64{6, 7, 1, 2, 6}}},
			maxN: 3, width: 3, threshold: 100,
			want:    [][]int64{{7, 1, 2}},
			matches: []string{"generated@0 n=1 budget=100"},
		},
		{
			name: "a longer n wins over an earlier shorter match",
			rows: []row{{prompt: []int64{2, 7, 1, 2, 8}, gen: []int64{1, 2}}},
			maxN: 3, width: 4, threshold: 100,
			want:    [][]int64{{8, -1, -1, -1}},
			matches: []string{"prompt@2 n=2 budget=100"},
		},
		{
			name: "a match at the end of the prompt gives no draft",
			rows: []row{{prompt: []int64{3, 1, 2}, gen: []int64{1, 2}}},
			maxN: 2, width: 2, threshold: 100,
			want:    [][]int64{{-1, -1}},
			matches: []string{"none budget=100"},
		},
		{
			name: "the budget runs out across rows",
			rows: []row{
				{prompt: []int64{1, 5, 6, 7, 8}, gen: []int64{1}},
				{prompt: []int64{1, 5, 6, 7, 8}, gen: []int64{1}},
				{prompt: []int64{1, 5, 6, 7, 8}, gen: []int64{1}},
			},
			maxN: 3, width: 4, threshold: 6,
			want:    [][]int64{{5, 6, 7, 8}, {5, 6, -1, -1}, {-1, -1, -1, -1}},
			matches: []string{"prompt@0 n=1 budget=6", "prompt@0 n=1 budget=2", "none budget=0"},
		},
		{
			name: "no generated tokens, no draft",
			rows: []row{{prompt: []int64{1, 2, 3}, gen: nil}},
			maxN: 3, width: 2, threshold: 100,
			want:    [][]int64{{-1, -1}},
			matches: []string{"none budget=100"},
		},
		{
			name: "no match",
			rows: []row{{prompt: []int64{1, 2, 3}, gen: []int64{4, 5}}},
			maxN: 3, width: 2, threshold: 100,
			want:    [][]int64{{-1, -1}},
			matches: []string{"none budget=100"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := len(tt.rows)
			const l, m = 10, 8
			in, pre := make([]int64, b*l), make([]int64, b*m)
			inLen, step := make([]int64, b), make([]int64, b)
			for r, rw := range tt.rows {
				for j := range l {
					in[r*l+j] = 99 // padding that must never match
				}
				copy(in[r*l:], rw.prompt)
				copy(pre[r*m:], rw.gen)
				inLen[r], step[r] = int64(len(rw.prompt)), int64(len(rw.gen))
			}
			run := &engine.Run{
				Op:          engine.OpNgramMatch,
				InputIDs:    engine.FromInts("input_ids", engine.I64, []int{b, l}, in),
				InputIDsLen: engine.FromInts("input_ids_len", engine.I32, []int{b}, inLen),
				PreIDs:      engine.FromInts("pre_ids", engine.I64, []int{b, m}, pre),
				StepIdx:     engine.FromInts("step_idx", engine.I32, []int{b}, step),
				Params:      engine.Params{MaxNgramSize: tt.maxN, MaxDraftTokens: tt.width, Threshold: tt.threshold},
			}
			got := NgramMatch(run)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d rows, want %d", len(got), len(tt.want))
			}
			for r := range got {
				if !slices.Equal(got[r], tt.want[r]) {
					t.Errorf("row %d: got %v, want %v", r, got[r], tt.want[r])
				}
			}
			for r, nr := range NgramRows(run) {
				where := fmt.Sprintf("none budget=%d", nr.Budget)
				if nr.N > 0 {
					where = fmt.Sprintf("%s@%d n=%d budget=%d", nr.Source, nr.Start, nr.N, nr.Budget)
				}
				if where != tt.matches[r] {
					t.Errorf("row %d: match %q, want %q", r, where, tt.matches[r])
				}
			}
		})
	}
}
