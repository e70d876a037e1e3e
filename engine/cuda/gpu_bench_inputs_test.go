package cuda

import (
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
)

// TestGPUBenchInputs benches small cases with BenchCase.Inputs set and
// reads the files back: the shapes of benchInputTensors stacked over the
// result's sets, logits that are the bench's normal fill (finite, mean 0,
// standard deviation 2, a different draw for each set), drafts and tree
// candidates inside the vocabulary, and no path left in the result.
func TestGPUBenchInputs(t *testing.T) {
	b := gpuBackend(t)
	tests := []struct {
		name string
		c    BenchCase
	}{
		{"argmax", BenchCase{Op: engine.OpArgmax, DType: engine.BF16, Rows: 4, Vocab: 32000}},
		{"softmax f32", BenchCase{Op: engine.OpSoftmax, DType: engine.F32, Rows: 2, Vocab: 32000, Temperature: 0.7}},
		{"spec_verify q", BenchCase{Op: engine.OpSpecVerify, DType: engine.BF16, Rows: 2, Vocab: 32000, K: 3, Temperature: 1, DraftProbs: true}},
		{"spec_tree_verify", BenchCase{Op: engine.OpSpecTreeVerify, DType: engine.BF16, Rows: 2, Vocab: 32000, Nodes: 9, TreeTopK: 2, Temperature: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.Iters, c.Warmup = 3, 1
			c.Inputs = filepath.Join(t.TempDir(), "inputs.safetensors")
			r, err := b.Bench(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Case.Inputs != "" {
				t.Errorf("the result carries the inputs path %q", r.Case.Inputs)
			}
			f, err := dump.Open(c.Inputs)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Meta["sets"] != strconv.Itoa(r.Sets) || f.Meta["op"] != string(c.Op) {
				t.Errorf("metadata %v, want op %s and %d sets", f.Meta, c.Op, r.Sets)
			}
			want, err := benchInputTensors(&c)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range want {
				got := f.Tensor(in.name)
				if got == nil {
					t.Fatalf("no tensor %s", in.name)
				}
				if shape := append([]int{r.Sets}, in.shape...); !slices.Equal(got.Shape, shape) {
					t.Errorf("%s: shape %v, want %v", in.name, got.Shape, shape)
				}
				switch in.name {
				case "logits", "target":
					checkNormalSets(t, in.name, got, r.Sets, 2)
				case "drafts":
					checkTokens(t, in.name, got.Data, c.Vocab)
				}
			}
			if c.Op == engine.OpSpecTreeVerify {
				checkTokens(t, "tokens", f.Tensor("tokens").Data, c.Vocab)
			}
		})
	}
}

// checkNormalSets checks that each set of t is a normal draw with standard
// deviation sd and that no two sets are the same.
func checkNormalSets(t *testing.T, name string, ts *engine.Tensor, sets int, sd float64) {
	t.Helper()
	per := ts.NumElements() / sets
	vals := make([]float64, ts.NumElements())
	for i := range vals {
		switch ts.DType {
		case engine.BF16:
			vals[i] = float64(engine.BF16ToF32(binary.LittleEndian.Uint16(ts.Data[2*i:])))
		case engine.F32:
			vals[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(ts.Data[4*i:])))
		}
	}
	for s := range sets {
		var sum, sq float64
		for _, v := range vals[s*per : (s+1)*per] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%s set %d: %v", name, s, v)
			}
			sum += v
			sq += v * v
		}
		mean := sum / float64(per)
		got := math.Sqrt(sq/float64(per) - mean*mean)
		if math.Abs(mean) > 0.05 || math.Abs(got-sd) > 0.05 {
			t.Errorf("%s set %d: mean %.3f, sd %.3f; want a normal fill of sd %g", name, s, mean, got, sd)
		}
		if s > 0 && slices.Equal(vals[(s-1)*per:s*per], vals[s*per:(s+1)*per]) {
			t.Errorf("%s: sets %d and %d are the same", name, s-1, s)
		}
	}
}

// checkTokens checks that every int32 of data is a token of the vocabulary.
func checkTokens(t *testing.T, name string, data []byte, vocab int) {
	t.Helper()
	for i := 0; i+4 <= len(data); i += 4 {
		if v := int32(binary.LittleEndian.Uint32(data[i:])); v < 0 || int(v) >= vocab {
			t.Fatalf("%s[%d] = %d, outside the vocabulary of %d", name, i/4, v, vocab)
		}
	}
}
