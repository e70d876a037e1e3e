package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/f32math"
	"github.com/sampviz/sampviz/engine/philox"
)

// gumbelModel is csrc/sample.cuh's gumbel_kernel written in Go for a block
// of block threads, so that its recheck (the bound eps and the rescan rule)
// can be checked against the exact Gumbel-max on machines without a GPU.
// word(i) is token i's noise word (the kernel's: word i%4 of Philox block
// i/4); lg2 stands in for MUFU.LG2. It returns the token and how many
// threads rescanned their share, or fallback set where the kernel hands the
// row to the exact path (a greedy row, a NaN or infinite logit, scores that
// could overflow).
func gumbelModel(x []float32, t float32, block int, word func(i int) uint32, lg2 func(float32) float32) (token, rescans int, fallback bool) {
	const log2e = float32(1.44269504088896341)
	n := len(x)
	if t == 0 {
		return 0, 0, true
	}
	c := log2e / t
	approx := func(v float32, w uint32) float32 {
		u := float32(float64(w>>9)*0x1p-23 + 0x1p-24)
		d := 1 - u
		ser := d * fma32(d, fma32(d, log2e/3, log2e/2), log2e)
		l := ser
		if !(d < 0x1p-6) {
			l = -lg2(u)
		}
		return fma32(v, c, -lg2(l))
	}
	type share struct {
		mx, ax, a1, a2 float32
		g1             int
	}
	inf := float32(math.Inf(1))
	groups := (n + 7) / 8
	sh := make([]share, block)
	ap := make([]float32, n) // each token's approximate score: the kernel recomputes the same bits
	m, ax, amax := -inf, float32(0), -inf
	for tid := range block {
		s := share{mx: -inf, a1: -inf, a2: -inf, g1: -1}
		for g := tid; g < groups; g += block {
			m8 := -inf
			for i := 8 * g; i < min(n, 8*g+8); i++ {
				s.mx = max(s.mx, x[i])
				if v := float32(math.Abs(float64(x[i]))); v != v || s.ax != s.ax || v > s.ax {
					s.ax = v // max.NaN
				}
				ap[i] = approx(x[i], word(i))
				m8 = max(m8, ap[i])
			}
			s.a2 = max(s.a2, min(s.a1, m8))
			if m8 > s.a1 {
				s.g1 = g
			}
			s.a1 = max(s.a1, m8)
		}
		sh[tid] = s
		m = max(m, s.mx)
		if s.ax != s.ax {
			ax = inf
		} else {
			ax = max(ax, s.ax)
		}
		amax = max(amax, s.a1)
	}
	at := float32(math.Abs(float64(t)))
	if !(ax*(1+float32(math.Abs(float64(c)))) < 0x1p100) || !(float32(math.Abs(float64(amax))) < inf) {
		return 0, 0, true
	}
	eps := 0x1p-10 + (ax+ax/at)*0x1p-17
	thr := amax - 2*eps
	best, bestScore := -1, -inf
	exact := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g := -f32math.Log(-f32math.Log(philox.OpenU01(word(i))))
			score := float32(float32(x[i]-m)/t) + g
			if best < 0 || score > bestScore || score == bestScore && i < best {
				best, bestScore = i, score
			}
		}
	}
	for tid, s := range sh {
		if s.a2 >= thr {
			rescans++
			for g := tid; g < groups; g += block {
				exact(8*g, min(n, 8*g+8))
			}
		} else if s.a1 >= thr {
			for i := 8 * s.g1; i < min(n, 8*s.g1+8); i++ { // gumbel_pick: the group's tokens that reach thr
				if ap[i] >= thr {
					exact(i, i+1)
				}
			}
		}
	}
	return best, rescans, false
}

// fma32 is float32's fused multiply-add (float64's is exact on float32
// products; its one rounding and the conversion's may differ from one
// float32 rounding in the last bit, which the model's bound absorbs).
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// gumbelExact is the first maximum of the exact scores (engine/cpu's
// SampleGumbel for any word source).
func gumbelExact(x []float32, t float32, word func(i int) uint32) int {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	best, bestScore := -1, float32(0)
	for i, v := range x {
		g := -f32math.Log(-f32math.Log(philox.OpenU01(word(i))))
		score := float32(float32(v-m)/t) + g
		if best < 0 || score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// TestGumbelRecheckModel runs gumbelModel on rows that crowd the top of the
// approximate scores (equal and near-tied logits, large magnitudes, noise
// words from a small set, so exact ties and rescans are common) with
// MUFU.LG2 modelled as log2 pushed by up to its documented error (2^-22.6
// absolute on [0.5, 2], else 2 ulp; here max(2^-22, 2^-21 relative)) in a
// random direction each call: the model must draw
// engine/cpu's token on every row (with Philox words, SampleGumbel itself),
// and the rows must take the rescans and the fallback.
func TestGumbelRecheckModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	lg2 := func(y float32) float32 {
		l := math.Log2(float64(y))
		return float32(l + (2*rng.Float64()-1)*math.Max(0x1p-22, math.Abs(l)*0x1p-21))
	}
	kinds := []func(i int) float32{
		func(int) float32 { return float32(2 * rng.NormFloat64()) },
		func(int) float32 { return 0.5 },
		func(int) float32 { return -3000 },
		func(int) float32 { return 1 + float32(rng.IntN(3))/128 },
		func(int) float32 { return 1024 + 8*float32(rng.IntN(3)) },
		func(int) float32 { return 1e4 + float32(4*rng.NormFloat64()) },
		func(int) float32 { return float32(1e25 * rng.NormFloat64()) },
		func(i int) float32 {
			if i%5 == 0 {
				return float32(math.Inf(-1))
			}
			return float32(rng.NormFloat64())
		},
	}
	rescans, fallbacks, rows := 0, 0, 0
	for _, vocab := range []int{1, 7, 8, 9, 129, 1000, 4099} {
		for _, block := range []int{32, 64, 256} {
			for k, kind := range kinds {
				for _, temp := range []float32{1, 0.3, 1.7, 1e-3, 50} {
					for _, few := range []bool{false, true} {
						x := make([]float32, vocab)
						for i := range x {
							x[i] = kind(i)
						}
						s := philox.NewStream(rng.Uint64(), rng.Uint64()>>rng.IntN(64), rng.IntN(1000), 0)
						words := make([]uint32, vocab)
						pool := []uint32{0xffffffff, 0xfffffe00, 0xfffff000, 0x80000000, 0x00000200, 0x12345678}
						for i := range words {
							words[i] = s.Block(uint64(i / 4))[i%4]
							if few {
								words[i] = pool[rng.IntN(len(pool))]
							}
						}
						word := func(i int) uint32 { return words[i] }
						want := gumbelExact(x, temp, word)
						got, r, fb := gumbelModel(x, temp, block, word, lg2)
						if !few {
							cpuTok := cpu.SampleGumbel(x, temp, nil, s)
							if cpuTok < 0 && !fb {
								t.Fatalf("V%d kind %d T%g: a row without a distribution (engine/cpu draws -1) left to the recheck", vocab, k, temp)
							}
							if cpuTok >= 0 && cpuTok != want {
								t.Fatalf("V%d kind %d T%g: the model's reference drew %d, engine/cpu %d", vocab, k, temp, want, cpuTok)
							}
						}
						rows++
						rescans += r
						if fb {
							fallbacks++
							continue
						}
						if got != want {
							t.Errorf("%s: recheck drew %d, exact Gumbel-max %d", fmt.Sprintf("V%d block %d kind %d T%g few words %v", vocab, block, k, temp, few), got, want)
						}
					}
				}
			}
		}
	}
	t.Logf("%d rows, %d thread rescans, %d rows to the exact path", rows, rescans, fallbacks)
	if rescans == 0 || fallbacks == 0 || fallbacks == rows {
		t.Errorf("the rows took %d rescans and %d fallbacks of %d: the cases no longer reach both", rescans, fallbacks, rows)
	}
}
