package cuda

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
)

// TestBenchInputsFile writes each peer op's inputs file from fake device
// sets and reads it back: every tensor stacked over the sets with the
// set's bytes in order, the tree's links and candidates for
// spec_tree_verify, the metadata; ngram_match has none.
func TestBenchInputsFile(t *testing.T) {
	tests := []struct {
		name    string
		c       BenchCase
		sets    int
		want    map[string][]int // tensor name: shape
		wantErr bool
	}{
		{"argmax", BenchCase{Op: engine.OpArgmax, DType: engine.BF16, Rows: 3, Vocab: 7}, 4,
			map[string][]int{"logits": {4, 3, 7}}, false},
		{"softmax f32", BenchCase{Op: engine.OpSoftmax, DType: engine.F32, Rows: 2, Vocab: 5}, 2,
			map[string][]int{"logits": {2, 2, 5}}, false},
		{"spec_verify one-hot", BenchCase{Op: engine.OpSpecVerify, DType: engine.BF16, Rows: 2, Vocab: 9, K: 3}, 3,
			map[string][]int{"target": {3, 2, 4, 9}, "drafts": {3, 2, 3}}, false},
		{"spec_verify q", BenchCase{Op: engine.OpSpecVerify, DType: engine.BF16, Rows: 2, Vocab: 9, K: 3, DraftProbs: true}, 1,
			map[string][]int{"target": {1, 2, 4, 9}, "drafts": {1, 2, 3}, "qprobs": {1, 2, 3, 9}}, false},
		{"spec_tree_verify q", BenchCase{Op: engine.OpSpecTreeVerify, DType: engine.BF16, Rows: 2, Vocab: 6, Nodes: 5, TreeTopK: 2, DraftProbs: true}, 2,
			map[string][]int{"target": {2, 2, 5, 6}, "qprobs": {2, 2, 5, 6}, "first_child": {5}, "next_sibling": {5}, "tokens": {2, 5}}, false},
		{"ngram_match", BenchCase{Op: engine.OpNgramMatch, DType: engine.F32, Rows: 1, PromptLen: 8, GenLen: 4}, 1, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
			setData := map[string][][]byte{}
			read := func(name string, set int, n int64) ([]byte, error) {
				for len(setData[name]) <= set {
					b := make([]byte, n)
					for i := range b {
						b[i] = byte(rng.Uint32())
					}
					setData[name] = append(setData[name], b)
				}
				return setData[name][set], nil
			}
			var tokens []int32
			var next, sibling []int64
			if tc.c.Op == engine.OpSpecTreeVerify {
				next, sibling = benchTree(tc.c.Nodes, tc.c.TreeTopK)
				for range tc.c.Rows * tc.c.Nodes {
					tokens = append(tokens, int32(rng.IntN(tc.c.Vocab)))
				}
			}
			tensors, meta, err := benchInputsFile(&tc.c, tc.sets, read, tokens, next, sibling)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error for an op without a peer")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
				t.Fatal(err)
			}
			f, err := dump.Parse("inputs.safetensors", buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if f.Meta["op"] != string(tc.c.Op) || f.Meta["sets"] != string(rune('0'+tc.sets)) {
				t.Errorf("metadata %v, want op %s and %d sets", f.Meta, tc.c.Op, tc.sets)
			}
			if len(f.Tensors) != len(tc.want) {
				t.Errorf("%d tensors, want %d", len(f.Tensors), len(tc.want))
			}
			for name, shape := range tc.want {
				got := f.Tensor(name)
				if got == nil {
					t.Errorf("no tensor %s", name)
					continue
				}
				if !slices.Equal(got.Shape, shape) {
					t.Errorf("%s: shape %v, want %v", name, got.Shape, shape)
				}
				if sets, ok := setData[name]; ok {
					if want := bytes.Join(sets, nil); !bytes.Equal(got.Data, want) {
						t.Errorf("%s: the sets' bytes are not stacked in order", name)
					}
				}
			}
			if tc.c.Op == engine.OpSpecTreeVerify {
				fc := f.Tensor("first_child").Data
				for i, want := range next {
					if got := int32(binary.LittleEndian.Uint32(fc[4*i:])); int64(got) != want {
						t.Errorf("first_child[%d] = %d, want %d", i, got, want)
					}
				}
				tk := f.Tensor("tokens").Data
				for i, want := range tokens {
					if got := int32(binary.LittleEndian.Uint32(tk[4*i:])); got != want {
						t.Errorf("tokens[%d] = %d, want %d", i, got, want)
					}
				}
			}
		})
	}
}
