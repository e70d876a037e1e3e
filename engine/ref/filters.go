package ref

import (
	"math"

	"github.com/sampviz/sampviz/engine"
)

// groups are the distinct probabilities of a row, most probable first:
// p[g] strictly decreases with g and n[g] tokens share it. decide fills the
// rest: the filters' verdict on each group.
type groups struct {
	p []float64
	n []int

	// class and keep are each group's class and the exact decision (keep
	// means the token is in the renormalised support).
	class []Class
	keep  []bool
	// split is the one group whose tokens do not all share its verdict
	// (top_k_ties=lowest_index at the k-th probability), or -1. Its first
	// splitAt tokens in index order take class[split] and keep[split]; the
	// rest are Dropped.
	split   int
	splitAt int
	// anyTies says the split group's tokens are all Boundary
	// (engine.TiesAny): an output may keep any splitAt of them.
	anyTies bool

	topKProb, topPCut, minPThreshold float64

	// prefix is scratch: prefix[j] is the exact mass of groups 0..j-1.
	prefix []float64
}

// reset empties g for a row, keeping its memory.
func (g *groups) reset() {
	g.p, g.n = g.p[:0], g.n[:0]
}

// push appends a group of n tokens of probability p, merging it into the
// last group when p is equal (so callers may push every distinct logit).
func (g *groups) push(p float64, n int) {
	if k := len(g.p) - 1; k >= 0 && g.p[k] == p {
		g.n[k] += n
		return
	}
	g.p = append(g.p, p)
	g.n = append(g.n, n)
}

// kept returns how many tokens of group i are in the support.
func (g *groups) kept(i int) int {
	switch {
	case !g.keep[i]:
		return 0
	case i == g.split:
		return g.splitAt
	}
	return g.n[i]
}

// restClass is the class of the split group's tokens past its first
// splitAt: dropped, or under ties any the group's class (at least boundary),
// since any of its tokens may be the ones kept.
func (g *groups) restClass() Class {
	if g.anyTies {
		return max(Boundary, g.class[g.split])
	}
	return Dropped
}

// decide applies the filters f to a row of v tokens (SEMANTICS.md
// "Filters" and "Boundary tokens"). Masses are exact sums of the
// probabilities; sum is scratch.
func (g *groups) decide(f Filter, v int, sum *exactSum) {
	ng := len(g.p)
	g.class = resize(g.class, ng)
	g.keep = resize(g.keep, ng)
	for i := range ng {
		g.class[i], g.keep[i] = Kept, true
	}
	g.split, g.splitAt, g.anyTies = -1, 0, false
	g.topKProb, g.topPCut, g.minPThreshold = 0, 0, 0
	eps := f.Eps

	// Under min_p_first, top-p is relative to the mass of the tokens min-p
	// keeps (of those top-k keeps): minPDrops tells the others.
	minPFirst := f.Order == engine.MinPFirst && f.minPOn()
	minPDrops := func(i int) bool { return minPFirst && g.p[i] < f.MinP*g.p[0] }

	// zPrime is the mass top-p is relative to: all tokens, the top-k set
	// under top_k_first, its min-p survivors under min_p_first.
	sum.reset()
	for i := range ng {
		if !minPDrops(i) {
			sum.addProduct(g.n[i], g.p[i])
		}
	}
	zPrime := sum.value()

	if f.topKOn(v) {
		k := f.TopK
		// star is the group holding the k-th most probable token.
		star, ahead := 0, 0
		for c := 0; star < ng; star++ {
			if c+g.n[star] >= k {
				ahead = c
				break
			}
			c += g.n[star]
		}
		pk := g.p[star]
		g.topKProb = pk
		near := func(p float64) bool { return math.Abs(p-pk) <= eps*pk }
		sum.reset()
		for i := range ng {
			var c Class
			keep := i <= star
			switch {
			case i == star:
				c = Kept // exact ties follow the declared rule
				if (f.Ties == engine.TiesLowestIndex || f.Ties == engine.TiesAny) && ahead+g.n[i] > k {
					g.split, g.splitAt = i, k-ahead
					if f.Ties == engine.TiesAny {
						// Which of the tied tokens survive is not specified.
						c, g.anyTies = Boundary, true
					}
				}
			case i == 0:
				c = Kept // the most probable token always survives
			case near(g.p[i]):
				c = Boundary
			case keep:
				c = Kept
			default:
				c = Dropped
			}
			g.combine(i, c, keep)
			switch {
			case minPDrops(i):
			case i < star:
				sum.addProduct(g.n[i], g.p[i])
			case i == star && g.split == i:
				sum.addProduct(g.splitAt, g.p[i])
			case i == star:
				sum.addProduct(g.n[i], g.p[i])
			}
		}
		if f.Order != engine.Joint {
			zPrime = sum.value()
		}
	}

	if f.topPOn() {
		cut := f.TopP * zPrime
		g.topPCut = cut
		keptBelow, droppedFrom := cut*(1-eps), cut*(1+eps)
		// prefix[j] is filled only as far as the groups looked at need it:
		// the loop stops soon after the cut, and a row holds thousands of
		// groups past it.
		g.prefix = append(g.prefix[:0], 0)
		sum.reset()
		prefixTo := func(j int) {
			for k := len(g.prefix) - 1; k < j; k++ {
				sum.addProduct(g.n[k], g.p[k])
				g.prefix = append(g.prefix, sum.value())
			}
		}
		// far counts the groups more probable than group i by more than a
		// relative eps, near the groups at least (1 - eps) as probable:
		// both only grow with i, as the probabilities fall.
		far, near := 0, 0
		for i := range ng {
			for far < ng && g.p[far] > g.p[i]*(1+eps) {
				far++
			}
			for near < ng && g.p[near] >= g.p[i]*(1-eps) {
				near++
			}
			prefixTo(near)
			if i > 0 && g.prefix[far] >= droppedFrom {
				// The mass far ahead only grows: every later group is dropped.
				for ; i < ng; i++ {
					g.combine(i, Dropped, false)
				}
				break
			}
			var c Class
			// With every tied or near-tied token ahead of it.
			worstAhead := g.prefix[near] - g.p[i]
			switch {
			case i == 0 || worstAhead < keptBelow:
				c = Kept
			default:
				c = Boundary
			}
			g.combine(i, c, i == 0 || g.prefix[i] < cut)
		}
	}

	if f.minPOn() {
		thr := f.MinP * g.p[0]
		g.minPThreshold = thr
		for i := range ng {
			p := g.p[i]
			var c Class
			switch {
			case i == 0:
				c = Kept
			case math.Abs(p-thr) <= eps*thr:
				c = Boundary
			case p >= thr:
				c = Kept
			default:
				c = Dropped
			}
			g.combine(i, c, i == 0 || p >= thr)
		}
	}

	// Tokens of zero probability are never in a support.
	if last := ng - 1; last >= 0 && g.p[last] == 0 {
		g.class[last], g.keep[last] = Dropped, false
		if g.split == last {
			g.split = -1
		}
	}
}

// combine folds one filter's verdict on group i into the group's.
func (g *groups) combine(i int, c Class, keep bool) {
	g.class[i] = max(g.class[i], c)
	g.keep[i] = g.keep[i] && keep
}

// resize returns s with length n, reusing its memory when it can.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}
