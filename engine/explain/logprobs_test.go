package explain_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/compare"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/explain"
)

// logSoftmax is the log-softmax of xs/t over the tokens keep holds, -Inf
// for the others, in float64.
func logSoftmax(xs []float64, t float64, keep func(i int) bool) []float64 {
	m := math.Inf(-1)
	for i, x := range xs {
		if keep(i) {
			m = max(m, x/t)
		}
	}
	sum := 0.0
	for i, x := range xs {
		if keep(i) {
			sum += math.Exp(x/t - m)
		}
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Inf(-1)
		if keep(i) {
			out[i] = x/t - m - math.Log(sum)
		}
	}
	return out
}

// TestLogprobsDetail describes the rows of a renorm dump with fresh random
// logits and two logprobs outputs, every token's raw ones and a top-8 of
// processed ones (top-k 5, so three entries are -inf, and on one row a
// token of the reference's top 8 swapped for another), and checks each
// token's reference logprob against a log-softmax computed here, the
// output's value, its entry, and the tokens a top-N leaves out.
func TestLogprobsDetail(t *testing.T) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	const rows, vocab, k, n = 3, 48, 5, 8
	temps := []float64{1, 0.7, 0} // the greedy row's processed logprobs are at temperature 1
	logits := make([]float32, rows*vocab)
	for i := range logits {
		logits[i] = float32(2 * rng.NormFloat64())
	}
	row := func(r int) []float64 {
		xs := make([]float64, vocab)
		for i := range xs {
			xs[i] = float64(logits[r*vocab+i])
		}
		return xs
	}
	orders := make([][]int, rows)
	raw := make([]float32, rows*vocab)
	topVals := make([]float32, rows*n)
	topIDs := make([]int64, rows*n)
	for r := range rows {
		xs := row(r)
		for i, l := range logSoftmax(xs, 1, func(int) bool { return true }) {
			raw[r*vocab+i] = float32(l)
		}
		order := make([]int, vocab)
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool { return xs[order[a]] > xs[order[b]] })
		orders[r] = order
		t := temps[r]
		if t == 0 {
			t = 1
		}
		kept := map[int]bool{}
		for _, i := range order[:k] {
			kept[i] = true
		}
		proc := logSoftmax(xs, t, func(i int) bool { return kept[i] })
		for j, i := range order[:n] {
			topVals[r*n+j], topIDs[r*n+j] = float32(proc[i]), int64(i)
		}
	}
	// Row 2's top-8 names its 9th most probable token, which top-k drops,
	// in place of its 5th, which it keeps: the row page lists the kept
	// token it leaves out after its entries.
	leftOut := orders[2][k-1]
	topIDs[2*n+k-1] = int64(orders[2][n])

	tensors := []*engine.Tensor{
		engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, []int{rows}, temps),
		engine.FromInts("top_k", engine.I64, nil, []int64{k}),
		engine.FromFloat32s("logprobs@raw", engine.F32, []int{rows, vocab}, raw),
		engine.FromFloat32s("logprobs@proc", engine.F32, []int{rows, n}, topVals),
		engine.FromInts("logprob_token_ids@proc", engine.I64, []int{rows, n}, topIDs),
	}
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, map[string]string{"op": "renorm", "logprobs_kind@proc": "processed"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "lp.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	run, f, err := dump.Load(path, engine.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	outs := compare.ExternalOutputs(run)

	for r := range rows {
		t.Run(string(rune('0'+r)), func(t *testing.T) {
			d := explain.Row(run, outs, nil, nil, nil, r, 10)
			if len(d.Logprobs) != 2 {
				t.Fatalf("%d logprobs details, want 2", len(d.Logprobs))
			}
			lp, lr := d.Logprobs[0], d.Logprobs[1] // outputs in name order
			if lp.Name != "logprobs@proc" || lr.Name != "logprobs@raw" {
				t.Fatalf("logprobs details %s and %s", lp.Name, lr.Name)
			}

			xs := row(r)
			want := logSoftmax(xs, 1, func(int) bool { return true })
			if lr.LogprobsKind != engine.LogprobsRaw || lr.TopN != 0 || lr.Temperature != 1 || lr.Filtered || lr.Kept != vocab {
				t.Errorf("raw: %+v", lr)
			}
			if len(lr.Tokens) < 10 {
				t.Fatalf("raw: %d tokens, want the top 10 at least", len(lr.Tokens))
			}
			for i, tok := range lr.Tokens[:10] {
				if tok.Rank != i+1 || math.Abs(float64(tok.Ref)-want[tok.Token]) > 1e-12 || tok.Value == nil ||
					float64(*tok.Value) != float64(raw[r*vocab+tok.Token]) || tok.Entry != -1 {
					t.Errorf("raw token %d: %+v, want rank %d, ref %v", i, tok, i+1, want[tok.Token])
				}
			}

			temp := temps[r]
			if temp == 0 {
				temp = 1
			}
			if lp.LogprobsKind != engine.LogprobsProcessed || lp.TopN != n || float32(lp.Temperature) != float32(temp) || !lp.Filtered || lp.Kept != k {
				t.Errorf("processed: kind %s, top %d, temperature %v, filtered %v, kept %d; want processed, %d, %v, true, %d",
					lp.LogprobsKind, lp.TopN, lp.Temperature, lp.Filtered, lp.Kept, n, temp, k)
			}
			wantTokens := n
			if r == 2 {
				wantTokens = n + 1
			}
			if len(lp.Tokens) != wantTokens {
				t.Fatalf("processed: %d tokens, want %d", len(lp.Tokens), wantTokens)
			}
			for j, tok := range lp.Tokens[:n] {
				if tok.Entry != j || int64(tok.Token) != topIDs[r*n+j] || tok.Value == nil || float64(*tok.Value) != float64(topVals[r*n+j]) {
					t.Errorf("processed entry %d: %+v, want token %d", j, tok, topIDs[r*n+j])
				}
				kept := j < k && !(r == 2 && j == k-1)
				if kept == math.IsInf(float64(tok.Ref), -1) {
					t.Errorf("processed entry %d: reference %v; only the top %d are kept", j, tok.Ref, k)
				}
			}
			if r == 2 {
				tok := lp.Tokens[n]
				if tok.Token != leftOut || tok.Entry != -1 || tok.Value != nil || tok.Rank != k || math.IsInf(float64(tok.Ref), 0) {
					t.Errorf("the token the top-N leaves out: %+v, want token %d of rank %d, not held", tok, leftOut, k)
				}
			}
		})
	}
}
