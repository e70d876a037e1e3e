package view

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/lesson"
)

// sampleLesson draws row 0 of a random filtered sample row with method.
func sampleLesson(t *testing.T, method engine.SampleMethod, draw int) *lesson.SampleState {
	t.Helper()
	v := 500 + rand.IntN(500)
	x := make([]float32, v)
	for i := range x {
		x[i] = float32(3 * rand.NormFloat64())
	}
	run := &engine.Run{Source: "t", Op: engine.OpSample, Logits: engine.FromFloat32s("logits", engine.F32, []int{1, v}, x),
		Params: engine.Params{Temperature: []float64{0.9}, TopK: []int{5}, TopP: []float64{0.95}, MinP: []float64{0}, Seed: []uint64{rand.Uint64()}, Offset: []uint64{0}}}
	st, err := lesson.TeachSample(context.Background(), run, 0, lesson.SampleLesson{Method: method, Draw: draw})
	if err != nil || st.Invalid != "" {
		t.Fatalf("%v %+v", err, st)
	}
	return st
}

func TestSampleTeachViewSteps(t *testing.T) {
	for _, m := range SampleMethods {
		t.Run(string(m), func(t *testing.T) {
			st := sampleLesson(t, m, rand.IntN(100))
			v := NewSampleTeachView(st, 99, func(i int) string { return fmt.Sprintf("/teach?step=%d", i+1) })
			want := map[engine.SampleMethod]int{engine.SampleRejection: 2 + len(st.Rounds), engine.SampleGumbel: 5, engine.SampleInverseCDF: 4}[m]
			if v.Total != want || len(v.Items) != want || v.Index != want-1 {
				t.Fatalf("%d steps (index %d), want %d", v.Total, v.Index, want)
			}
			for i, it := range v.Items {
				if it.Step != i+1 || it.URL != fmt.Sprintf("/teach?step=%d", i+1) || !strings.HasPrefix(it.Title, fmt.Sprintf("Step %d of %d: ", i+1, want)) ||
					it.What == "" || it.Chart == nil || it.Marks == nil || it.Rows > len(v.Table) {
					t.Errorf("step %d: %+v", i+1, it)
				}
			}
			if len(v.Classes) != len(v.Table) {
				t.Errorf("%d row classes for %d rows", len(v.Classes), len(v.Table))
			}
			for _, row := range v.Table {
				if len(row) != len(v.Header) {
					t.Errorf("a row of %d cells under %d columns", len(row), len(v.Header))
				}
			}
			if !strings.Contains(v.Items[len(v.Items)-1].What, fmt.Sprintf("The draw emits token %d", st.Token)) || len(v.Why) < 2 || v.Intro == "" {
				t.Errorf("last step %q, %d paragraphs of why", v.Items[len(v.Items)-1].What, len(v.Why))
			}
			if v0 := NewSampleTeachView(st, -3, func(int) string { return "" }); v0.Index != 0 {
				t.Errorf("index -3 shows step %d", v0.Index)
			}
		})
	}
}

// The kernel sentence says whether our kernel's stored draw is the
// lesson's, or why there is none to compare with.
func TestSampleTeachKernelWords(t *testing.T) {
	st := sampleLesson(t, engine.SampleRejection, 0)
	tests := []struct {
		name   string
		change func(s *lesson.SampleState)
		match  string
		want   string
	}{
		{"the same token", func(s *lesson.SampleState) {
			s.RunMethod = engine.SampleRejection
			s.Kernel = &lesson.KernelDraw{Token: s.Token, Output: "tokens", Backend: "cuda"}
		}, "same", "Our cuda kernel made this same draw"},
		{"another token", func(s *lesson.SampleState) {
			s.Kernel = &lesson.KernelDraw{Token: s.Token + 1, Output: "tokens", Backend: "cuda"}
		}, "differs", "the kernel and its specification disagree"},
		{"another seed", func(s *lesson.SampleState) { s.RowSeed = s.Seed + 1 }, "none", "not " + fmt.Sprint(st.Seed)},
		{"another method", func(s *lesson.SampleState) { s.RunMethod = engine.SampleInverseCDF }, "none", "rerun it with method rejection"},
		{"not stored yet", func(s *lesson.SampleState) { s.RunMethod = engine.SampleRejection }, "none", "have not stored their outputs yet"},
		{"no many draws", func(s *lesson.SampleState) { s.RunMethod, s.Draw = engine.SampleRejection, 3 }, "none", "no many-draws samples"},
		{"counted draws", func(s *lesson.SampleState) {
			s.RunMethod, s.Draw, s.RunDraws, s.RunCounted = engine.SampleRejection, 3, 10_000_000, true
		}, "none", "counted its 10000000 draws a row per token on the device and kept no single draw (keep_draws 1 keeps them), so it has no draw 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := *st
			tt.change(&s)
			words, match := kernelWords(&s, nil)
			if match != tt.match || !strings.Contains(words, tt.want) || !strings.HasSuffix(words, ".") {
				t.Errorf("%s %q, want %s with %q", match, words, tt.match, tt.want)
			}
			if match == "none" && !strings.Contains(words, "cpu.SampleRejection") {
				t.Errorf("%q does not name the twin", words)
			}
		})
	}
}
