package ref

import "math"

// exactSum accumulates float64 values without rounding error and rounds the
// total once (Shewchuk, "Adaptive precision floating-point arithmetic and fast
// robust geometric predicates", 1997; the algorithm of Python's math.fsum).
// The result is the correctly rounded sum, whatever the order of addition.
// The values added here are finite; the zero value is an empty sum.
type exactSum struct {
	partials []float64 // non-overlapping, increasing magnitude
}

// reset empties the sum, keeping its memory.
func (s *exactSum) reset() { s.partials = s.partials[:0] }

// add adds x exactly.
func (s *exactSum) add(x float64) {
	i := 0
	for _, y := range s.partials {
		if math.Abs(x) < math.Abs(y) {
			x, y = y, x
		}
		hi := x + y
		lo := y - (hi - x)
		if lo != 0 {
			s.partials[i] = lo
			i++
		}
		x = hi
	}
	s.partials = append(s.partials[:i], x)
}

// addProduct adds n*x exactly: the product is split into two floats with a
// fused multiply-add, and both are added.
func (s *exactSum) addProduct(n int, x float64) {
	fn := float64(n) // exact: n < 2^53
	hi := float64(fn * x)
	lo := math.FMA(fn, x, -hi)
	s.add(hi)
	if lo != 0 {
		s.add(lo)
	}
}

// value returns the sum rounded once to the nearest float64 (ties to even).
func (s *exactSum) value() float64 {
	p := s.partials
	n := len(p)
	if n == 0 {
		return 0
	}
	n--
	hi := p[n]
	lo := 0.0
	for n > 0 {
		x := hi
		n--
		y := p[n]
		hi = x + y
		lo = y - (hi - x)
		if lo != 0 {
			break
		}
	}
	// Round half to even when the remaining partials push lo past a tie.
	if n > 0 && ((lo < 0 && p[n-1] < 0) || (lo > 0 && p[n-1] > 0)) {
		y := lo * 2
		x := hi + y
		if y == x-hi {
			hi = x
		}
	}
	return hi
}
