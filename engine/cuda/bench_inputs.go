package cuda

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
)

// benchInput is one device input of a bench case that a peer needs: its
// name in the inputs file and in benchSet.in, its dtype and the shape of
// one set's tensor. The file stacks the sets along a leading dimension.
type benchInput struct {
	name  string
	dtype engine.DType
	shape []int
}

// benchInputTensors lists the per-set device inputs that a peer of c reads
// (python/peers.py): the logits of the row ops, spec_verify's target rows,
// drafts and draft distributions, spec_tree_verify's target rows and draft
// distributions. ngram_match has no peer and no inputs file.
func benchInputTensors(c *BenchCase) ([]benchInput, error) {
	b, v := c.Rows, c.Vocab
	switch c.Op {
	case engine.OpArgmax, engine.OpSoftmax, engine.OpRenorm, engine.OpSample:
		return []benchInput{{"logits", c.DType, []int{b, v}}}, nil
	case engine.OpSpecVerify:
		in := []benchInput{{"target", c.DType, []int{b, c.K + 1, v}}, {"drafts", engine.I32, []int{b, c.K}}}
		if c.DraftProbs {
			in = append(in, benchInput{"qprobs", c.DType, []int{b, c.K, v}})
		}
		return in, nil
	case engine.OpSpecTreeVerify:
		in := []benchInput{{"target", c.DType, []int{b, c.Nodes, v}}}
		if c.DraftProbs {
			in = append(in, benchInput{"qprobs", c.DType, []int{b, c.Nodes, v}})
		}
		return in, nil
	}
	return nil, fmt.Errorf("bench inputs: op %s has no peer, so no inputs file", c.Op)
}

// benchInputsFile builds the tensors of c's inputs file: every per-set
// input stacked over the sets ([sets, ...]; read returns one set's bytes),
// and for spec_tree_verify the tree shared by every row and set
// (first_child and next_sibling [N], -1 for none, and the candidate tokens
// [B, N], node 0's unused), all int32. The metadata names the op and the
// number of sets.
func benchInputsFile(c *BenchCase, sets int, read func(name string, set int, n int64) ([]byte, error),
	treeTokens []int32, treeNext, treeSibling []int64) ([]*engine.Tensor, map[string]string, error) {
	inputs, err := benchInputTensors(c)
	if err != nil {
		return nil, nil, err
	}
	var tensors []*engine.Tensor
	for _, in := range inputs {
		n := int64(in.dtype.Size())
		for _, d := range in.shape {
			n *= int64(d)
		}
		data := make([]byte, 0, n*int64(sets))
		for s := range sets {
			b, err := read(in.name, s, n)
			if err != nil {
				return nil, nil, fmt.Errorf("bench inputs: %s of set %d: %w", in.name, s, err)
			}
			if int64(len(b)) != n {
				return nil, nil, fmt.Errorf("bench inputs: %s of set %d: %d bytes, want %d", in.name, s, len(b), n)
			}
			data = append(data, b...)
		}
		tensors = append(tensors, &engine.Tensor{Name: in.name, DType: in.dtype, Shape: append([]int{sets}, in.shape...), Data: data})
	}
	if c.Op == engine.OpSpecTreeVerify {
		if len(treeTokens) != c.Rows*c.Nodes || len(treeNext) != c.Nodes || len(treeSibling) != c.Nodes {
			return nil, nil, fmt.Errorf("bench inputs: tree of %d nodes with %d links and %d tokens, want %d links and %d tokens",
				c.Nodes, len(treeNext), len(treeTokens), c.Nodes, c.Rows*c.Nodes)
		}
		tokens := make([]int64, len(treeTokens))
		for i, v := range treeTokens {
			tokens[i] = int64(v)
		}
		tensors = append(tensors,
			engine.FromInts("first_child", engine.I32, []int{c.Nodes}, treeNext),
			engine.FromInts("next_sibling", engine.I32, []int{c.Nodes}, treeSibling),
			engine.FromInts("tokens", engine.I32, []int{c.Rows, c.Nodes}, tokens))
	}
	meta := map[string]string{"op": string(c.Op), "sets": strconv.Itoa(sets)}
	return tensors, meta, nil
}

// writeBenchInputs copies every input set of c from the device and writes
// them to c.Inputs (benchInputsFile's layout).
func (g *gpuExec) writeBenchInputs(c *BenchCase, sets []benchSet, treeTokens []int32, treeNext, treeSibling []int64) error {
	if err := g.lib.check(g.lib.synchronize(), "bench inputs: fill"); err != nil {
		return err
	}
	read := func(name string, set int, n int64) ([]byte, error) {
		h, ok := sets[set].in[name]
		if !ok {
			return nil, fmt.Errorf("no device buffer")
		}
		b := make([]byte, n)
		if n > 0 {
			if err := g.lib.check(g.lib.dtoh(unsafe.Pointer(&b[0]), h, uint64(n)), "copy to the host"); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	tensors, meta, err := benchInputsFile(c, len(sets), read, treeTokens, treeNext, treeSibling)
	if err != nil {
		return err
	}
	f, err := os.Create(c.Inputs)
	if err != nil {
		return fmt.Errorf("bench inputs: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = dump.WriteSafetensors(w, tensors, meta)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bench inputs %s: %w", c.Inputs, err)
	}
	return nil
}
