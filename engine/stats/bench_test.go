package stats

import (
	"fmt"
	"testing"
)

// BenchmarkGoodnessOfFit measures one row of an LLM-sized vocabulary.
func BenchmarkGoodnessOfFit(b *testing.B) {
	p := zipfDist(newRand(1), 128256)
	cdf := cdfOf(p)
	for _, n := range []int{1e4, 1e5, 1e6} {
		counts := drawCounts(newRand(2), cdf, n)
		for _, t := range []Test{GTest, Pearson} {
			b.Run(fmt.Sprintf("V=128256/N=%d/%s", n, t), func(b *testing.B) {
				for b.Loop() {
					if _, err := GoodnessOfFit(counts, p, FitOptions{Test: t}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
