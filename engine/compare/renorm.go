package compare

import (
	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// underflowBelow returns the reference probability below which an output of
// dtype d may hold 0 without dropping the token: the smallest normal float32
// (a kernel flushing subnormals to zero is not wrong), or the smallest f16
// subnormal for F16 outputs, whose smallest values round to zero.
func underflowBelow(d engine.DType) float64 {
	if d == engine.F16 {
		return 0x1p-24
	}
	return 0x1p-126
}

// supportDiff is a set of tokens on which the output and the reference
// disagree about the support.
type supportDiff struct {
	n, first int
	// refMass is the reference mass of the tokens (renormalised for tokens
	// the reference keeps, unfiltered for tokens it drops); outMass is the
	// output's.
	refMass, outMass float64
}

// supportDiff records n tokens, the first at i, that are zero on one side
// only (a NaN output is counted as NaN, not here).
func (m *measurement) supportDiff(i, n int, o, r, base float64, c ref.Class, underflow float64) {
	switch {
	case o != o:
	case o == 0: // the reference has mass here
		switch c {
		case ref.Kept:
			if r >= underflow {
				m.missing.add(i, n, r, 0)
			}
		case ref.Boundary:
			m.boundaryDropped.add(i, n, base, 0)
		}
	default: // the output has mass where the reference has none
		switch {
		case c == ref.Boundary, c == ref.Dropped && base < underflow:
			// Below the smallest normal float32, a kernel's weights are
			// subnormals whose lost bits tie values that float64 tells
			// apart, so a filter may keep them: a boundary, not an extra
			// token (the value check still sees their mass).
			m.boundaryKept.add(i, n, base, o)
		case c == ref.Dropped:
			m.extra.add(i, n, base, o)
		}
	}
}

// renormalisedRef returns the reference renormalised over the output's
// support: base on the tokens the reference does not drop and the output
// keeps (and on every Kept token), divided by its mass. Element i stands
// for n[i] tokens (n nil: one each).
func renormalisedRef(dst, out, base []float64, cls []ref.Class, n []int64) []float64 {
	dst = dst[:len(out)]
	var z float64
	for i, o := range out {
		dst[i] = 0
		if cls[i] == ref.Kept || (cls[i] == ref.Boundary && o != 0) {
			dst[i] = base[i]
			if n != nil {
				z += float64(n[i]) * base[i]
			} else {
				z += base[i]
			}
		}
	}
	for i := range dst {
		dst[i] /= z
	}
	return dst
}

// add records n tokens of one value, the first at i, each with its
// reference mass and the output's.
func (s *supportDiff) add(i, n int, refMass, outMass float64) {
	if s.n == 0 {
		s.first = i
	}
	s.n += n
	s.refMass += float64(n) * refMass
	s.outMass += float64(n) * outMass
}
