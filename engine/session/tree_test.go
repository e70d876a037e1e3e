package session

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/engine/lesson"
)

// TestTreeRowAndLesson runs a draft tree through Execute with stored
// outputs, and reads back what the row page and the tree lesson show:
// the laws at each node, how often our trials took each, the trace of
// trial 0 equal to the lesson's steps and to our tree_path and tree_tokens.
func TestTreeRowAndLesson(t *testing.T) {
	// The root's children are nodes 1 and 2; node 1's is node 3.
	const v = 6
	next, sibling := []int64{1, 3, -1, -1}, []int64{-1, 2, -1, -1}
	logits := make([]float32, 2*4*v)
	for i := range logits {
		logits[i] = float32((i*7)%11) / 4
	}
	tensors := []*engine.Tensor{
		engine.FromFloat32s("target_logits", engine.F32, []int{2, 4, v}, logits),
		engine.FromInts("candidates", engine.I64, []int{2, 4}, []int64{0, 2, 4, 1, 0, 3, 5, 2}),
		engine.FromInts("retrive_next_token", engine.I32, []int{2, 4}, slices.Concat(next, next)),
		engine.FromInts("retrive_next_sibling", engine.I32, []int{2, 4}, slices.Concat(sibling, sibling)),
	}
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tree.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	trials := 300
	p := New(cpu.New())
	job := Job{DumpPath: path, FileName: "tree.safetensors", OutputsPath: filepath.Join(t.TempDir(), "o.safetensors"), Backend: "cpu",
		Overrides: engine.Overrides{Trials: &trials}}
	rep, err := p.Execute(context.Background(), job, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Op != engine.OpSpecTreeVerify || !rep.Pass || rep.Outputs[0].Kind != "tree" {
		t.Fatalf("op %s, pass %v, kind %q: %q", rep.Op, rep.Pass, rep.Outputs[0].Kind, rep.Outputs[0].Violations)
	}
	d, err := p.Row(context.Background(), job, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	tr := d.Tree
	if tr == nil || tr.Invalid != "" || len(tr.Node) != 4 || tr.MaxDepth != 2 || tr.Trace == nil {
		t.Fatalf("tree detail %+v", tr)
	}
	if len(tr.Reached) != 1 || tr.Trials[0] != trials || tr.Reached[0][0] != trials {
		t.Errorf("reached %v over %v trials, want the root in all %d", tr.Reached, tr.Trials, trials)
	}
	st, err := p.TeachTree(context.Background(), job, 1, lesson.TreeLesson{})
	if err != nil {
		t.Fatal(err)
	}
	for j, n := range tr.Trace.Path[0] {
		if st.Path[j] != int(n) || st.Tokens[j] != int(tr.Trace.Tokens[0][j]) {
			t.Fatalf("lesson path %v tokens %v, stored trial 0 %v %v", st.Path, st.Tokens, tr.Trace.Path[0], tr.Trace.Tokens[0])
		}
	}
	for _, n := range tr.Node {
		if st.Parent[n.Node] != n.Parent || !slices.Equal(st.Children[n.Node], n.Children) || int64(st.Candidates[n.Node]) != n.Token {
			t.Errorf("the lesson's tree at node %d: parent %d, children %v, token %d; the row's %+v", n.Node, st.Parent[n.Node], st.Children[n.Node], st.Candidates[n.Node], n)
		}
	}
	last := st.Steps[len(st.Steps)-1]
	if last.Child != -1 || last.Drawn != st.Tokens[st.Accepted] {
		t.Errorf("last step %+v, want the draw of token %d", last, st.Tokens[st.Accepted])
	}
	for _, s := range st.Steps[:len(st.Steps)-1] {
		if got := tr.Trace.Step[0][s.Child]; !got.Tried || engine.Float(got.U) != s.U || got.Accepted != s.Accepted {
			t.Errorf("step %+v, stored trace of node %d %+v", s, s.Child, got)
		}
	}
	if _, err := p.TeachTree(context.Background(), job, 5, lesson.TreeLesson{}); err == nil {
		t.Error("a lesson on row 5 of 2 rows did not fail")
	}

	// With a tokenizer, the row and the lesson name every token they show.
	tok := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(tok, []byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4, "f": 5}, "merges": []}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	job.TokenizerPath, job.TokenizerName = tok, "tokenizer.json"
	if d, err = p.Row(context.Background(), job, 1, 10); err != nil {
		t.Fatal(err)
	}
	if st, err = p.TeachTree(context.Background(), job, 1, lesson.TreeLesson{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range d.Tree.Node {
		if d.Text[n.Token] == "" {
			t.Errorf("node %d's token %d has no text in the row detail: %v", n.Node, n.Token, d.Text)
		}
	}
	for _, s := range st.Steps {
		for _, id := range []int{s.Token, s.Drawn} {
			if id >= 0 && st.Text[int64(id)] == "" {
				t.Errorf("step %d's token %d has no text in the lesson: %v", s.Step, id, st.Text)
			}
		}
	}
}
