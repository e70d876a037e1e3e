package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
)

// countingBackend is a DrawCounter that runs nothing: need only asks what
// it is.
type countingBackend struct{ name string }

func (c countingBackend) Name() string          { return c.name }
func (c countingBackend) Device() engine.Device { return engine.Device{} }
func (c countingBackend) Run(context.Context, *engine.Run) (*engine.Output, error) {
	return nil, engine.ErrUnsupported
}
func (c countingBackend) DefaultDraws() int { return engine.DefaultCountedDraws }
func (c countingBackend) MaxDraws() int     { return engine.MaxDraws }

// drawing returns a backend called name with Backend's methods only: one
// that returns every draw.
func drawing(name string) engine.Backend {
	return struct{ engine.Backend }{countingBackend{name: name}}
}

// TestBudgetCountsDraws checks that the memory a sample run needs for our
// outputs follows the counts (V a row) on a backend that counts its draws,
// and the draws (N a row) on one that returns them or when the run keeps
// them; and that the draws default follows the backend.
func TestBudgetCountsDraws(t *testing.T) {
	const rows, vocab = 64, 50000
	counting := countingBackend{name: "cuda"}
	drawn := drawing("cpu")
	tests := []struct {
		name      string
		b         engine.Backend
		draws     *int
		keep      bool
		wantDraws int
		// wantPerRow is what our outputs hold a row, before the heap's slack.
		wantPerRow int64
	}{
		{"counted, default draws", counting, nil, false, engine.DefaultCountedDraws, 4*(1+vocab) + 8},
		{"counted, 10^9 draws", counting, ptr(engine.MaxDraws), false, engine.MaxDraws, 4*(1+vocab) + 8},
		{"counted but kept", counting, ptr(1000), true, 1000, 4*(1+1000) + 8},
		{"drawn, default draws", drawn, nil, false, engine.DefaultDraws, 4*(1+engine.DefaultDraws) + 8},
		{"drawn, 7 draws", drawn, ptr(7), false, 7, 4*(1+7) + 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := &engine.Run{Op: engine.OpSample, Logits: engine.NewTensor("logits", engine.BF16, rows, vocab)}
			o := engine.Overrides{Draws: tt.draws}
			if tt.draws != nil {
				run.Params.Draws = *tt.draws
			}
			run.SetWorkDefaults(o)
			run.SetBackendDefaults(o, tt.b)
			run.Params.KeepDraws = tt.keep
			if run.Params.Draws != tt.wantDraws {
				t.Errorf("draws %d, want %d", run.Params.Draws, tt.wantDraws)
			}
			n := need(run, nil, tt.b, 1, false)
			var ours int64 = -1
			for _, p := range n.Parts {
				if p.What == "our outputs" {
					ours = p.Bytes
				}
			}
			if want := int64(heapSlack * float64(rows*tt.wantPerRow)); ours != want {
				t.Errorf("our outputs %d bytes, want %d", ours, want)
			}
		})
	}
}

// TestStoredCounts checks that a stored run keeps counted draws as counts,
// with the draws they count, and reads them back the same; and that a
// stored file holding both samples and sample_counts is refused when read,
// in one sentence naming the file and the rule.
func TestStoredCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, vocab, draws = 3, 257, 1000
	counts := make([]int64, rows*vocab)
	for r := range rows {
		for range draws {
			counts[r*vocab+rng.IntN(vocab)]++
		}
	}
	tests := []struct {
		name    string
		out     *engine.Output
		wantErr string // after the file's path; "" for read back
	}{
		{"counts", &engine.Output{Name: "cuda", Tokens: engine.FromInts("tokens", engine.I32, []int{rows}, []int64{1, 2, 3}),
			SampleCounts: engine.FromInts("sample_counts", engine.I32, []int{rows, vocab}, counts), SampleDraws: draws}, ""},
		{"draws", &engine.Output{Name: "cpu", Tokens: engine.FromInts("tokens", engine.I32, []int{rows}, []int64{1, 2, 3}),
			Samples: engine.FromInts("samples", engine.I32, []int{rows, 2}, []int64{4, 5, 6, 7, 8, 9})}, ""},
		{"both", &engine.Output{Name: "cuda", Samples: engine.FromInts("samples", engine.I32, []int{rows, 2}, []int64{4, 5, 6, 7, 8, 9}),
			SampleCounts: engine.FromInts("sample_counts", engine.I32, []int{rows, vocab}, counts), SampleDraws: draws},
			" holds both samples and sample_counts, want one of the two"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "outputs.safetensors")
			if err := writeOutputs(path, tt.out, nil, engine.Device{Backend: tt.out.Name}); err != nil {
				t.Fatal(err)
			}
			st, err := readOutputs(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), path+tt.wantErr) {
					t.Fatalf("readOutputs: %v, want an error saying %q", err, path+tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			got := st.ours
			for _, c := range []struct {
				what      string
				got, want *engine.Tensor
			}{{"tokens", got.Tokens, tt.out.Tokens}, {"samples", got.Samples, tt.out.Samples}, {"sample_counts", got.SampleCounts, tt.out.SampleCounts}} {
				if (c.got == nil) != (c.want == nil) || c.got != nil && !bytes.Equal(c.got.Data, c.want.Data) {
					t.Errorf("%s: stored %v, want %v", c.what, c.got, c.want)
				}
			}
			if got.SampleDraws != tt.out.SampleDraws {
				t.Errorf("sample draws %d, want %d", got.SampleDraws, tt.out.SampleDraws)
			}
		})
	}
}

// TestExternalSampleCounts judges a dump that brings its draws counted per
// token (sample_counts): engine/cpu's draws histogrammed pass, the same
// counts with draws moved onto a dropped token fail on the support, each in
// one output of kind samples with a fit of all the draws; beside the same
// draws listed (samples), the counts are a second output, judged on their
// own, never ignored.
func TestExternalSampleCounts(t *testing.T) {
	const rows, vocab, draws = 4, 3000, 20000
	rng := rand.New(rand.NewPCG(30, 31))
	x := make([]float32, rows*vocab)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 2)
	}
	logits := engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, x)
	seeds := engine.FromInts("seed", engine.I64, []int{rows}, []int64{5, 6, 7, 8})
	topK := engine.FromInts("top_k", engine.I64, []int{rows}, []int64{100, 100, 100, 100})
	run := buildRun(t, []*engine.Tensor{logits, seeds, topK}, map[string]string{"op": "sample"}, engine.Overrides{Draws: ptr(draws)})
	out, err := cpu.New().Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int64, rows*vocab)
	for i := range rows * draws {
		counts[(i/draws)*vocab+int(out.Samples.Int(i))]++
	}
	spoiled := slices.Clone(counts)
	for tok := range vocab { // 30 draws of row 2 onto a token top-k drops
		if spoiled[2*vocab+tok] == 0 && x[2*vocab+tok] < 0 {
			spoiled[2*vocab+tok] += 30
			spoiled[2*vocab+int(out.Tokens.Int(2))] -= 30
			break
		}
	}
	tests := []struct {
		name     string
		counts   []int64
		samples  bool // the dump lists engine/cpu's draws too
		failRows []int
	}{
		{"engine/cpu's draws", counts, false, nil},
		{"draws off the support", spoiled, false, []int{2}},
		{"draws off the support beside samples", spoiled, true, []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "counts.safetensors")
			var buf bytes.Buffer
			tensors := []*engine.Tensor{logits, seeds, topK, engine.FromInts("sample_counts", engine.I32, []int{rows, vocab}, tt.counts)}
			wantOutputs := 1
			if tt.samples {
				tensors = append(tensors, renamed("samples", out.Samples))
				wantOutputs = 2
			}
			if err := dump.WriteSafetensors(&buf, tensors, map[string]string{"op": "sample"}); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := New(cpu.New()).Execute(context.Background(), Job{DumpPath: path, Backend: NoBackend}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Outputs) != wantOutputs || rep.Outputs[wantOutputs-1].Name != "sample_counts" || rep.Outputs[wantOutputs-1].Kind != "samples" {
				t.Fatalf("outputs %+v, want %d, the last a sample_counts output of kind samples", rep.Outputs, wantOutputs)
			}
			if tt.samples && (rep.Outputs[0].Name != "samples" || !rep.Outputs[0].Pass) {
				t.Errorf("output 0 %s passes %v, want engine/cpu's samples passing", rep.Outputs[0].Name, rep.Outputs[0].Pass)
			}
			o := rep.Outputs[wantOutputs-1]
			var failed []int
			for _, r := range o.Rows {
				if !r.Pass {
					failed = append(failed, r.Row)
				}
				if r.Fit == nil || r.Fit.Draws != draws {
					t.Errorf("row %d: fit %+v, want one of %d draws", r.Row, r.Fit, draws)
				}
			}
			if !slices.Equal(failed, tt.failRows) {
				t.Errorf("failed rows %v, want %v", failed, tt.failRows)
			}
		})
	}
}

// TestFallbackDraws checks that a run that took a counting backend's draws
// default and falls back to the cpu backend (a filter chain the counting
// one does not serve) makes the cpu's default draws, and says so; draws a
// person named stay as named.
func TestFallbackDraws(t *testing.T) {
	const rows, vocab = 2, 50
	tests := []struct {
		name      string
		draws     *int
		wantDraws int
		notice    string
	}{
		{"the counting default", nil, engine.DefaultDraws, "; our output is the cpu backend's, with its default 100000 draws a row"},
		{"named draws", ptr(3000), 3000, "; our output is the cpu backend's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 30))
			x := make([]float32, rows*vocab)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			run := buildRun(t, []*engine.Tensor{engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, x),
				engine.FromInts("seed", engine.I64, []int{rows}, []int64{3, 4})}, map[string]string{"op": "sample"}, engine.Overrides{Draws: tt.draws})
			o := engine.Overrides{Draws: tt.draws}
			rep, err := New(countingBackend{name: "cuda"}, cpu.New()).Execute(context.Background(), Job{Run: run, Backend: "cuda", Overrides: o}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(rep.Notices, " | "); !strings.HasSuffix(got, tt.notice) {
				t.Errorf("notices %q, want one ending %q", got, tt.notice)
			}
			if r := rep.Outputs[0].Rows[0]; r.Fit == nil || r.Fit.Draws != tt.wantDraws {
				t.Errorf("row 0 fit %+v, want one of %d draws", r.Fit, tt.wantDraws)
			}
		})
	}
}

// TestFallbackWithinBudget checks that a sample run admitted for a counting
// backend's outputs (V counts a row) is not run on the backend it falls
// back to when that backend's draws (N a row) need more memory than the
// session allows: the run is refused over budget, naming the backend; within
// the budget it falls back as before.
func TestFallbackWithinBudget(t *testing.T) {
	const rows, vocab = 20, 50
	tests := []struct {
		name  string
		draws *int
		// slack is the memory allowed beyond what the counting backend
		// needs.
		slack      int64
		overBudget bool
	}{
		{"the cpu's default draws over budget", nil, 1 << 20, true},
		{"named draws over budget", ptr(engine.MaxKeptDraws), 1 << 20, true},
		{"within budget", ptr(1000), 1 << 20, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 70))
			x := make([]float32, rows*vocab)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			seeds := make([]int64, rows)
			for i := range seeds {
				seeds[i] = int64(i + 1)
			}
			o := engine.Overrides{Draws: tt.draws}
			run := buildRun(t, []*engine.Tensor{engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, x),
				engine.FromInts("seed", engine.I64, []int{rows}, seeds)}, map[string]string{"op": "sample"}, o)
			counting := countingBackend{name: "cuda"}
			probe := *run
			probe.SetWorkDefaults(o)
			probe.SetBackendDefaults(o, counting)
			s := New(counting, cpu.New())
			s.Workers = 1
			s.MaxMemory = need(&probe, nil, counting, s.workers(), false).Total + tt.slack
			rep, err := s.Execute(context.Background(), Job{Run: run, Backend: "cuda", Overrides: o}, nil)
			if !tt.overBudget {
				if err != nil {
					t.Fatal(err)
				}
				if rep.Device == nil || rep.Device.Backend != "cpu" {
					t.Errorf("ran on %+v, want the cpu backend", rep.Device)
				}
				return
			}
			var ie *InputError
			if !errors.As(err, &ie) || !ie.OverBudget || !strings.Contains(ie.Msg, "the cpu backend") {
				t.Fatalf("error %v, want an over-budget input error naming the cpu backend", err)
			}
			if testing.Verbose() {
				t.Log(ie.Msg)
			}
		})
	}
}

// TestAdmitDrawsForBackend checks that draws the job's backend cannot make
// are refused when the job is admitted, in one sentence naming the file,
// the parameter and the bound, as the parameter's range refused them
// before the bound rose to the counted draws: the cpu backend and kept
// draws make at most MaxKeptDraws a row, counted draws MaxDraws.
func TestAdmitDrawsForBackend(t *testing.T) {
	const rows, vocab = 2, 50
	tests := []struct {
		name  string
		b     engine.Backend
		draws int
		keep  bool
		want  string // "" for admitted
	}{
		{"cpu within its draws", cpu.New(), engine.MaxKeptDraws, false, ""},
		{"cpu past its draws", cpu.New(), engine.MaxKeptDraws + 1, false, "t.safetensors: draws 1000001 is more than the 1000000 a row the cpu backend makes"},
		{"counted past the kept draws", countingBackend{name: "cuda"}, engine.MaxDraws, false, ""},
		{"kept past the kept draws", countingBackend{name: "cuda"}, engine.MaxKeptDraws + 1, true, "t.safetensors: draws 1000001 with keep_draws 1 is more than the 1000000 a row kept one by one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, 20))
			x := make([]float32, rows*vocab)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			path := filepath.Join(t.TempDir(), "t.safetensors")
			var buf bytes.Buffer
			tensors := []*engine.Tensor{engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, x),
				engine.FromInts("seed", engine.I64, []int{rows}, []int64{3, 4})}
			if err := dump.WriteSafetensors(&buf, tensors, map[string]string{"op": "sample"}); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			o := engine.Overrides{Draws: ptr(tt.draws)}
			if tt.keep {
				o.KeepDraws = ptr(1)
			}
			s := New(tt.b)
			_, err := s.Admit(context.Background(), Job{DumpPath: path, FileName: "t.safetensors", Backend: tt.b.Name(), Overrides: o})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Admit: %v, want it admitted", err)
				}
				return
			}
			var ie *InputError
			if !errors.As(err, &ie) || ie.OverBudget || !strings.Contains(ie.Msg, tt.want) {
				t.Fatalf("Admit: %v, want an input error saying %q", err, tt.want)
			}
		})
	}
}

// TestAdmitCountedDrawsBound checks that a counted run whose rows × draws
// would outlast the worker's watchdog is refused when the job is admitted,
// in one sentence naming the file, the rows, the draws and the bound, and
// that the bound holds for counted draws only (kept draws have their own).
func TestAdmitCountedDrawsBound(t *testing.T) {
	const vocab = 16
	perRow := engine.MaxCountedDraws / engine.MaxDraws // rows of MaxDraws that fit
	tests := []struct {
		name  string
		rows  int
		draws int
		keep  bool
		want  string // "" for admitted
	}{
		{"at the bound", perRow, engine.MaxDraws, false, ""},
		{"one row past the bound", perRow + 1, engine.MaxDraws, false,
			"t.safetensors: 201 rows of 1000000000 draws are 201000000000 counted draws, more than the 200000000000 a run the cuda backend counts inside its worker's watchdog"},
		{"1400 rows of 10^9", 1400, engine.MaxDraws, false,
			"t.safetensors: 1400 rows of 1000000000 draws are 1400000000000 counted draws, more than the 200000000000"},
		{"many rows of the default", 20000, engine.DefaultCountedDraws, false, ""},
		{"many rows past the default's bound", 20001, engine.DefaultCountedDraws, false,
			"t.safetensors: 20001 rows of 10000000 draws are 200010000000 counted draws"},
		{"kept draws are not counted", 1400, engine.MaxKeptDraws, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeSampleDump(t, tt.rows, vocab)
			o := engine.Overrides{Draws: ptr(tt.draws)}
			if tt.keep {
				o.KeepDraws = ptr(1)
			}
			b := countingBackend{name: "cuda"}
			s := New(b)
			_, err := s.Admit(context.Background(), Job{DumpPath: path, FileName: "t.safetensors", Backend: b.Name(), Overrides: o})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Admit: %v, want it admitted", err)
				}
				return
			}
			var ie *InputError
			if !errors.As(err, &ie) || ie.OverBudget || !strings.Contains(ie.Msg, tt.want) {
				t.Fatalf("Admit: %v, want an input error saying %q", err, tt.want)
			}
		})
	}
}

// writeSampleDump writes a sample dump of rows × vocab fresh random logits
// and a seed a row under t's temporary folder and returns its path.
func writeSampleDump(t *testing.T, rows, vocab int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(rows), 30))
	x := make([]float32, rows*vocab)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	seeds := make([]int64, rows)
	for i := range seeds {
		seeds[i] = rng.Int64()
	}
	var buf bytes.Buffer
	tensors := []*engine.Tensor{engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, x),
		engine.FromInts("seed", engine.I64, []int{rows}, seeds)}
	if err := dump.WriteSafetensors(&buf, tensors, map[string]string{"op": "sample"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFallbackRefusesDrawsItCannotMake checks that a sample run of more
// draws a row than the cpu backend makes, admitted for the counting backend
// whose kernels then refuse it, is refused in one sentence that names the
// cpu backend and its draws limit (drawsFit, as the job's own backend is
// checked), not run there nor answered with the first backend's refusal.
func TestFallbackRefusesDrawsItCannotMake(t *testing.T) {
	const rows, vocab = 2, 50
	draws := engine.MaxKeptDraws + 1
	x := make([]float32, rows*vocab)
	for i := range x {
		x[i] = float32(i%7) / 7
	}
	o := engine.Overrides{Draws: &draws}
	run := buildRun(t, []*engine.Tensor{engine.FromFloat32s("logits", engine.F32, []int{rows, vocab}, x),
		engine.FromInts("seed", engine.I64, []int{rows}, []int64{3, 4})}, map[string]string{"op": "sample"}, o)
	_, err := New(countingBackend{name: "cuda"}, cpu.New()).Execute(context.Background(), Job{Run: run, Backend: "cuda", Overrides: o}, nil)
	var ie *InputError
	if !errors.As(err, &ie) || ie.OverBudget || !strings.Contains(ie.Msg, "on the cpu backend") ||
		!strings.Contains(ie.Msg, fmt.Sprintf("draws %d is more than the %d a row the cpu backend makes", draws, engine.MaxKeptDraws)) {
		t.Fatalf("error %v, want an input error naming the cpu backend's draws limit", err)
	}
}
