package dump

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

var allDTypes = []engine.DType{engine.BF16, engine.F16, engine.F32, engine.F64, engine.I32, engine.I64, engine.U8, engine.Bool}

func TestRoundTrip(t *testing.T) {
	rng := newRand(t)
	meta := map[string]string{"op": "sample", "source": "round trip: ünïcode & <html>", "threshold": "17"}
	formats := []struct {
		name  string
		file  string
		write func(testing.TB, map[string]string, ...*engine.Tensor) []byte
		bf16  bool
	}{
		{"safetensors", "dump.safetensors", safetensorsBytes, true},
		{"npz", "dump.npz", npzBytes, false},
	}
	for _, format := range formats {
		for _, dtype := range allDTypes {
			if dtype == engine.BF16 && !format.bf16 {
				continue
			}
			t.Run(format.name+"/"+dtype.String(), func(t *testing.T) {
				tensors := []*engine.Tensor{
					randomTensor(rng, "matrix", dtype, 3, 1+rng.IntN(40)),
					randomTensor(rng, "scalar", dtype),
					randomTensor(rng, "vector", dtype, 1+rng.IntN(9)),
					randomTensor(rng, "cube", dtype, 2, 3, 1+rng.IntN(5)),
					randomTensor(rng, "empty", dtype, 0, 7),
				}
				f, err := Parse(format.file, format.write(t, meta, tensors...))
				if err != nil {
					t.Fatal(err)
				}
				if !maps.Equal(f.Meta, meta) {
					t.Errorf("meta = %v, want %v", f.Meta, meta)
				}
				if len(f.Tensors) != len(tensors) {
					t.Fatalf("got %d tensors, want %d", len(f.Tensors), len(tensors))
				}
				for i, want := range tensors {
					got := f.Tensors[i]
					if got.Name != want.Name || got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
						t.Errorf("tensor %d = %s %s %s (%d bytes), want %s %s %s (%d bytes)",
							i, got.Name, got.DType, got.ShapeString(), len(got.Data), want.Name, want.DType, want.ShapeString(), len(want.Data))
					}
				}
			})
		}
	}
	for _, dtype := range allDTypes {
		if dtype == engine.BF16 {
			continue
		}
		t.Run("npy/"+dtype.String(), func(t *testing.T) {
			want := randomTensor(rng, "logits", dtype, 1+rng.IntN(4), 1+rng.IntN(70))
			f, err := Parse("dump.npy", npyBytes(t, want))
			if err != nil {
				t.Fatal(err)
			}
			got := f.Tensors[0]
			if f.Format != NPY || len(f.Tensors) != 1 || got.Name != "logits" || got.DType != dtype || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
				t.Errorf("got %s %s %s, want logits %s %s", got.Name, got.DType, got.ShapeString(), dtype, want.ShapeString())
			}
		})
	}
}

func TestWriteSafetensorsLayout(t *testing.T) {
	rng := newRand(t)
	a := randomTensor(rng, "b_second", engine.F32, 2, 3)
	b := randomTensor(rng, "a_first", engine.BF16, 5)
	out := safetensorsBytes(t, map[string]string{"k": "v"}, a, b)
	n := int(out[0]) | int(out[1])<<8
	header := string(out[8 : 8+n])
	want := `{"__metadata__":{"k":"v"},"b_second":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"a_first":{"dtype":"BF16","shape":[5],"data_offsets":[24,34]}}`
	if n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	if got := string(bytes.TrimRight([]byte(header), " ")); got != want {
		t.Errorf("header\n got %s\nwant %s", got, want)
	}
	if !bytes.Equal(out[8+n:], append(append([]byte(nil), a.Data...), b.Data...)) {
		t.Error("data is not the tensors' bytes, contiguous and in order")
	}
}

func TestWritersRefuse(t *testing.T) {
	rng := newRand(t)
	good := randomTensor(rng, "logits", engine.F32, 2, 3)
	short := randomTensor(rng, "logits", engine.F32, 2, 3)
	short.Data = short.Data[:20]
	tests := []struct {
		name    string
		tensors []*engine.Tensor
		npz     bool
		word    string
	}{
		{"nil tensor", []*engine.Tensor{nil}, false, "nil"},
		{"no name", []*engine.Tensor{{DType: engine.F32, Shape: []int{1}, Data: make([]byte, 4)}}, false, "no name"},
		{"reserved name", []*engine.Tensor{{Name: "__metadata__", DType: engine.F32, Shape: []int{1}, Data: make([]byte, 4)}}, false, "reserved"},
		{"duplicate", []*engine.Tensor{good, good}, false, "twice"},
		{"data disagrees with shape", []*engine.Tensor{short}, false, "20 bytes of data"},
		{"invalid dtype", []*engine.Tensor{{Name: "x", Shape: []int{1}, Data: make([]byte, 4)}}, false, "invalid dtype"},
		{"bf16 in npz", []*engine.Tensor{randomTensor(rng, "logits", engine.BF16, 2)}, true, "safetensors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.npz {
				err = WriteNPZ(&bytes.Buffer{}, tt.tensors, nil)
			} else {
				err = WriteSafetensors(&bytes.Buffer{}, tt.tensors, nil)
			}
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tt.word)) {
				t.Errorf("error %v, want one with %q", err, tt.word)
			}
		})
	}
	if err := WriteNPY(&bytes.Buffer{}, randomTensor(rng, "logits", engine.BF16, 2)); err == nil {
		t.Error("WriteNPY wrote a BF16 tensor")
	}
}
