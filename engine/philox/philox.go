// Package philox is the random-number contract between engine/cpu and the CUDA
// kernels in csrc/: Philox-4x32-10 (Salmon et al., "Parallel random numbers:
// as easy as 1, 2, 3", 2011; the generator behind cuRAND's Philox and
// Random123), the counter scheme that says which words each draw consumes, and
// the conversions of words to uniforms and to fixed-point probability weights.
// csrc/philox.cuh mirrors this file; a change here is a change there.
//
// # Counter scheme
//
// For a row r with seed s and offset o, draw d (the d-th independent draw of
// the row, or trial d of spec_verify) reads the blocks of the stream
//
//	key = (lo32(s), hi32(s))
//	ctr(b) = (lo32(o + b), hi32(o + b), r, d)
//
// Block b gives four words. What each sampler reads:
//
//   - inverse CDF: block 0, U64 of words 0 and 1.
//   - rejection (top-k/top-p/min-p): round j reads block j, U64 of words 0 and 1.
//   - Gumbel-max: token i reads word i%4 of block i/4, as OpenU01.
//   - spec_verify, trial d: position i's acceptance test reads U01 of word 0 of
//     block 2i; the residual draw at position i (or the bonus draw, i = K)
//     reads U64 of words 0 and 1 of block 2i+1.
//   - spec_tree_verify, trial d: the test of node c (c >= 1) reads U01 of
//     word 0 of block 2(c-1); the draw where the walk stops at node n reads
//     U64 of block 2n+1. A chain in node order reads spec_verify's blocks.
//
// The offset advances the counter the way vLLM and FlashInfer pass one: two
// calls with offsets that differ by more than the blocks a call consumes draw
// independent numbers.
//
// # Fixed-point weights
//
// Inverse-CDF sampling sums probabilities. Float sums depend on the order of
// addition, which differs between a sequential loop and a GPU scan, so a draw
// near a boundary could land on different tokens. Weights are therefore
// converted to fixed point (Weight: p * 2^40, truncated) and summed as
// integers, which is exact in any order; Pick maps a 64-bit uniform onto the
// total with a 64x64 high multiply. Tokens below 2^-40 of the scale are never
// drawn; their mass (under 2^-40 each, under 1.4e-7 for 151936 tokens) is far
// below what 10^6 draws can detect.
package philox

import "math/bits"

// Philox-4x32 round multipliers and Weyl key increments.
const (
	m0 = 0xD2511F53
	m1 = 0xCD9E8D57
	w0 = 0x9E3779B9
	w1 = 0xBB67AE85
)

// Block runs Philox-4x32-10 on one counter with one key.
func Block(key [2]uint32, ctr [4]uint32) [4]uint32 {
	k0, k1 := key[0], key[1]
	c := ctr
	for i := 0; i < 10; i++ {
		hi0, lo0 := bits.Mul32(m0, c[0])
		hi1, lo1 := bits.Mul32(m1, c[2])
		c = [4]uint32{hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0}
		k0 += w0
		k1 += w1
	}
	return c
}

// Stream is the counter stream of one (seed, offset, row, draw).
type Stream struct {
	key    [2]uint32
	offset uint64
	row    uint32
	draw   uint32
}

// NewStream returns the stream that draw d of row r reads for seed and offset.
func NewStream(seed, offset uint64, row, draw int) Stream {
	return Stream{
		key:    [2]uint32{uint32(seed), uint32(seed >> 32)},
		offset: offset,
		row:    uint32(row),
		draw:   uint32(draw),
	}
}

// Block returns the four words of block b of the stream.
func (s Stream) Block(b uint64) [4]uint32 {
	c := s.offset + b
	return Block(s.key, [4]uint32{uint32(c), uint32(c >> 32), s.row, s.draw})
}

// U64 returns block b's words 0 and 1 as one 64-bit uniform (word 0 high).
func (s Stream) U64(b uint64) uint64 {
	w := s.Block(b)
	return U64(w[0], w[1])
}

// U64 joins two words into a 64-bit uniform, hi first.
func U64(hi, lo uint32) uint64 { return uint64(hi)<<32 | uint64(lo) }

// U01 maps a word to a float32 uniform in [0, 1) on a grid of 2^-24; the
// value is exact in float32.
func U01(w uint32) float32 { return float32(w>>8) * (1.0 / (1 << 24)) }

// OpenU01 maps a word to a float32 uniform in (0, 1) on a grid of 2^-23,
// offset by half a step so that neither 0 nor 1 occurs (logs stay finite);
// the value is exact in float32.
func OpenU01(w uint32) float32 { return (float32(w>>9) + 0.5) * (1.0 / (1 << 23)) }

// WeightScale is the fixed-point scale of Weight: 1.0 maps to 2^40.
const WeightScale = 1 << 40

// Weight converts a probability (or an unnormalised weight in [0, 1]) to fixed
// point: p * 2^40 truncated. NaN and p <= 0 give 0; p >= 1 gives 2^40.
func Weight(p float32) uint64 {
	if !(p > 0) {
		return 0
	}
	if p >= 1 {
		return WeightScale
	}
	return uint64(p * WeightScale) // exact scaling, then truncation
}

// Pick maps a 64-bit uniform onto [0, total): the draw is the first token
// whose inclusive prefix sum of weights exceeds the returned target.
func Pick(u, total uint64) uint64 {
	hi, _ := bits.Mul64(u, total)
	return hi
}
