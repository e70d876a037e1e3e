package session

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/scenarios"
)

// testDump writes a dump of op with fresh random logits and external probs
// from the CPU backend, with the rows in bad moved well off the reference.
func testDump(t testing.TB, op engine.Op, rows, vocab int, bad []int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	logits := make([]float32, rows*vocab)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2.5)
	}
	temps := make([]float64, rows)
	topP := make([]float64, rows)
	for r := range temps {
		temps[r] = 0.5 + rng.Float64()
		topP[r] = 0.8 + 0.2*rng.Float64()
	}
	tensors := []*engine.Tensor{
		engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, logits),
		engine.FromFloat64s("temperature", engine.F32, []int{rows}, temps),
	}
	if op == engine.OpRenorm {
		tensors = append(tensors, engine.FromFloat64s("top_p", engine.F32, []int{rows}, topP))
	}
	meta := map[string]string{"op": string(op), "source": "pipeline test"}
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	f, err := dump.Parse("t.safetensors", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	run, err := dump.BuildRun(f, engine.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cpu.New().Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	probs := &engine.Tensor{Name: "probs", DType: out.Probs.DType, Shape: out.Probs.Shape, Data: append([]byte(nil), out.Probs.Data...)}
	for _, r := range bad {
		// Move mass from the most probable token to another kept token.
		i := r * vocab
		best := i
		for j := i; j < i+vocab; j++ {
			if probs.Float(j) > probs.Float(best) {
				best = j
			}
		}
		probs.SetFloat(best, probs.Float(best)-0.01)
	}
	buf.Reset()
	if err := dump.WriteSafetensors(&buf, append(tensors, probs), meta); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "upload-123.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// recorder is a RowSink that keeps what it is told and checks it is never
// told two things at once.
type recorder struct {
	mu      sync.Mutex
	busy    bool
	outputs []engine.OutputInfo
	rows    []RowUpdate
	overlap bool
}

func (r *recorder) Outputs(o []engine.OutputInfo) { r.outputs = o }
func (r *recorder) Row(u RowUpdate) {
	r.mu.Lock()
	if r.busy {
		r.overlap = true
	}
	r.busy = true
	r.mu.Unlock()
	r.rows = append(r.rows, u)
	r.mu.Lock()
	r.busy = false
	r.mu.Unlock()
}

func TestExecuteJudgesAndStreams(t *testing.T) {
	tests := []struct {
		name string
		op   engine.Op
	}{
		{"softmax", engine.OpSoftmax},
		{"renorm", engine.OpRenorm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, vocab := 6+rand.IntN(6), 200+rand.IntN(300)
			bad := []int{rand.IntN(rows)}
			path := testDump(t, tt.op, rows, vocab, bad)
			p := New(cpu.New())
			info, err := p.Inspect(context.Background(), path, "mine.safetensors")
			if err != nil {
				t.Fatal(err)
			}
			if info.Op != tt.op || info.Rows != rows || info.Vocab != vocab || info.Input != "logits" || len(info.External) != 1 || info.External[0] != "probs" {
				t.Errorf("info = %+v", info)
			}
			job := Job{DumpPath: path, FileName: "mine.safetensors", OutputsPath: filepath.Join(t.TempDir(), "outputs.safetensors"), Backend: "cpu"}
			var rec recorder
			rep, err := p.Execute(context.Background(), job, &rec)
			if err != nil {
				t.Fatal(err)
			}
			if rec.overlap {
				t.Error("the sink was told two rows at once")
			}
			if len(rec.outputs) != 2 || rec.outputs[0].Name != "cpu" || rec.outputs[1].Name != "probs" || !rec.outputs[1].External {
				t.Fatalf("outputs = %+v", rec.outputs)
			}
			if len(rec.rows) != 2*rows {
				t.Fatalf("%d rows streamed, want %d", len(rec.rows), 2*rows)
			}
			if rep.Pass || !rep.Outputs[0].Pass || rep.Outputs[1].FailedRows != 1 || rep.Device == nil || rep.Device.Backend != "cpu" {
				t.Errorf("report: pass %v, ours %v, external failed %d", rep.Pass, rep.Outputs[0].Pass, rep.Outputs[1].FailedRows)
			}
			for _, u := range rec.rows {
				e := u.Errors
				if e == nil {
					t.Fatalf("row %d of output %d without errors", u.Report.Row, u.Output)
				}
				n := 0
				for _, c := range e.Hist {
					n += c
				}
				if n != vocab || len(e.Buckets) != HeatBuckets {
					t.Errorf("row %d: histogram of %d tokens, %d buckets", u.Report.Row, n, len(e.Buckets))
				}
				// The chart's rule: above the line exactly when the row breaks
				// the tolerance.
				if over := e.Worst > e.Allowed; over == u.Report.Pass {
					t.Errorf("output %d row %d: pass %v but worst %g vs allowed %g", u.Output, u.Report.Row, u.Report.Pass, e.Worst, e.Allowed)
				}
			}
			// Judging again with loose tolerances reads the stored outputs.
			loose := &engine.Tolerances{Strict: engine.Tolerance{Atol: 0.1}, Native: engine.Tolerance{Atol: 0.1}, PValue: 1e-3}
			job.Tolerances = loose
			rec = recorder{}
			rep, err = p.Rejudge(context.Background(), job, &rec)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Pass || rep.Tolerances.Strict != loose.Strict || len(rec.rows) != 2*rows {
				t.Errorf("rejudged: pass %v, tolerances %+v, %d rows", rep.Pass, rep.Tolerances, len(rec.rows))
			}
			// The row page of the bad row.
			d, err := p.Row(context.Background(), job, bad[0], 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Tokens) != 10 || len(d.Probs) != 2 || d.Tokens[0].Rank != 1 || d.Vocab != vocab {
				t.Fatalf("row detail: %d tokens, %d outputs", len(d.Tokens), len(d.Probs))
			}
			if got := float64(d.Tokens[0].Values[1] - d.Tokens[0].Ref); math.Abs(got+0.01) > 1e-4 {
				t.Errorf("top token error of the planted row = %g, want -0.01", got)
			}
			last := d.CDF[len(d.CDF)-1]
			if last.Rank != vocab || math.Abs(float64(last.Mass)-1) > 1e-9 {
				t.Errorf("CDF ends at rank %d mass %g", last.Rank, last.Mass)
			}
			if tt.op == engine.OpRenorm && (d.Cuts.TopPMass <= 0 || d.Cuts.TopPRank <= 0 || d.Cuts.Kept > vocab) {
				t.Errorf("renorm cuts = %+v", d.Cuts)
			}
		})
	}
}

func TestInspectNamesTheUploadersFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content []byte
		want    string
	}{
		{"not a dump", []byte("hello, these are not logits"), "notes.bin: "},
		{"truncated", []byte{0x40, 0, 0, 0, 0, 0, 0, 0, '{', '"'}, "notes.bin: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "upload-999.safetensors")
			os.WriteFile(path, tt.content, 0o644)
			_, err := New(cpu.New()).Inspect(context.Background(), path, "notes.bin")
			var bad *InputError
			if !errors.As(err, &bad) {
				t.Fatalf("err = %v, want a BadDumpError", err)
			}
			if !strings.HasPrefix(bad.Error(), tt.want) || strings.Contains(bad.Error(), "upload-999") {
				t.Errorf("message %q, want it to start with %q and not name the temporary file", bad.Error(), tt.want)
			}
		})
	}
}

func TestRejudgeWithoutOutputs(t *testing.T) {
	path := testDump(t, engine.OpSoftmax, 2, 16, nil)
	job := Job{DumpPath: path, FileName: "x", OutputsPath: filepath.Join(t.TempDir(), "none"), Backend: "cpu"}
	if _, err := New(cpu.New()).Rejudge(context.Background(), job, &recorder{}); !errors.Is(err, ErrNoOutputs) {
		t.Errorf("err = %v, want ErrNoOutputs", err)
	}
}

func TestRowErrors(t *testing.T) {
	tol := engine.Tolerance{Atol: 1e-5, Rtol: 1e-2}
	refp := []float64{0.5, 0.3, 0.2, 0}
	tests := []struct {
		name      string
		out       []float64
		wantToken int
		over      bool
	}{
		{"exact", []float64{0.5, 0.3, 0.2, 0}, 0, false},
		{"off at a small token", []float64{0.5, 0.3, 0.2, 1e-3}, 3, true},
		{"large token within rtol", []float64{0.503, 0.3, 0.2, 0}, 0, false},
		{"NaN", []float64{0.5, math.NaN(), 0.2, 0}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := measureRow(tt.out, refp, tol)
			if e.Token != tt.wantToken || (e.Worst > e.Allowed) != tt.over {
				t.Errorf("token %d worst %g allowed %g; want token %d over %v", e.Token, e.Worst, e.Allowed, tt.wantToken, tt.over)
			}
		})
	}
}

// BenchmarkExecute measures a whole run (kernels, storing outputs, judging,
// the error summaries) of a renorm dump of 128 rows x 32000 tokens with an
// external output.
func BenchmarkExecute(b *testing.B) {
	path := testDump(b, engine.OpRenorm, 128, 32000, []int{3})
	p := New(cpu.New())
	job := Job{DumpPath: path, FileName: "bench.safetensors", OutputsPath: filepath.Join(b.TempDir(), "outputs.safetensors"), Backend: "cpu"}
	for b.Loop() {
		if _, err := p.Execute(context.Background(), job, &recorder{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestExecuteTokenOps(t *testing.T) {
	tests := []struct {
		name string
		op   engine.Op
	}{
		{"argmax", engine.OpArgmax},
		{"sample", engine.OpSample},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, vocab := 5+rand.IntN(5), 100+rand.IntN(100)
			logits := make([]float32, rows*vocab)
			for i := range logits {
				logits[i] = float32(rand.NormFloat64() * 3)
			}
			// External tokens: the least probable token of row 0, the most
			// probable elsewhere (right for argmax, and in the support of a
			// sampler with top-k 5).
			tokens := make([]int64, rows)
			for r := range tokens {
				best, worst := 0, 0
				for i := 0; i < vocab; i++ {
					if logits[r*vocab+i] > logits[r*vocab+best] {
						best = i
					}
					if logits[r*vocab+i] < logits[r*vocab+worst] {
						worst = i
					}
				}
				tokens[r] = int64(best)
				if r == 0 {
					tokens[r] = int64(worst)
				}
			}
			tensors := []*engine.Tensor{
				engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, logits),
				engine.FromInts("top_k", engine.I64, []int{}, []int64{5}),
				engine.FromInts("tokens", engine.I64, []int{rows}, tokens),
			}
			var buf bytes.Buffer
			if err := dump.WriteSafetensors(&buf, tensors, map[string]string{"op": string(tt.op)}); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "d.safetensors")
			os.WriteFile(path, buf.Bytes(), 0o644)
			p := New(cpu.New())
			job := Job{DumpPath: path, FileName: "d.safetensors", OutputsPath: filepath.Join(t.TempDir(), "o.safetensors"), Backend: "cpu"}
			var rec recorder
			rep, err := p.Execute(context.Background(), job, &rec)
			if err != nil {
				t.Fatal(err)
			}
			// A sample run makes engine.DefaultDraws draws a row when the
			// person names none, so ours is judged as samples.
			ours := "tokens"
			if tt.op == engine.OpSample {
				ours = "samples"
			}
			if len(rec.outputs) != 2 || rec.outputs[0].Kind != ours || rec.outputs[1].Kind != "tokens" {
				t.Fatalf("outputs %+v", rec.outputs)
			}
			if !rep.Outputs[0].Pass || rep.Outputs[1].FailedRows != 1 || rep.Outputs[1].Rows[0].Pass {
				t.Errorf("ours pass %v; external failed %d rows", rep.Outputs[0].Pass, rep.Outputs[1].FailedRows)
			}
			for _, u := range rec.rows {
				if u.Errors != nil {
					t.Errorf("token row %d has elementwise errors", u.Report.Row)
				}
			}
			d, err := p.Row(context.Background(), job, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if d.Chosen["tokens"] != tokens[0] || len(d.Tokens) != 10 || len(d.Probs) != 0 {
				t.Errorf("row detail: chosen %v, %d tokens, %d prob outputs", d.Chosen, len(d.Tokens), len(d.Probs))
			}
		})
	}
}

func TestRowShowsTheNgramMatch(t *testing.T) {
	// Row 0 matches [2 3] in the prompt at 1 and takes 2 of the budget of 3;
	// row 1 matches [5 6] at 0 and may propose only the 1 token left.
	in := []int64{1, 2, 3, 9, 8, 0, 5, 6, 7, 5, 6, 4}
	pre := []int64{7, 2, 3, 0, 5, 6, 0, 0}
	tensors := []*engine.Tensor{
		engine.FromInts("input_ids", engine.I64, []int{2, 6}, in),
		engine.FromInts("input_ids_len", engine.I64, []int{2}, []int64{5, 6}),
		engine.FromInts("pre_ids", engine.I64, []int{2, 4}, pre),
		engine.FromInts("step_idx", engine.I64, []int{2}, []int64{3, 2}),
		// The external drafter got row 0 right and row 1 wrong.
		engine.FromInts("draft_out", engine.I32, []int{2, 2}, []int64{9, 8, 4, -1}),
	}
	meta := map[string]string{"op": "ngram_match", "max_ngram_size": "2", "max_draft_tokens": "2", "threshold": "3"}
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ngram.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := New(cpu.New())
	job := Job{DumpPath: path, FileName: "ngram.safetensors", OutputsPath: filepath.Join(t.TempDir(), "o.safetensors"), Backend: "cpu"}
	// The run's header names what it drafts from, with its dtype (not
	// INVALID: an ngram_match run has no logits).
	info, err := p.Admit(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if info.Input != "pre_ids" || info.DType != engine.I64 || !slices.Equal(info.Shape, []int{2, 4}) {
		t.Errorf("info: input %s %v %v, want pre_ids I64 [2 4]", info.Input, info.DType, info.Shape)
	}
	if _, err := p.Execute(context.Background(), job, &recorder{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		row       int
		source    string
		start, n  int
		budget    int
		reference []int64
		drafts    map[string][]int64
	}{
		{0, "prompt", 1, 2, 3, []int64{9, 8}, map[string][]int64{"cpu": {9, 8}, "draft_out": {9, 8}}},
		{1, "prompt", 0, 2, 1, []int64{7}, map[string][]int64{"cpu": {7}, "draft_out": {4}}},
	}
	for _, tt := range tests {
		d, err := p.Row(context.Background(), job, tt.row, 20)
		if err != nil {
			t.Fatal(err)
		}
		n := d.Ngram
		if n == nil {
			t.Fatalf("row %d: no n-gram detail", tt.row)
		}
		if n.Source != tt.source || n.Start != tt.start || n.N != tt.n || n.Budget != tt.budget || !slices.Equal(n.Reference, tt.reference) {
			t.Errorf("row %d: match %s@%d n=%d budget %d draft %v, want %s@%d n=%d budget %d draft %v",
				tt.row, n.Source, n.Start, n.N, n.Budget, n.Reference, tt.source, tt.start, tt.n, tt.budget, tt.reference)
		}
		for _, dr := range n.Drafts {
			if want := tt.drafts[dr.Name]; !slices.Equal(dr.Tokens, want) {
				t.Errorf("row %d: %s drafted %v, want %v", tt.row, dr.Name, dr.Tokens, want)
			}
		}
		if len(n.Drafts) != 2 {
			t.Errorf("row %d: %d drafts, want ours and the dump's", tt.row, len(n.Drafts))
		}
	}
}

func TestRowSaysWhenSamplesMatchOursDrawForDraw(t *testing.T) {
	// The seeded-determinism scenario records the draws our CPU backend makes
	// for its seeds; a second dump holds the same draws shifted by one.
	sc, ok := scenarios.Lookup("seeded-determinism")
	if !ok {
		t.Fatal("no seeded-determinism scenario")
	}
	data, err := sc.DumpBytes()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "seeded.safetensors")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p := New(cpu.New())
	job := Job{DumpPath: path, FileName: "seeded.safetensors", OutputsPath: filepath.Join(t.TempDir(), "o.safetensors"), Backend: "cpu", Overrides: engine.Overrides{Draws: sc.Overrides.Draws}}
	if _, err := p.Execute(context.Background(), job, &recorder{}); err != nil {
		t.Fatal(err)
	}
	d, err := p.Row(context.Background(), job, 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Samples
	if s == nil || len(s.SameAsFirst) != 2 || s.SameAsFirst[0] || !s.SameAsFirst[1] {
		t.Fatalf("samples %+v: want the dump's draws to be ours, draw for draw", s)
	}

	// Without the recorded seed's draw count the comparison says nothing.
	job.Overrides.Draws = nil
	job.OutputsPath = filepath.Join(t.TempDir(), "o2.safetensors")
	if _, err := p.Execute(context.Background(), job, &recorder{}); err != nil {
		t.Fatal(err)
	}
	if d, err = p.Row(context.Background(), job, 0, 20); err != nil {
		t.Fatal(err)
	}
	if s := d.Samples; s == nil || s.SameAsFirst[1] {
		t.Errorf("samples %+v: %d draws of ours cannot equal the dump's %d", s, engine.DefaultDraws, *sc.Overrides.Draws)
	}
}
