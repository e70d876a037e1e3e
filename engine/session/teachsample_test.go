package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/lesson"
	"github.com/sampviz/sampviz/scenarios"
)

// The sampler lesson of a judged sample run ends on our kernels' stored
// draw: draw 0 of the run's method is its token, draw d of the inverse
// CDF its sample d; another method or seed has no stored draw to show.
func TestTeachSampleKernelDraw(t *testing.T) {
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
	draws := 16
	for _, method := range []engine.SampleMethod{engine.SampleInverseCDF, engine.SampleRejection, engine.SampleGumbel} {
		t.Run(string(method), func(t *testing.T) {
			m := method
			job := Job{DumpPath: path, FileName: "seeded.safetensors", OutputsPath: filepath.Join(t.TempDir(), "o.safetensors"), Backend: "cpu",
				Overrides: engine.Overrides{Draws: &draws, Method: &m}}
			// Before the kernels have run there is nothing to compare with.
			st, err := p.TeachSample(context.Background(), job, 2, lesson.SampleLesson{})
			if err != nil {
				t.Fatal(err)
			}
			if st.Kernel != nil || st.Method != method || st.Invalid != "" {
				t.Fatalf("before the run: kernel %+v, method %s, invalid %q", st.Kernel, st.Method, st.Invalid)
			}
			if _, err := p.Execute(context.Background(), job, &recorder{}); err != nil {
				t.Fatal(err)
			}
			for r := range 4 {
				st, err := p.TeachSample(context.Background(), job, r, lesson.SampleLesson{})
				if err != nil {
					t.Fatal(err)
				}
				if st.Kernel == nil || st.Kernel.Output != "tokens" || st.Kernel.Token != st.Token {
					t.Errorf("row %d: the lesson emits %d, the kernel's stored draw is %+v", r, st.Token, st.Kernel)
				}
				for _, d := range []int{1, draws - 1} {
					st, err := p.TeachSample(context.Background(), job, r, lesson.SampleLesson{Method: engine.SampleInverseCDF, Draw: d})
					if err != nil {
						t.Fatal(err)
					}
					if st.Kernel == nil || st.Kernel.Output != "samples" || st.Kernel.Token != st.Token {
						t.Errorf("row %d draw %d: the lesson emits %d, the kernel's stored sample is %+v", r, d, st.Token, st.Kernel)
					}
				}
			}
			other := engine.SampleGumbel
			if method == engine.SampleGumbel {
				other = engine.SampleRejection
			}
			seed := uint64(99)
			for _, l := range []lesson.SampleLesson{{Method: other}, {Seed: &seed}, {Draw: draws}} {
				st, err := p.TeachSample(context.Background(), job, 2, l)
				if err != nil {
					t.Fatal(err)
				}
				if st.Kernel != nil {
					t.Errorf("lesson %+v: a stored draw %+v where the kernels made none", l, st.Kernel)
				}
			}
			_, err = p.TeachSample(context.Background(), job, 4, lesson.SampleLesson{})
			var le *lesson.Error
			if !errors.As(err, &le) {
				t.Errorf("row 4 of 4: %v, want a *lesson.Error", err)
			}
		})
	}
}
