package ref

import (
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
)

// BenchmarkRow compares the simple path (an exp per token, a sort for the
// filters) with the fast path (an exp per distinct value) on one row of
// 128256 bf16 logits.
func BenchmarkRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(17, 18))
	const v = 128256
	x := randomLogits(rng, v, 3)
	row := Logits{Tensor: engine.FromFloat64s("logits", engine.BF16, []int{1, v}, x), Len: v}
	for _, c := range []struct {
		name string
		f    Filter
	}{
		{"softmax", NoFilter()},
		{"renorm", Filter{TopK: 100, TopP: 0.95, MinP: 0.05, Eps: 1.6e-2}},
	} {
		b.Run(c.name+"/simple", func(b *testing.B) {
			var ws Workspace
			var d Dist
			for b.Loop() {
				ws.computeSimple(&d, row, 0.8, c.f, false)
			}
		})
		b.Run(c.name+"/fast", func(b *testing.B) {
			var ws Workspace
			var d Dist
			for b.Loop() {
				if ws.half != nil {
					ws.half.lastData = nil // count the row every time
				}
				ws.Compute(&d, row, 0.8, c.f, false)
			}
		})
	}
}
