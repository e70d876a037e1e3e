// philox.cuh mirrors engine/philox: Philox-4x32-10, the counter scheme, and
// the conversions of words to uniforms and fixed-point weights. A change
// here is a change there; engine/cuda's tests check both draw the same.
#pragma once

#include <stdint.h>

namespace sv {

// philox_block runs Philox-4x32-10 on counter c with key (k0, k1).
__device__ __forceinline__ uint4 philox_block(uint32_t k0, uint32_t k1, uint4 c) {
#pragma unroll
  for (int i = 0; i < 10; i++) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
    c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// Stream is the counter stream of one (seed, offset, row, draw):
// key = (lo32(seed), hi32(seed)), ctr(b) = (lo32(o+b), hi32(o+b), row, draw).
struct Stream {
  uint32_t k0, k1;
  uint64_t offset;
  uint32_t row, draw;

  __device__ __forceinline__ Stream(uint64_t seed, uint64_t off, int r, int d)
      : k0((uint32_t)seed), k1((uint32_t)(seed >> 32)), offset(off),
        row((uint32_t)r), draw((uint32_t)d) {}

  __device__ __forceinline__ uint4 block(uint64_t b) const {
    const uint64_t c = offset + b;
    return philox_block(k0, k1, make_uint4((uint32_t)c, (uint32_t)(c >> 32), row, draw));
  }
  // u64 joins words 0 (high) and 1 of block b.
  __device__ __forceinline__ uint64_t u64(uint64_t b) const {
    const uint4 w = block(b);
    return ((uint64_t)w.x << 32) | (uint64_t)w.y;
  }
};

// u01 maps a word to [0, 1) on a grid of 2^-24 (exact in float32).
__device__ __forceinline__ float u01(uint32_t w) {
  return __fmul_rn((float)(w >> 8), 1.0f / 16777216.0f);
}

// open_u01 maps a word to (0, 1) on a grid of 2^-23, offset by half a step.
__device__ __forceinline__ float open_u01(uint32_t w) {
  return __fmul_rn(__fadd_rn((float)(w >> 9), 0.5f), 1.0f / 8388608.0f);
}

constexpr uint64_t kWeightScale = 1ull << 40;

// weight converts a probability or weight to fixed point: p * 2^40
// truncated; NaN and p <= 0 give 0, p >= 1 gives 2^40.
// Written without branches: fmaxf takes 0 over NaN and over p <= 0, fminf
// caps at 1, and 1 * 2^40 converts to 2^40 exactly.
__device__ __forceinline__ uint64_t weight(float p) {
  return __float2ull_rz(__fmul_rn(fminf(fmaxf(p, 0.0f), 1.0f), 1099511627776.0f));
}

// pick maps a 64-bit uniform onto [0, total).
__device__ __forceinline__ uint64_t pick(uint64_t u, uint64_t total) {
  return __umul64hi(u, total);
}

}  // namespace sv
