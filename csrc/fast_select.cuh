// fast_select.cuh: the fast path's selection on order keys (fastrow.cuh):
// floats mapped to unsigned keys that order as the floats do, and the k-th
// largest of a buffer of them by byte-wide radix passes over a histogram,
// with no sort and no exp.
#pragma once

#include "fast_layout.cuh"

namespace sv {

// KeyPasses is how many byte-wide radix passes order a dtype's keys: a
// bf16 value widened to float32 has 16 low bits that the sign alone fixes,
// an f16 value 13.
template <typename T>
struct KeyPasses {
  static constexpr int value = sizeof(T) == 4 ? 4 : (std::is_same<T, __half>::value ? 3 : 2);
};

// order_key maps a float (not NaN) to an unsigned that orders as the float
// does; -0 and +0 share the key of +0.
__device__ __forceinline__ unsigned order_key(float v) {
  const unsigned b = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_value(unsigned k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// below returns the next value of the input dtype below v (v finite or
// +Inf, not -Inf), skipping -0 when v is 0.
__device__ __forceinline__ float below(float v, const float *) {
  float p = key_value(order_key(v) - 1);
  if (p == v) p = key_value(order_key(v) - 2);
  return p;
}
__device__ __forceinline__ float below(float v, const __half *) {
  unsigned short k = key16(__half_as_ushort(__float2half_rn(v == 0.0f ? 0.0f : v)));
  float p = __half2float(__ushort_as_half(unkey16((unsigned short)(k - 1))));
  if (p == v) p = __half2float(__ushort_as_half(unkey16((unsigned short)(k - 2))));
  return p;
}
__device__ __forceinline__ float below(float v, const __nv_bfloat16 *) {
  unsigned short k = key16(__bfloat16_as_ushort(__float2bfloat16_rn(v == 0.0f ? 0.0f : v)));
  float p = __bfloat162float(__ushort_as_bfloat16(unkey16((unsigned short)(k - 1))));
  if (p == v) p = __bfloat162float(__ushort_as_bfloat16(unkey16((unsigned short)(k - 2))));
  return p;
}

struct MaxU64 {
  __device__ __forceinline__ unsigned long long operator()(unsigned long long a, unsigned long long b) const {
    return a > b ? a : b;
  }
};

// pick_bucket is one radix pass over keys[0..n): bucket(key) is a key's
// bucket, 0..255 (256: not counted). It returns the bucket that holds the
// need-th largest counted key and leaves in need its rank within that
// bucket. Candidates often share their top byte, and 32 lanes adding to one
// counter serialise: a warp whose keys all fall in one bucket adds once.
// With counted, s.hist already holds the counts (cluster_push).
template <typename Bucket>
__device__ int pick_bucket(const unsigned *keys, int n, int &need, Bucket bucket_of, FastSmem &s,
                           bool counted = false) {
  using Scan = cub::BlockScan<int, kFastBlock>;
  const unsigned lane = threadIdx.x & 31;
  if (!counted) {
    for (int d = threadIdx.x; d < 256; d += kFastBlock) s.hist[d] = 0;
    __syncthreads();
    for (int base = 0; base < n; base += kFastBlock) {
      const int j = base + (int)threadIdx.x;
      const unsigned bucket = j < n ? bucket_of(keys[j]) : 256u;
      const unsigned valid = __ballot_sync(0xffffffffu, bucket < 256);
      if (valid) {
        const int first = __ffs(valid) - 1;
        const unsigned lead = __shfl_sync(0xffffffffu, bucket, first);
        if (__ballot_sync(0xffffffffu, bucket == lead) == valid) {
          if (lane == (unsigned)first) atomicAdd(&s.hist[lead], (unsigned)__popc(valid));
        } else if (bucket < 256) {
          atomicAdd(&s.hist[bucket], 1u);
        }
      }
    }
    __syncthreads();
  }
  // Thread t holds bucket 255 - t: an inclusive scan counts from the top.
  const int c = threadIdx.x < 256 ? (int)s.hist[255 - threadIdx.x] : 0;
  int incl;
  Scan(s.tmp.si).InclusiveSum(c, incl);
  if (threadIdx.x < 256 && c > 0 && incl >= need && incl - c < need) {
    s.pick = 255 - (int)threadIdx.x;
    s.need = need - (incl - c);
  }
  __syncthreads();
  const int pick = s.pick;
  need = s.need;
  __syncthreads();
  return pick;
}

// fill_key completes a key whose top PASSES bytes are known: the bytes
// below are all zero for keys of values >= +0, all ones below (KeyPasses).
template <int PASSES>
__device__ __forceinline__ unsigned fill_key(unsigned top) {
  return PASSES < 4 ? top | ((top & 0x80000000u) ? 0u : (0xffffffffu >> (8 * (PASSES & 3)))) : top;
}

// kth_key returns the k-th largest (1-based, k <= n) of keys[0..n): a
// byte-wide radix select over the top PASSES bytes (KeyPasses: the bytes
// below are fixed by the sign).
template <int PASSES>
__device__ unsigned kth_key(const unsigned *keys, int n, int k, FastSmem &s) {
  unsigned prefix = 0, mask = 0;
  int need = k;
  for (int shift = 24; shift >= 32 - 8 * PASSES; shift -= 8) {
    const int pick = pick_bucket(keys, n, need, [&](unsigned key) {
      return (key & mask) == prefix ? (key >> shift) & 0xffu : 256u;
    }, s);
    prefix |= (unsigned)pick << shift;
    mask |= 0xffu << shift;
  }
  return fill_key<PASSES>(prefix);
}

// kth_key_span is kth_key in one pass for keys whose top PASSES bytes
// (key >> (32 - 8 * PASSES)) all lie in [lo, lo + 256), as the merged
// candidates of a row often do (they lie between the largest chunk theta
// and the row's max: for bf16 logits, a few hundred values at most). With
// counted, s.hist already holds their counts by bucket (cluster_push).
template <int PASSES>
__device__ unsigned kth_key_span(const unsigned *keys, int n, int k, unsigned lo, FastSmem &s, bool counted) {
  constexpr int kShift = 32 - 8 * PASSES;
  int need = k;
  const int pick = pick_bucket(keys, n, need, [&](unsigned key) { return (key >> kShift) - lo; }, s, counted);
  return fill_key<PASSES>((lo + (unsigned)pick) << kShift);
}

// keep_at_least moves the entries of keys/idx[0..n) whose key is >= lo to
// the front (their order is lost) and returns how many there are. A kept
// entry never lands past where it was read, and a tile is read whole
// before it is written, so the compaction is in place.
__device__ inline int keep_at_least(unsigned *keys, int *idx, int n, unsigned lo, FastSmem &s) {
  using Scan = cub::BlockScan<int, kFastBlock>;
  constexpr int ITEMS = 4;
  int carry = 0;
  for (int base = 0; base < n; base += kFastBlock * ITEMS) {
    const int j0 = base + (int)threadIdx.x * ITEMS;
    unsigned key[ITEMS];
    int id[ITEMS], keep = 0;
#pragma unroll
    for (int q = 0; q < ITEMS; q++) {
      key[q] = 0;
      id[q] = 0;
      if (j0 + q < n) {
        key[q] = keys[j0 + q];
        id[q] = idx[j0 + q];
        keep += key[q] >= lo;
      }
    }
    int pos, total;
    Scan(s.tmp.si).ExclusiveSum(keep, pos, total);
    __syncthreads();
    pos += carry;
#pragma unroll
    for (int q = 0; q < ITEMS; q++)
      if (j0 + q < n && key[q] >= lo) {
        keys[pos] = key[q];
        idx[pos] = id[q];
        pos++;
      }
    carry += total;
    __syncthreads();
  }
  return carry;
}

// cut_to_top_k cuts the buffer to its k largest keys (ties included) and
// raises theta to the k-th largest, or leaves it when it holds k or fewer.
template <int PASSES>
__device__ void cut_to_top_k(int k, FastSmem &s) {
  const int n = s.count;
  if (n <= k) return;
  const unsigned kth = kth_key<PASSES>(s.keys, n, k, s);
  const int kept = keep_at_least(s.keys, s.idx, n, kth, s);
  if (threadIdx.x == 0) {
    s.count = kept;
    s.theta = key_value(kth);
  }
  __syncthreads();
}

// warp_inclusive_scan is the inclusive scan of 64-bit values over the
// warp's lanes with op (every lane takes part): lane l gets
// v_0 op ... op v_l; lane 31 holds the whole warp's.
template <typename Op>
__device__ __forceinline__ unsigned long long warp_inclusive_scan(unsigned long long v, Op op) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long t = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v = op(v, t);
  }
  return v;
}
struct SumU64 {
  __device__ __forceinline__ unsigned long long operator()(unsigned long long a, unsigned long long b) const {
    return a + b;
  }
};

}  // namespace sv
