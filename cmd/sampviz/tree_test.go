package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// TestCheckBadTrees checks that `sampviz check` refuses a draft tree that
// breaks the layout with exit status 2 and one sentence naming the
// tensor, the row and the node, and never hangs on a cycle.
func TestCheckBadTrees(t *testing.T) {
	dir := t.TempDir()
	const v = 8
	tree := func(next, sibling, cand []int64) []*engine.Tensor {
		n := len(next)
		return []*engine.Tensor{
			engine.FromFloat64s("target_logits", engine.F32, []int{1, n, v}, make([]float64, n*v)),
			engine.FromInts("candidates", engine.I64, []int{1, n}, cand),
			engine.FromInts("retrive_next_token", engine.I64, []int{1, n}, next),
			engine.FromInts("retrive_next_sibling", engine.I64, []int{1, n}, sibling),
		}
	}
	tests := []struct {
		name    string
		tensors []*engine.Tensor
		want    string
	}{
		{"cycle", tree([]int64{1, -1, -1}, []int64{-1, 2, 1}, []int64{0, 1, 2}), `tensor "retrive_next_sibling": row 0, node 2 links to node 1, which the tree has already reached`},
		{"sibling outside the row", tree([]int64{1, -1, -1}, []int64{-1, 5, -1}, []int64{0, 1, 2}), `tensor "retrive_next_sibling": row 0, node 1 links to 5, outside the row's nodes [0, 3)`},
		{"child before its parent", tree([]int64{2, -1, 1}, []int64{-1, -1, -1}, []int64{0, 1, 2}), `tensor "retrive_next_token": row 0, node 2 has the first child 1`},
		{"candidate outside the vocabulary", tree([]int64{1, -1}, []int64{-1, -1}, []int64{0, 8}), `tensor "candidates": row 0, node 1 holds token 8, outside the vocabulary [0, 8)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeDump(t, dir, strings.ReplaceAll(tt.name, " ", "_")+".safetensors", nil, tt.tensors...)
			var stdout, stderr bytes.Buffer
			if code := runCheck([]string{"--backend", "cpu", path}, &stdout, &stderr); code != exitUnusable {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUnusable, stderr.String())
			}
			if msg := strings.TrimSpace(stderr.String()); !strings.Contains(msg, tt.want) || strings.Count(msg, "\n") > 0 {
				t.Errorf("stderr %q, want one line holding %q", msg, tt.want)
			}
		})
	}
}
