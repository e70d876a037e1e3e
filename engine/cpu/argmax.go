package cpu

import (
	"context"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// argmax runs argmax: Tokens I32 [B].
func (b *Backend) argmax(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	rows, vocab, err := logitsShape(run)
	if err != nil {
		return nil, 0, err
	}
	tokens := engine.NewTensor("tokens", engine.I32, rows)
	err = b.forEachRow(ctx, rows, func(s *scratch, r int) error {
		x := floats(&s.x, vocab)
		run.Logits.Floats32(r*vocab, x)
		putInt32(tokens, r, int32(Argmax(x)))
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return &engine.Output{Tokens: tokens}, engine.TensorBytes(run.Logits, tokens), nil
}

// Argmax returns the first index of the largest value of x, or -1 when x is
// empty, holds a NaN, or is all -Inf. +Inf is an ordinary maximum.
func Argmax(x []float32) int {
	best := -1
	m := float32(math.Inf(-1))
	for i, v := range x {
		if v != v {
			return -1
		}
		if v > m {
			m, best = v, i
		}
	}
	return best
}
