package engine

import "math"

// BF16ToF32 widens a bfloat16 bit pattern to float32; it is exact.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds a float32 to the nearest bfloat16, ties to even, the way
// PyTorch's .to(torch.bfloat16) does. NaN stays NaN (quiet); ±Inf stays ±Inf.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep the sign, force a quiet payload
		return uint16(u>>16) | 0x0040
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F16ToF32 widens an IEEE binary16 bit pattern to float32; it is exact,
// subnormals included.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: value = man * 2^-24
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// F32ToF16 rounds a float32 to the nearest IEEE binary16, ties to even;
// values past the f16 range become ±Inf (as a kernel storing in f16 would),
// tiny ones become subnormals or ±0. NaN stays NaN.
func F32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	abs := u & 0x7fffffff
	switch {
	case abs > 0x7f800000:
		return sign | 0x7e00 | uint16(abs>>13)&0x1ff
	case abs >= 0x477ff000: // rounds to >= 65520: overflow to Inf
		return sign | 0x7c00
	case abs >= 0x38800000: // normal f16 range (>= 2^-14)
		// Re-bias the exponent, then round the 13 dropped mantissa bits to even.
		v := abs - (112 << 23)
		v += 0xfff + (v>>13)&1
		return sign | uint16(v>>13)
	case abs < 0x33000000: // below half the smallest subnormal (2^-25): zero
		return sign
	}
	// Subnormal result: shift the full mantissa into place and round to even.
	exp := abs >> 23
	man := abs&0x7fffff | 0x800000
	shift := 126 - exp // 14..24 for exp in [102, 112]
	half := uint32(1) << (shift - 1)
	rem := man & (1<<shift - 1)
	out := man >> shift
	if rem > half || (rem == half && out&1 == 1) {
		out++
	}
	return sign | uint16(out)
}

// RoundToDType rounds x to the nearest value representable in d (through
// float32, as a kernel that computes in float32 and stores in d does) and
// returns it widened back to float64. For F64 and integer dtypes it returns x.
func RoundToDType(x float64, d DType) float64 {
	switch d {
	case BF16:
		return float64(BF16ToF32(F32ToBF16(float32(x))))
	case F16:
		return float64(F16ToF32(F32ToF16(float32(x))))
	case F32:
		return float64(float32(x))
	}
	return x
}
