package cpu

import (
	"math"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/philox"
)

// Filter marks in keep (as long as w) the tokens that survive top-k, top-p
// and min-p, decided on the weights w of a row with a distribution (values in
// [0, 1], the maximum exactly 1) and on their fixed-point weights
// W_i = philox.Weight(w_i), summed as integers, exactly as docs/SEMANTICS.md
// "Kernel semantics" says:
//
//   - top-k (k > 0 and k < len(w); otherwise off): under engine.TiesKeep,
//     count(w_j > w_i) < k; under engine.TiesLowestIndex (and
//     engine.TiesAny, which it serves), count(w_j > w_i) + count(j < i,
//     w_j = w_i) < k.
//   - top-p (topP < 1; otherwise off, since at topP = 1 the rule would still
//     drop tokens whose fixed-point weight is 0):
//     float64(Σ_{w_j > w_i} W_j) < float64(topP) * float64(Z'), with Z' the
//     sum of W over the top-k survivors under engine.TopKFirst (or any order
//     other than engine.Joint and engine.MinPFirst), over every token under
//     engine.Joint, and over the tokens both top-k and min-p keep under
//     engine.MinPFirst.
//   - min-p (minP > 0; otherwise off): w_i >= minP.
//
// A token survives when it survives all three. The most probable token
// always survives for topP in (0, 1] and minP in [0, 1].
func Filter(w []float32, k int, topP, minP float32, order engine.FilterOrder, ties engine.TopKTies, keep []bool) {
	var f filter
	f.apply(w, k, topP, minP, order, ties, keep)
}

// filter holds the scratch space of Filter so that a worker reuses it from
// row to row.
type filter struct {
	fixed []uint64
	index []int32 // descend's elements of the chosen bucket
}

// weights returns the fixed-point weights of w, in scratch space.
func (f *filter) weights(w []float32) []uint64 {
	if cap(f.fixed) < len(w) {
		f.fixed = make([]uint64, len(w))
	}
	W := f.fixed[:len(w)]
	for i, v := range w {
		W[i] = philox.Weight(v)
	}
	return W
}

// apply is Filter with reusable scratch space.
func (f *filter) apply(w []float32, k int, topP, minP float32, order engine.FilterOrder, ties engine.TopKTies, keep []bool) {
	keep = keep[:len(w)]
	for i := range keep {
		keep[i] = true
	}
	topK := k > 0 && k < len(w)
	nucleus := topP < 1
	if !topK && !nucleus && !(minP > 0) {
		return
	}
	var W []uint64
	if nucleus {
		W = f.weights(w)
	}
	exact := ties == engine.TiesLowestIndex || ties == engine.TiesAny
	if topK {
		// Survivors of top-k are the tokens at or above the k-th largest
		// weight tau; under lowest_index only the first k - count(w > tau)
		// tokens equal to tau survive.
		tau := f.descend(w, nil, func(above int, _ uint64) bool { return above < k })
		room := k
		if exact {
			for _, v := range w {
				if v > tau {
					room--
				}
			}
		}
		for i, v := range w {
			switch {
			case v > tau:
			case v == tau && (!exact || room > 0):
				room--
			default:
				keep[i] = false
			}
		}
	}
	minPFirst := order == engine.MinPFirst && minP > 0
	if minPFirst {
		f.minP(w, minP, keep)
	}
	if nucleus {
		var z uint64
		for i, v := range W {
			if order == engine.Joint || keep[i] {
				z += v
			}
		}
		limit := float64(topP) * float64(z)
		cut := f.descend(w, W, func(_ int, mass uint64) bool { return float64(mass) < limit })
		for i, v := range w {
			if v < cut {
				keep[i] = false
			}
		}
	}
	if minP > 0 && !minPFirst {
		f.minP(w, minP, keep)
	}
}

// minP drops from keep the tokens min-p drops: w_i < minP.
func (f *filter) minP(w []float32, minP float32, keep []bool) {
	for i, v := range w {
		if !(v >= minP) {
			keep[i] = false
		}
	}
}

// descend returns the smallest value v of w for which ahead(count, mass)
// holds, where count and mass are the number and the fixed-point mass (from
// W; nil when ahead ignores mass) of the elements strictly greater than v.
// ahead must be monotone: once false it stays false as count and mass grow.
// The tokens at or above the returned value are then exactly those for
// which ahead holds, except that the largest value is returned when ahead
// fails even for it. w must hold no NaN and no negative value, so that the
// float32 bit patterns order as the values do; descend walks them most
// significant byte first, keeping at each level the lowest non-empty byte
// bucket whose largest element still passes (or the highest non-empty one
// if none does), and never sorts. After the first level it visits only the
// elements of the chosen bucket, whose indices it keeps in f's scratch.
func (f *filter) descend(w []float32, W []uint64, ahead func(count int, mass uint64) bool) float32 {
	var prefix uint32
	aboveCount, aboveMass := 0, uint64(0)
	idx := f.index[:0]
	for shift := 24; shift >= 0; shift -= 8 {
		var counts [256]int
		var masses [256]uint64
		switch {
		case shift == 24 && W == nil:
			for _, v := range w {
				counts[math.Float32bits(v)>>24]++
			}
		case shift == 24:
			for i, v := range w {
				d := math.Float32bits(v) >> 24
				counts[d]++
				masses[d] += W[i]
			}
		default:
			for _, i := range idx {
				d := (math.Float32bits(w[i]) >> uint(shift)) & 0xff
				counts[d]++
				if W != nil {
					masses[d] += W[i]
				}
			}
		}
		chosen, chosenCount, chosenMass := -1, 0, uint64(0)
		count, mass := aboveCount, aboveMass
		for d := 255; d >= 0; d-- {
			if counts[d] == 0 {
				continue
			}
			// The largest element of bucket d has exactly (count, mass)
			// ahead of it; the rest of the bucket has at least that.
			if chosen >= 0 && !ahead(count, mass) {
				break
			}
			chosen, chosenCount, chosenMass = d, count, mass
			count += counts[d]
			mass += masses[d]
		}
		if chosen < 0 { // w is empty
			return float32(math.Inf(1))
		}
		prefix |= uint32(chosen) << uint(shift)
		aboveCount, aboveMass = chosenCount, chosenMass
		if shift == 0 {
			break
		}
		// Keep the elements of the chosen bucket for the next level.
		mask := uint32(math.MaxUint32) << uint(shift)
		if shift == 24 {
			for i, v := range w {
				if math.Float32bits(v)&mask == prefix {
					idx = append(idx, int32(i))
				}
			}
		} else {
			kept := idx[:0]
			for _, i := range idx {
				if math.Float32bits(w[i])&mask == prefix {
					kept = append(kept, i)
				}
			}
			idx = kept
		}
	}
	f.index = idx
	return math.Float32frombits(prefix)
}
