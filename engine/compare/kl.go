package compare

import "math"

// logTableBits is the number of mantissa bits that index the tables of log.
const logTableBits = 10

// logTable holds log(c_j) and logInv 1/c_j for c_j = 1 + j/2^logTableBits
// (j below half the table) or (1 + j/2^logTableBits)/2 (the upper half, so
// that x just below a power of two does not cancel -ln 2 against log 2).
var logTable, logInv [1 << logTableBits]float64

func init() {
	for j := range logTable {
		c := 1 + float64(j)/(1<<logTableBits)
		logInv[j] = 1 / c
		if j >= 1<<(logTableBits-1) {
			c /= 2
		}
		logTable[j] = math.Log(c)
	}
}

// klLogged returns the sum of r (s - log(1 + s)), s = (out - r)/r, over the
// tokens idx (out where r is 0): the KL terms whose relative error s is too
// large for the series (|s| >= 0.05, where rounding 1 + s costs at most
// 2e-15 of the log). Its log is several times faster than math.Log and
// within a few ulp of it: x = 2^e·m with m in [1, 2) within 2^-10 of a
// tabulated c, and log(x) = e·ln 2 + log(c) + log1p((m - c)/c), the last
// by five terms of its series, written into the loop so that the loop makes
// no call. Zero, negative, subnormal and non-finite x go to math.Log.
// Element i stands for w[i] tokens (w nil: one each). A token the output
// holds at 0 whose reference is below underflow (the output's dtype cannot
// hold it: a far tail that underflows) adds its reference mass, what it
// loses, instead of the infinite term of a dropped token.
func klLogged(out, ref []float64, idx []int32, w []int64, underflow float64) float64 {
	kl := 0.0
	for _, i := range idx {
		r := ref[i]
		if w != nil {
			kl += float64(w[i]) * klLogged(out, ref, []int32{i}, nil, underflow)
			continue
		}
		if r == 0 { // an extra token: the term is the output's mass
			kl += out[i]
			continue
		}
		if out[i] == 0 && r < underflow { // underflowed, not dropped
			kl += r
			continue
		}
		s := (out[i] - r) / r
		x := 1 + s
		b := math.Float64bits(x)
		exp := int(b >> 52)
		if exp == 0 || exp >= 0x7ff { // 0, negative, subnormal, Inf, NaN
			kl += r * (s - math.Log(x))
			continue
		}
		mant := b & (1<<52 - 1)
		j := mant >> (52 - logTableBits)
		m := math.Float64frombits(mant | 1023<<52)
		u := (m - (1 + float64(j)/(1<<logTableBits))) * logInv[j]
		p := u * (1 - u*(0.5-u*(1.0/3-u*(0.25-u*0.2))))
		e := exp - 1023
		if j >= 1<<(logTableBits-1) {
			e++
		}
		kl += r * (s - (float64(e)*math.Ln2 + logTable[j] + p))
	}
	return kl
}
