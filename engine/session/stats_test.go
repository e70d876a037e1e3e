package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/engine/ref"
)

// specDump writes a spec_verify dump of rows rows, k draft positions and v
// tokens with fresh random target logits and drafts, with draft
// probabilities unless oneHot; row nanRow (when >= 0) has a NaN target
// logit at its last draft position.
func specDump(t testing.TB, rows, k, v int, oneHot bool, nanRow int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	target := make([]float32, rows*(k+1)*v)
	for i := range target {
		target[i] = float32(rng.NormFloat64() * 2)
	}
	if nanRow >= 0 {
		target[(nanRow*(k+1)+k-1)*v+rng.IntN(v)] = float32(math.NaN())
	}
	drafts := make([]int64, rows*k)
	for i := range drafts {
		drafts[i] = int64(rng.IntN(v))
	}
	temps := make([]float64, rows)
	for r := range temps {
		temps[r] = 0.7 + 0.6*rng.Float64()
	}
	tensors := []*engine.Tensor{
		engine.FromFloat32s("target_logits", engine.F32, []int{rows, k + 1, v}, target),
		engine.FromInts("draft_tokens", engine.I64, []int{rows, k}, drafts),
		engine.FromFloat64s("temperature", engine.F32, []int{rows}, temps),
		engine.FromInts("seed", engine.I64, []int{}, []int64{int64(rng.Uint32())}),
	}
	if !oneHot {
		q := make([]float32, rows*k*v)
		for i := 0; i < rows*k; i++ {
			sum := 0.0
			w := make([]float64, v)
			for j := range w {
				w[j] = math.Exp(2 * rng.NormFloat64())
				sum += w[j]
			}
			for j := range w {
				q[i*v+j] = float32(w[j] / sum)
			}
		}
		tensors = append(tensors, engine.FromFloat32s("draft_probs", engine.F32, []int{rows, k, v}, q))
	}
	return writeDump(t, "spec.safetensors", tensors, map[string]string{"op": "spec_verify"})
}

// sampleDump writes a sample dump with fresh random logits and, when
// external > 0, external samples that the CPU backend drew with another
// seed, with token bad (which the reference gives no mass) planted in row 0.
func sampleDump(t testing.TB, rows, v, external int, bad int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	logits := make([]float32, rows*v)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2)
	}
	if bad >= 0 {
		logits[bad] = float32(math.Inf(-1)) // masked: no reference mass in row 0
	}
	tensors := []*engine.Tensor{engine.FromFloat32s("logits", engine.F32, []int{rows, v}, logits)}
	meta := map[string]string{"op": "sample"}
	if external > 0 {
		run := buildRun(t, tensors, meta, engine.Overrides{Draws: &external, Seed: ptr(uint64(rng.Uint32()))})
		out, err := cpu.New().Run(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		samples := &engine.Tensor{Name: "samples", DType: out.Samples.DType, Shape: out.Samples.Shape, Data: append([]byte(nil), out.Samples.Data...)}
		if bad >= 0 {
			samples.SetInt(rng.IntN(external), int64(bad))
		}
		tensors = append(tensors, samples)
	}
	return writeDump(t, "sample.safetensors", tensors, meta)
}

func ptr[T any](v T) *T { return &v }

func buildRun(t testing.TB, tensors []*engine.Tensor, meta map[string]string, o engine.Overrides) *engine.Run {
	t.Helper()
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	f, err := dump.Parse("t.safetensors", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	run, err := dump.BuildRun(f, o)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func execute(t *testing.T, path string, p engine.Overrides) Job {
	t.Helper()
	job := Job{DumpPath: path, FileName: filepath.Base(path), OutputsPath: filepath.Join(t.TempDir(), "outputs.safetensors"), Backend: "cpu", Overrides: p}
	if _, err := New(cpu.New()).Execute(context.Background(), job, &recorder{}); err != nil {
		t.Fatal(err)
	}
	return job
}

func TestSpecRowTrace(t *testing.T) {
	tests := []struct {
		name   string
		oneHot bool
		trials int
	}{
		{"draft probs, many trials", false, 40},
		{"one-hot drafts, one trial", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, k, v := 3+rand.IntN(4), 2+rand.IntN(4), 50+rand.IntN(200)
			path := specDump(t, rows, k, v, tt.oneHot, -1)
			job := execute(t, path, engine.Overrides{Trials: &tt.trials})
			r := rand.IntN(rows)
			d, err := New(cpu.New()).Row(context.Background(), job, r, 10)
			if err != nil {
				t.Fatal(err)
			}
			sd := d.Spec
			if sd == nil || sd.K != k || len(sd.Positions) != k+1 || len(sd.Accept) != k || len(sd.Emitted) != k+1 || sd.OneHot != tt.oneHot {
				t.Fatalf("spec detail = %+v", sd)
			}
			tr := sd.Trace
			wantTrials := min(max(tt.trials, 1), 16)
			if tr == nil || tr.Trials != wantTrials || tr.Steps != k+1 || len(tr.Step) != wantTrials {
				t.Fatalf("trace = %+v, want %d trials of %d steps", tr, wantTrials, k+1)
			}
			// The stored trace is what the backend traces: run it again.
			run := buildRunFromFile(t, path, engine.Overrides{Trials: &tt.trials})
			out, err := cpu.New().Run(context.Background(), run)
			if err != nil {
				t.Fatal(err)
			}
			for tri := range wantTrials {
				for i := 0; i <= k; i++ {
					if got, want := tr.Step[tri][i], *out.Trace.At(tri, r, i); got != want {
						t.Fatalf("trial %d step %d = %+v, want %+v", tri, i, got, want)
					}
				}
			}
			// Every position lists its draft and every token resampled there,
			// with p from the reference.
			s := ref.SpecVerify(run, r, ref.BoundaryEps(1.3e-6))
			for i, pos := range sd.Positions {
				listed := map[int]explain.SpecToken{}
				for _, tk := range pos.Tokens {
					listed[tk.Token] = tk
				}
				for tri := range wantTrials {
					if x := tr.Step[tri][i].Resampled; x >= 0 {
						if _, ok := listed[int(x)]; !ok {
							t.Errorf("position %d does not list token %d resampled in trial %d", i, x, tri)
						}
					}
				}
				if i < k {
					tk, ok := listed[int(sd.Drafts[i])]
					if !ok {
						t.Fatalf("position %d does not list its draft %d", i, sd.Drafts[i])
					}
					if float64(tk.P) != s.Target[i].Probs[tk.Token] {
						t.Errorf("position %d: p(draft) = %g, reference %g", i, tk.P, s.Target[i].Probs[tk.Token])
					}
					if tt.oneHot && tk.Q != 1 {
						t.Errorf("one-hot draft has q = %g", tk.Q)
					}
				}
			}
			if _, err := json.Marshal(d); err != nil {
				t.Errorf("row detail does not marshal: %v", err)
			}
		})
	}
}

func buildRunFromFile(t *testing.T, path string, p engine.Overrides) *engine.Run {
	t.Helper()
	run, f, err := dump.Load(path, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return run
}

func TestSpecRowWithoutDistribution(t *testing.T) {
	rows, k, v := 3, 3, 64
	nan := rand.IntN(rows)
	path := specDump(t, rows, k, v, false, nan)
	job := execute(t, path, engine.Overrides{Trials: ptr(20)})
	d, err := New(cpu.New()).Row(context.Background(), job, nan, 10)
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec == nil || d.Spec.Invalid == "" || d.Spec.Positions[k-1].Invalid == "" {
		t.Fatalf("a NaN target gives spec detail %+v", d.Spec)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("row detail with NaN does not marshal: %v", err)
	}
	var back explain.RowDetail
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
}

func TestSampleRowHistogram(t *testing.T) {
	rows, v := 2+rand.IntN(3), 30+rand.IntN(100)
	const draws, external = 3000, 2000
	bad := rand.IntN(v)
	path := sampleDump(t, rows, v, external, bad)
	job := execute(t, path, engine.Overrides{Draws: ptr(draws)})
	d, err := New(cpu.New()).Row(context.Background(), job, 0, 12)
	if err != nil {
		t.Fatal(err)
	}
	sd := d.Samples
	if sd == nil || len(sd.Outputs) != 2 || sd.Draws[0] != draws || sd.Draws[1] != external || sd.Outputs[0].External || !sd.Outputs[1].External {
		t.Fatalf("samples = %+v", sd)
	}
	for o, n := range sd.Draws {
		got := sd.Other.Observed[o] + sd.OutOfRange[o]
		for _, tk := range sd.Tokens {
			got += tk.Observed[o]
		}
		if got != int64(n) {
			t.Errorf("output %d: %d draws counted, want %d", o, got, n)
		}
	}
	mass, zero := float64(sd.Other.Ref), 0
	for i, tk := range sd.Tokens {
		mass += float64(tk.Ref)
		if tk.Ref == 0 {
			zero++
			if tk.Token != bad || tk.Observed[1] != 1 || tk.Observed[0] != 0 || tk.Class != "dropped" {
				t.Errorf("zero-mass bin %+v, want token %d drawn once by the dump only", tk, bad)
			}
		} else if i > 0 && tk.Ref > sd.Tokens[i-1].Ref {
			t.Errorf("bins out of order at %d", i)
		}
	}
	if zero != 1 || math.Abs(mass-1) > 1e-9 {
		t.Errorf("%d zero-mass bins, total mass %g", zero, mass)
	}
}

func TestTeach(t *testing.T) {
	rows, k, v := 2, 3, 40+rand.IntN(100)
	path := specDump(t, rows, k, v, false, -1)
	oneHot := specDump(t, rows, k, v, true, -1)
	softmax := testDump(t, engine.OpSoftmax, 2, 20, nil)
	p := New(cpu.New())
	job := func(path string) Job {
		return Job{DumpPath: path, FileName: filepath.Base(path), Backend: "cpu"}
	}
	seed := rand.Uint64()
	tests := []struct {
		name   string
		path   string
		lesson lesson.Lesson
		bad    bool
		check  func(t *testing.T, st *lesson.State)
	}{
		{"the row's own draft converges to p", path, lesson.Lesson{Position: 1, Distance: 1, Seed: &seed, Steps: 20000}, false, func(t *testing.T, st *lesson.State) {
			last := st.Running[len(st.Running)-1]
			// A correct sampler's TV after n draws over b bars is about
			// sqrt(b/(2πn)); 3x that is far.
			bars := len(st.Tokens) + 1
			if bound := 3 * math.Sqrt(float64(bars)/(2*math.Pi*float64(st.Steps))); float64(last.Emitted) > bound {
				t.Errorf("emitted TV %g after %d steps, want under %g", last.Emitted, st.Steps, bound)
			}
			if d := math.Abs(float64(last.Drafts - st.TVBars)); d > 3*math.Sqrt(float64(bars)/(2*math.Pi*float64(st.Steps))) {
				t.Errorf("drafts' TV %g, TV(p, q) over the bars %g", last.Drafts, st.TVBars)
			}
			if st.TVBars > st.TV+1e-9 {
				t.Errorf("TV over the bars %g above the full TV %g", st.TVBars, st.TV)
			}
			if float64(st.Accepted)/float64(st.Steps) < float64(st.Beta)-0.03 || float64(st.Accepted)/float64(st.Steps) > float64(st.Beta)+0.03 {
				t.Errorf("accepted %d of %d, beta %g", st.Accepted, st.Steps, st.Beta)
			}
		}},
		{"distance 0 accepts every draft", path, lesson.Lesson{Position: 0, Distance: 0, Seed: &seed, Steps: 500}, false, func(t *testing.T, st *lesson.State) {
			if st.Accepted != st.Steps || st.Beta != 1 || st.TV != 0 {
				t.Errorf("accepted %d of %d, beta %g, TV %g", st.Accepted, st.Steps, st.Beta, st.TV)
			}
		}},
		{"one-hot drafts", oneHot, lesson.Lesson{Position: 2, Distance: 1, Temperature: ptr(0.5), TopK: ptr(5), Seed: &seed, Steps: 300}, false, func(t *testing.T, st *lesson.State) {
			if !st.OneHot || st.Temperature != 0.5 || st.TopK != 5 {
				t.Errorf("state %+v", st)
			}
			for _, s := range st.Last {
				if s.Draft != st.Draft || s.Q != 1 {
					t.Errorf("one-hot step %+v, want draft %d with q 1", s, st.Draft)
				}
			}
			kept := 0
			for _, tk := range st.Tokens {
				if tk.P > 0 {
					kept++
				}
			}
			if kept > 5 || st.Other.P > 1e-6 {
				t.Errorf("top-k 5 keeps %d listed tokens and %g elsewhere", kept, st.Other.P)
			}
		}},
		{"no steps", path, lesson.Lesson{Position: 0, Distance: 0.5, Steps: 0}, false, func(t *testing.T, st *lesson.State) {
			if st.Accepted+st.Resampled != 0 || len(st.Last) != 0 || len(st.Running) != 0 || len(st.Tokens) == 0 {
				t.Errorf("state %+v", st)
			}
		}},
		{"position out of range", path, lesson.Lesson{Position: k, Distance: 1}, true, nil},
		{"distance out of range", path, lesson.Lesson{Distance: 1.5}, true, nil},
		{"not spec_verify", softmax, lesson.Lesson{Distance: 1}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := p.Teach(context.Background(), job(tt.path), 1, tt.lesson)
			var le *lesson.Error
			if tt.bad {
				if !errors.As(err, &le) || le.Msg == "" {
					t.Fatalf("err = %v, want a *lesson.Error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Invalid != "" {
				t.Fatal(st.Invalid)
			}
			// Counts agree with the steps, token by token and in total.
			acc, res, dr := st.Other.Accepted, st.Other.Resampled, st.Other.Drafted
			for _, tk := range st.Tokens {
				acc, res, dr = acc+tk.Accepted, res+tk.Resampled, dr+tk.Drafted
			}
			if acc != st.Accepted || res != st.Resampled || dr != st.Steps || st.Accepted+st.Resampled != st.Steps {
				t.Errorf("counts: accepted %d/%d, resampled %d/%d, drafted %d, steps %d", acc, st.Accepted, res, st.Resampled, dr, st.Steps)
			}
			if len(st.Last) != min(st.Steps, lesson.LastSteps) {
				t.Errorf("%d last steps", len(st.Last))
			}
			for _, s := range st.Last {
				if s.Accepted != (float32(float32(s.U)*float32(s.Q)) < float32(s.P)) || s.Accepted && s.Token != s.Draft {
					t.Errorf("step %+v breaks the acceptance rule", s)
				}
			}
			// The same lesson gives the same steps.
			again, err := p.Teach(context.Background(), job(tt.path), 1, tt.lesson)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(st, again) {
				t.Error("the same lesson gave different steps")
			}
			if _, err := json.Marshal(st); err != nil {
				t.Error(err)
			}
			if tt.check != nil {
				tt.check(t, st)
			}
		})
	}
}

// writeDump writes tensors and meta as a safetensors dump called name in a
// fresh temporary folder of t and returns its path.
func writeDump(t testing.TB, name string, tensors []*engine.Tensor, meta map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
