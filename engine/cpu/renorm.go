package cpu

import (
	"context"

	"github.com/sampviz/sampviz/engine"
)

// renorm runs renorm: Probs F32 [B, V], the softmax after each row's
// filters, renormalised (softmax.go's probs, filtered).
func (b *Backend) renorm(ctx context.Context, run *engine.Run) (*engine.Output, int64, error) {
	return b.probs(ctx, run, true)
}

// Renorm writes into p the weights w restricted to the tokens marked in keep
// (nil keeps every token) and divided by their Sum: filtered tokens are
// exactly 0. w must be the Weights of a row with a distribution, with at
// least one kept token of positive weight.
func Renorm(w []float32, keep []bool, p []float32) {
	p = p[:len(w)]
	if keep == nil {
		copy(p, w)
	} else {
		for i, v := range w {
			if keep[i] {
				p[i] = v
			} else {
				p[i] = 0
			}
		}
	}
	normalise(p)
}

// filterRow marks in keep the survivors of row r's filters: on the weights
// w of logits x at the row's temperature, or, under temperature_order last,
// on the weights of x at temperature 1 (computed in s.w1), since the
// temperature then comes after the filters.
func filterRow(s *scratch, rp *engine.KernelParams, r int, x, w []float32, keep []bool) {
	if t := rp.Temperature[r]; rp.TemperatureOrder == engine.TemperatureLast && t != 1 {
		w = floats(&s.w1, len(x))
		Weights(x, 1, w)
	}
	s.filter.apply(w, rp.TopK[r], rp.TopP[r], rp.MinP[r], rp.Order, rp.Ties, keep)
}
