package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// errNoTreeKernel refuses spec_tree_verify where the kernel library was
// built without its kernel (make kernels SV_TREE=0, the fallback should
// csrc/spec_tree_verify.cu not build): engine/cpu's twin serves the op,
// with the reference and the judge, on every machine.
var errNoTreeKernel = fmt.Errorf("spec_tree_verify: the CUDA kernels do not verify draft trees in this build (the kernel library was built with SV_TREE=0); run this dump with --backend cpu, whose twin draws what the kernel is specified to draw (docs/SEMANTICS.md): %w", engine.ErrUnsupported)

// treePlan lays out spec_tree_verify: the same checks as engine/cpu (the
// same errors, in the same order), then the tree as csrc/sampviz.h's
// sv_spec_tree_verify takes it (treeBuffer). Outputs: TreePath and
// TreeTokens I32 [B, P] and TreeAccepted I32 [B] of trial 0, with P the
// deepest row's depth plus one; TreePathTrials and TreeTrials I32 [T, B, P]
// when T > 1; the TreeTrace of the first min(T, 16) trials.
func treePlan(run *engine.Run) (*plan, error) {
	if err := checkTensor(run.TargetLogits, "target_logits", 3, true); err != nil {
		return nil, err
	}
	if err := checkTensor(run.Candidates, "candidates", 2, false); err != nil {
		return nil, err
	}
	rows, nodes, vocab := run.TargetLogits.Dim(0), run.TargetLogits.Dim(1), run.TargetLogits.Dim(2)
	if run.Candidates.Dim(0) != rows || run.Candidates.Dim(1) != nodes {
		return nil, fmt.Errorf("spec_tree_verify: target_logits %s and candidates %s, want [B, N, V] and [B, N]: %w",
			run.TargetLogits.ShapeString(), run.Candidates.ShapeString(), engine.ErrUnsupported)
	}
	if nodes < 1 || vocab < 1 {
		return nil, fmt.Errorf("spec_tree_verify: target_logits %s has no nodes or no tokens: %w", run.TargetLogits.ShapeString(), engine.ErrUnsupported)
	}
	if run.NextToken != nil && (run.NextToken.Dim(0) != rows || run.NextToken.Dim(1) != nodes) {
		return nil, fmt.Errorf("spec_tree_verify: retrive_next_token %s, want [%d, %d]: %w", run.NextToken.ShapeString(), rows, nodes, engine.ErrUnsupported)
	}
	trees, err := run.Trees()
	if err != nil {
		return nil, err
	}
	q := run.DraftProbs
	if q != nil {
		if err := checkTensor(q, "draft_probs", 3, true); err != nil {
			return nil, err
		}
		if q.Dim(0) != rows || q.Dim(1) != nodes || q.Dim(2) != vocab {
			return nil, fmt.Errorf("spec_tree_verify: draft_probs %s, want [%d, %d, %d]: %w", q.ShapeString(), rows, nodes, vocab, engine.ErrUnsupported)
		}
	}
	width := 0
	tokens := make([]int32, rows*nodes) // 0 at the root and where the root does not reach
	for r, t := range trees {
		width = max(width, t.MaxDepth+1)
		for node := 1; node < nodes; node++ {
			if !t.Reached(node) {
				continue
			}
			x := run.Candidates.Int(r*nodes + node)
			if x < 0 || x >= int64(vocab) {
				return nil, fmt.Errorf("spec_tree_verify: candidates: row %d, node %d holds token %d, outside [0, %d)", r, node, x, vocab)
			}
			tokens[r*nodes+node] = int32(x)
		}
	}
	if run.Params.Trials < 0 {
		return nil, fmt.Errorf("spec_tree_verify: trials %d is negative", run.Params.Trials)
	}
	rp, err := resolveParams(&run.Params, rows, vocab, run.Op.Spec().Kernel)
	if err != nil {
		return nil, fmt.Errorf("spec_tree_verify: %w", err)
	}
	trials := max(run.Params.Trials, 1)
	traced := min(trials, maxTraceTrials)
	p := &plan{req: runRequest{Op: run.Op, Rows: rows, Vocab: vocab, Nodes: nodes, Width: width, Trials: trials,
		TraceTrials: traced, In: map[string]slot{}, Out: map[string]slot{}}}
	flags := rp.flags | svDType(run.TargetLogits.DType)<<specTargetShift
	p.req.In["target"] = p.putFloats(run.TargetLogits)
	p.req.In["params"] = p.put(rp.bytes())
	p.req.In["tree"] = p.put(treeBuffer(trees, tokens, nodes))
	if q != nil && rows > 0 {
		flags |= svDType(q.DType) << specDraftShift
		p.req.In["qprobs"] = p.putFloats(q)
	}
	p.req.Flags = flags
	path := p.reserve(trials*rows*width, poisonToken)
	toks := p.reserve(trials*rows*width, poisonToken)
	accepted := p.reserve(trials*rows, poisonToken)
	trace := p.reserve(5*traced*rows*nodes, poisonFloat)
	p.req.Out["tree_path"], p.req.Out["tree_tokens"], p.req.Out["tree_accepted"], p.req.Out["trace"] = path, toks, accepted, trace
	p.decode = func(shm []byte) *engine.Output {
		allPath := readTensor(shm, path, "tree_path_trials", engine.I32, trials, rows, width)
		allToks := readTensor(shm, toks, "tree_trials", engine.I32, trials, rows, width)
		acc := readTensor(shm, accepted, "tree_accepted", engine.I32, trials, rows)
		out := &engine.Output{
			TreePath:     &engine.Tensor{Name: "tree_path", DType: engine.I32, Shape: []int{rows, width}, Data: allPath.Data[:4*rows*width]},
			TreeTokens:   &engine.Tensor{Name: "tree_tokens", DType: engine.I32, Shape: []int{rows, width}, Data: allToks.Data[:4*rows*width]},
			TreeAccepted: &engine.Tensor{Name: "tree_accepted", DType: engine.I32, Shape: []int{rows}, Data: acc.Data[:4*rows]},
		}
		if trials > 1 {
			out.TreePathTrials, out.TreeTrials = allPath, allToks
		}
		n := traced * rows * nodes
		tr := shm[trace.Off : trace.Off+trace.Bytes]
		word := func(array, i int) uint32 { return binary.LittleEndian.Uint32(tr[4*(array*n+i):]) }
		tt := &engine.TreeTrace{Trials: traced, Rows: rows, Nodes: nodes, Step: make([]engine.TreeStep, n)}
		for i := range n {
			f := word(3, i)
			tt.Step[i] = engine.TreeStep{
				Tried:    f&2 != 0,
				U:        math.Float32frombits(word(0, i)),
				P:        math.Float32frombits(word(1, i)),
				Q:        math.Float32frombits(word(2, i)),
				Accepted: f&1 != 0,
				Drawn:    int32(word(4, i)),
			}
		}
		out.TreeTrace = tt
		return out
	}
	outBytes := 4 * int64(2*rows*width+rows)
	if trials > 1 {
		outBytes += 2 * 4 * int64(trials) * int64(rows*width)
	}
	p.bytes = engine.TensorBytes(run.TargetLogits, run.Candidates, run.NextToken, run.NextSibling, run.DraftProbs) + outBytes +
		int64(rows)*run.Op.Spec().Kernel.Bytes()
	return p, nil
}

// treeBuffer lays out the trees as sv_spec_tree_verify takes them (csrc/
// sampviz.h): int32 tokens, kid_start, kid_count and kids [B, N], then
// first [B, N-1], the token of each node's first child (0 without one),
// which spec_verify's prepare reads as the node's draft. tokens holds the
// candidates, 0 at the root and where the root does not reach; such nodes
// have no children (engine.Tree lists none), so no kernel reads past the
// tree the links describe.
func treeBuffer(trees []*engine.Tree, tokens []int32, nodes int) []byte {
	rows := len(trees)
	slots := rows * nodes
	n := 4 * slots
	if nodes > 1 {
		n += rows * (nodes - 1)
	}
	b := make([]byte, 4*n)
	put := func(i int, v int32) { binary.LittleEndian.PutUint32(b[4*i:], uint32(v)) }
	for r, t := range trees {
		base, next := r*nodes, 0
		for u := range nodes {
			kids := t.Children[u]
			put(base+u, tokens[base+u])
			put(slots+base+u, int32(next))
			put(2*slots+base+u, int32(len(kids)))
			for _, c := range kids {
				put(3*slots+base+next, int32(c))
				next++
			}
			if u < nodes-1 {
				first := int32(0)
				if len(kids) > 0 {
					first = tokens[base+kids[0]]
				}
				put(4*slots+r*(nodes-1)+u, first)
			}
		}
	}
	return b
}
