package dump

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// The fixtures under testdata/ were written by numpy 1.24 (gen_numpy.py):
// these tests check sampviz reads what numpy really writes, and that
// WriteNPY writes what numpy would.

// fixtureLogits is gen_numpy.py's logits formula.
func fixtureLogits(r, j int) float64 { return (float64(5*r+j) - 4.5) / 4 }

func TestNumpyNPZ(t *testing.T) {
	for _, file := range []string{"numpy_savez.npz", "numpy_savez_compressed.npz"} {
		t.Run(file, func(t *testing.T) {
			f, err := Open(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Load("logits", "temperature", "top_k", "seed", "tokens", "mask", "ids"); err != nil {
				t.Fatal(err)
			}
			if f.Format != NPZ {
				t.Errorf("format %q, want npz", f.Format)
			}
			if want := map[string]string{"op": "sample", "source": "numpy é"}; f.Meta["op"] != want["op"] || f.Meta["source"] != want["source"] || len(f.Meta) != 2 {
				t.Errorf("meta = %v, want %v", f.Meta, want)
			}
			lg := f.Tensor("logits")
			if lg == nil || lg.DType != engine.F32 || !slices.Equal(lg.Shape, []int{2, 5}) {
				t.Fatalf("logits = %+v", lg)
			}
			for r := range 2 {
				for j := range 5 {
					if got := lg.Float(5*r + j); got != fixtureLogits(r, j) {
						t.Errorf("logits[%d, %d] = %v, want %v", r, j, got, fixtureLogits(r, j))
					}
				}
			}
			checks := []struct {
				name  string
				dtype engine.DType
				shape []int
				want  []float64
			}{
				{"temperature", engine.F32, []int{2}, []float64{0.5, 1.25}},
				{"top_k", engine.I64, []int{2}, []float64{3, 0}},
				{"seed", engine.I64, []int{}, []float64{7}},
				{"tokens", engine.I32, []int{2}, []float64{1, 4}},
				{"mask", engine.Bool, []int{2, 5}, []float64{1, 0, 1, 1, 0, 1, 0, 1, 1, 0}},
				{"ids", engine.U8, []int{3}, []float64{0, 255, 17}},
			}
			for _, c := range checks {
				got := f.Tensor(c.name)
				if got == nil || got.DType != c.dtype || !slices.Equal(got.Shape, c.shape) {
					t.Errorf("%s = %+v, want %s %v", c.name, got, c.dtype, c.shape)
					continue
				}
				for i, w := range c.want {
					if v := got.Float(i); v != w {
						t.Errorf("%s[%d] = %v, want %v", c.name, i, v, w)
					}
				}
			}
			run, err := BuildRun(f, engine.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			if run.Op != engine.OpSample || run.Params.TopK[0] != 3 || run.Params.Seed[1] != 7 || run.Params.Temperature[1] != 1.25 {
				t.Errorf("run: op %s, params %+v", run.Op, run.Params)
			}
			for _, n := range []string{`"mask"`, `"ids"`} {
				if !slices.ContainsFunc(run.Notices, func(s string) bool { return bytes.Contains([]byte(s), []byte(n)) }) {
					t.Errorf("notices %q do not mention %s", run.Notices, n)
				}
			}
		})
	}
}

func TestNumpyNPY(t *testing.T) {
	tests := []struct {
		file  string
		dtype engine.DType
		shape []int
		value func(i int) float64
	}{
		{"numpy_logits_f32.npy", engine.F32, []int{2, 5}, func(i int) float64 { return fixtureLogits(i/5, i%5) }},
		{"numpy_logits_f64.npy", engine.F64, []int{2, 5}, func(i int) float64 { return fixtureLogits(i/5, i%5) }},
		{"numpy_logits_f16_be.npy", engine.F16, []int{2, 5}, func(i int) float64 { return fixtureLogits(i/5, i%5) }},
		{"numpy_logits_i4_be.npy", engine.I32, []int{2, 5}, func(i int) float64 { return float64(i - 3) }},
		{"numpy_scalar_f64.npy", engine.F64, []int{}, func(int) float64 { return 2.75 }},
		{"numpy_vector_i8.npy", engine.I64, []int{3}, func(i int) float64 { return []float64{5, -6, 7}[i] }},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, err := Open(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Load("logits"); err != nil {
				t.Fatal(err)
			}
			lg := f.Tensor("logits")
			if lg == nil || lg.DType != tt.dtype || !slices.Equal(lg.Shape, tt.shape) {
				t.Fatalf("logits = %+v, want %s %v", lg, tt.dtype, tt.shape)
			}
			for i := range lg.NumElements() {
				if got := lg.Float(i); got != tt.value(i) {
					t.Errorf("element %d = %v, want %v", i, got, tt.value(i))
				}
			}
		})
	}
}

func TestNumpyRefused(t *testing.T) {
	tests := []struct {
		file string
		word string
	}{
		{"numpy_fortran.npy", "np.ascontiguousarray"},
		{"numpy_int8.npy", `"|i1"`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := Open(filepath.Join("testdata", tt.file))
			checkError(t, err, tt.file, "logits", tt.word)
		})
	}
}

func TestWriteNPYMatchesNumpy(t *testing.T) {
	tests := []struct {
		file   string
		tensor *engine.Tensor
	}{
		{"numpy_logits_f32.npy", engine.FromFloat64s("logits", engine.F32, []int{2, 5}, []float64{
			fixtureLogits(0, 0), fixtureLogits(0, 1), fixtureLogits(0, 2), fixtureLogits(0, 3), fixtureLogits(0, 4),
			fixtureLogits(1, 0), fixtureLogits(1, 1), fixtureLogits(1, 2), fixtureLogits(1, 3), fixtureLogits(1, 4)})},
		{"numpy_scalar_f64.npy", engine.FromFloat64s("x", engine.F64, nil, []float64{2.75})},
		{"numpy_vector_i8.npy", engine.FromInts("x", engine.I64, []int{3}, []int64{5, -6, 7})},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := npyBytes(t, tt.tensor); !bytes.Equal(got, want) {
				t.Errorf("WriteNPY wrote\n%q\nnumpy wrote\n%q", got, want)
			}
		})
	}
}
