package cpu

import (
	"context"
	"fmt"

	"github.com/sampviz/sampviz/engine"
)

// softmax runs softmax: Probs F32 [B, V].
func (b *Backend) softmax(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	return b.probs(ctx, run, false)
}

// probs runs softmax, or renorm when filtered: Probs F32 [B, V]. Greedy
// rows are never filtered.
func (b *Backend) probs(ctx context.Context, run *engine.Run, filtered bool) (*engine.Output, int64, error) {
	rows, vocab, err := logitsShape(run)
	if err != nil {
		return nil, 0, err
	}
	rp, err := run.Params.ForOp(run.Op, rows)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", run.Op, err)
	}
	probs := engine.NewTensor("probs", engine.F32, rows, vocab)
	err = b.forEachRow(ctx, rows, func(s *scratch, r int) error {
		x := floats(&s.x, vocab)
		run.Logits.Floats32(r*vocab, x)
		p := floats(&s.p, vocab)
		t := rp.Temperature[r]
		switch {
		case !filtered || t == 0:
			Softmax(x, t, p)
		default:
			w := floats(&s.w, vocab)
			if !Weights(x, t, w) {
				fillNaN(p)
				break
			}
			keep := bools(&s.keep, vocab)
			filterRow(s, rp, r, x, w, keep)
			Renorm(w, keep, p)
		}
		putFloats(probs, r*vocab, p)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	bytes := engine.TensorBytes(run.Logits, probs) + int64(rows)*run.Op.Spec().Kernel.Bytes()
	return &engine.Output{Probs: probs}, bytes, nil
}

// Softmax writes the temperature softmax of logits x into p: the Weights of
// x divided by their Sum. A row without a distribution gives NaN everywhere
// and false; t = 0 gives one-hot at the first maximum.
func Softmax(x []float32, t float32, p []float32) (valid bool) {
	if !Weights(x, t, p) {
		return false
	}
	normalise(p[:len(x)])
	return true
}
