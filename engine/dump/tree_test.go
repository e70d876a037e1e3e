package dump

import (
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// treeTensors returns a spec_tree_verify dump of b rows over v tokens on
// the links next and sibling (every row the same), candidates 1, 2, ...
func treeTensors(m dumpMaker, next, sibling []int64) []*engine.Tensor {
	n := len(next)
	var nx, sb, cand []int64
	for range m.b {
		nx, sb = append(nx, next...), append(sb, sibling...)
		for i := range n {
			cand = append(cand, int64(i%m.v))
		}
	}
	return []*engine.Tensor{
		randomTensor(m.rng, "target_logits", engine.F32, m.b, n, m.v),
		engine.FromInts("candidates", engine.I64, []int{m.b, n}, cand),
		engine.FromInts("retrive_next_token", engine.I32, []int{m.b, n}, nx),
		engine.FromInts("retrive_next_sibling", engine.I32, []int{m.b, n}, sb),
	}
}

// TestTreeDumps reads a good tree, and refuses every tree that breaks the
// layout with one sentence naming the tensor, the row and the node.
func TestTreeDumps(t *testing.T) {
	m := newMaker(t)
	good := treeTensors(m, []int64{1, 3, -1, -1}, []int64{-1, 2, -1, -1})
	run, err := BuildRun(fileOf(nil, good...), engine.Overrides{})
	if err != nil {
		t.Fatalf("a good tree: %v", err)
	}
	if run.Op != engine.OpSpecTreeVerify || run.Nodes() != 4 {
		t.Fatalf("op %s with %d nodes, want spec_tree_verify with 4", run.Op, run.Nodes())
	}
	last := m.b - 1
	setAt := func(ts []*engine.Tensor, name string, node int, v int64) []*engine.Tensor {
		for _, t := range ts {
			if t.Name == name {
				t.SetInt(last*t.Dim(1)+node, v)
			}
		}
		return ts
	}
	tree := func() []*engine.Tensor { return treeTensors(m, []int64{1, 3, -1, -1}, []int64{-1, 2, -1, -1}) }
	tests := []struct {
		name    string
		tensors []*engine.Tensor
		tensor  string
		words   []string
	}{
		{"a cycle of siblings", setAt(tree(), "retrive_next_sibling", 2, 1), "retrive_next_sibling", []string{"row", "node 2 links to node 1", "a cycle, or a second parent"}},
		{"a sibling outside the row", setAt(tree(), "retrive_next_sibling", 1, 9), "retrive_next_sibling", []string{"node 1 links to 9, outside the row's nodes [0, 4)"}},
		{"a child before its parent", setAt(tree(), "retrive_next_token", 2, 1), "retrive_next_token", []string{"node 2 has the first child 1, which does not come after node 2"}},
		{"the root with a sibling", setAt(tree(), "retrive_next_sibling", 0, 2), "retrive_next_sibling", []string{"node 0 (the root) has the sibling 2"}},
		{"a candidate outside the vocabulary", setAt(tree(), "candidates", 3, int64(m.v)), "candidates", []string{"node 3 holds token", "outside the vocabulary"}},
		{"node counts that disagree", append(tree()[:3], engine.FromInts("retrive_next_sibling", engine.I32, []int{m.b, 5}, make([]int64, 5*m.b))), "retrive_next_sibling", []string{"does not fit target_logits"}},
		{"too many nodes", treeTensors(m, make([]int64, engine.MaxTreeNodes+1), make([]int64, engine.MaxTreeNodes+1)), "target_logits", []string{"1025 nodes a row, over the 1024"}},
		{"links without target logits", tree()[1:], "target_logits", []string{"not found; spec_tree_verify needs it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BuildRun(fileOf(nil, tt.tensors...), engine.Overrides{})
			checkError(t, err, "dump.safetensors", tt.tensor, tt.words...)
		})
	}
}
