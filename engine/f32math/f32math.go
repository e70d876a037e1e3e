// Package f32math holds float32 exp and log written out of plain IEEE
// operations (each product and sum rounded on its own, no fused multiply-add,
// no library call), so that engine/cpu and the CUDA kernels (csrc/f32math.cuh,
// which uses __fmul_rn and __fadd_rn for the same reason) compute bit-identical
// weights and Gumbel noise, and hence draw the same tokens for the same seed.
//
// The polynomials are Cephes' expf and logf (S. L. Moshier), accurate to about
// 2 ulp over the ranges used here. These functions are for kernels' float32
// arithmetic; engine/ref never uses them.
//
// Every intermediate below is wrapped in an explicit float32 conversion: Go
// may fuse x*y+z into one rounding unless a conversion separates them.
package f32math

import "math"

const (
	log2e  = 1.44269504088896341
	expC1  = 0.693359375    // ln 2 high part: 355/512, so n*expC1 is exact
	expC2  = -2.12194440e-4 // ln 2 - expC1
	expMax = 88.7228394     // ln(MaxFloat32)
	expMin = -103.972077    // below ln(smallest subnormal / 2): result 0
	sqrtH  = 0.707106781186547524
)

// Exp returns e^x in float32. Exp(0) is exactly 1, Exp(-Inf) is 0, and
// Exp(NaN) is NaN.
func Exp(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > expMax:
		return float32(math.Inf(1))
	case x < expMin:
		return 0
	}
	n := float32(math.Floor(float64(float32(float32(x*log2e) + 0.5))))
	r := float32(x - float32(n*expC1))
	r = float32(r - float32(n*expC2))
	z := float32(r * r)
	y := float32(float32(1.9875691500e-4*r) + 1.3981999507e-3)
	y = float32(float32(y*r) + 8.3334519073e-3)
	y = float32(float32(y*r) + 4.1665795894e-2)
	y = float32(float32(y*r) + 1.6666665459e-1)
	y = float32(float32(y*r) + 5.0000001201e-1)
	y = float32(float32(y*z) + r)
	y = float32(y + 1)
	return scale(y, int(n))
}

// scale returns y * 2^n with one rounding, for y in [0.5, 2) and n in [-151, 129].
func scale(y float32, n int) float32 {
	switch {
	case n > 127:
		return float32(float32(y*pow2(127)) * pow2(n-127))
	case n < -126:
		return float32(float32(y*pow2(n+64)) * pow2(-64))
	}
	return float32(y * pow2(n))
}

// pow2 returns 2^n for n in [-126, 127].
func pow2(n int) float32 { return math.Float32frombits(uint32(n+127) << 23) }

// Log returns the natural logarithm of x in float32: -Inf at 0, NaN below 0,
// +Inf at +Inf.
func Log(x float32) float32 {
	switch {
	case x != x || x < 0:
		return float32(math.NaN())
	case x == 0:
		return float32(math.Inf(-1))
	case x > math.MaxFloat32:
		return x
	}
	bits := math.Float32bits(x)
	e := 0
	if bits < 0x00800000 { // subnormal: bring into the normal range first
		x = float32(x * (1 << 23))
		bits = math.Float32bits(x)
		e = -23
	}
	e += int(bits>>23) - 126
	m := math.Float32frombits(bits&0x807fffff | 0x3f000000) // in [0.5, 1)
	if m < sqrtH {
		e--
		m = float32(float32(m+m) - 1)
	} else {
		m = float32(m - 1)
	}
	z := float32(m * m)
	y := float32(float32(7.0376836292e-2*m) - 1.1514610310e-1)
	y = float32(float32(y*m) + 1.1676998740e-1)
	y = float32(float32(y*m) - 1.2420140846e-1)
	y = float32(float32(y*m) + 1.4249322787e-1)
	y = float32(float32(y*m) - 1.6668057665e-1)
	y = float32(float32(y*m) + 2.0000714765e-1)
	y = float32(float32(y*m) - 2.4999993993e-1)
	y = float32(float32(y*m) + 3.3333331174e-1)
	y = float32(float32(y*m) * z)
	fe := float32(e)
	if e != 0 {
		y = float32(y + float32(-2.12194440e-4*fe))
	}
	y = float32(y + float32(-0.5*z))
	r := float32(m + y)
	if e != 0 {
		r = float32(r + float32(0.693359375*fe))
	}
	return r
}
