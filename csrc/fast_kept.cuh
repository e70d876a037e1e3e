// fast_kept.cuh: what the ops do with a row's kept tokens once the fast
// path has them (fastrow.cuh): engine/cpu's Sum over them, and a draw.
#pragma once

#include "fast_select.cuh"

namespace sv {

// sparse_sum is engine/cpu's Sum (rowops.cuh tree_sum) of a row of n
// tokens that is zero except at the kept tokens sidx/sw[0..kept) (ranked by
// index): adding zeros changes no float sum, so only the chunks that hold
// kept tokens get a leaf, each summed in its 8 lanes in index order.
__device__ inline float sparse_sum(int n, int kept, FastSmem &s) {
  const int chunks = (n + 255) / 256;
  int depth = 0;
  while ((1 << depth) < chunks) depth++;
  const int leaves = 1 << depth;
  for (int j = threadIdx.x; j < leaves; j += kFastBlock) s.tree[leaves + j] = 0.0f;
  __syncthreads();
  for (int r = threadIdx.x; r < kept; r += kFastBlock) {
    const int c = s.sidx[r] >> 8;
    if (r > 0 && (s.sidx[r - 1] >> 8) == c) continue;  // not the first of its chunk
    float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int e = r; e < kept && (s.sidx[e] >> 8) == c; e++) {
      const int l = s.sidx[e] & 7;
      a[l] = __fadd_rn(a[l], s.sw[e]);
    }
    const float sum = __fadd_rn(__fadd_rn(__fadd_rn(a[0], a[1]), __fadd_rn(a[2], a[3])),
                                __fadd_rn(__fadd_rn(a[4], a[5]), __fadd_rn(a[6], a[7])));
    s.tree[leaves + tree_leaf(c, chunks, depth)] = sum;
  }
  __syncthreads();
  // Up the tree three levels a barrier: node j is formed from its eight
  // descendants 8j..8j+7 with the same pairwise adds, so the same bits.
  for (int len = leaves; len > 1;) {
    const int step = len >= 8 ? 3 : len >= 4 ? 2 : 1;
    const int up = len >> step;
    for (int j = up + threadIdx.x; j < 2 * up; j += kFastBlock) {
      const float *d = s.tree + (j << step);
      float v;
      if (step == 3)
        v = __fadd_rn(__fadd_rn(__fadd_rn(d[0], d[1]), __fadd_rn(d[2], d[3])),
                      __fadd_rn(__fadd_rn(d[4], d[5]), __fadd_rn(d[6], d[7])));
      else if (step == 2)
        v = __fadd_rn(__fadd_rn(d[0], d[1]), __fadd_rn(d[2], d[3]));
      else
        v = __fadd_rn(d[0], d[1]);
      s.tree[j] = v;
    }
    __syncthreads();
    len = up;
  }
  const float sum = s.tree[1];
  __syncthreads();
  return sum;
}

// kept_pick draws from the kept tokens (ranked by index) with fixed-point
// weights val(r): the total S, t = pick(u, S), and the first rank whose
// inclusive prefix exceeds t; -1 when S = 0. Every thread gets the rank.
//
// At most kSmallSet kept tokens are drawn by one warp (lane l holds ranks
// 2l and 2l + 1), with a warp scan in place of the block scan.
template <typename Val>
__device__ int kept_pick(int kept, unsigned long long u, Val val, FastSmem &s) {
  if (kept <= kSmallSet) {
    if (threadIdx.x < 32) {
      const int r0 = 2 * (int)threadIdx.x;
      unsigned long long v[2];
#pragma unroll
      for (int q = 0; q < 2; q++) v[q] = r0 + q < kept ? val(r0 + q) : 0ull;
      const unsigned long long sum = v[0] + v[1], incl = warp_inclusive_scan(sum, SumU64());
      const unsigned long long total = __shfl_sync(0xffffffffu, incl, 31);
      int r = -1;
      if (total > 0) {
        const unsigned long long t = pick(u, total);
        unsigned long long before = incl - sum;
#pragma unroll
        for (int q = 0; q < 2; q++) {
          if (before <= t && t < before + v[q]) r = r0 + q;
          before += v[q];
        }
      }
      r = __reduce_max_sync(0xffffffffu, r);
      if (threadIdx.x == 0) s.pick = r;
    }
    __syncthreads();
    const int r = s.pick;
    __syncthreads();
    return r;
  }
  using ScanU = cub::BlockScan<unsigned long long, kFastBlock>;
  const int r0 = (int)threadIdx.x * kFastItems;
  unsigned long long v[kFastItems], sum = 0;
#pragma unroll
  for (int q = 0; q < kFastItems; q++) {
    v[q] = r0 + q < kept ? val(r0 + q) : 0ull;
    sum += v[q];
  }
  unsigned long long before, total;
  ScanU(s.tmp.su).ExclusiveSum(sum, before, total);
  if (threadIdx.x == 0) s.pick = -1;
  __syncthreads();
  if (total > 0) {
    const unsigned long long t = pick(u, total);
#pragma unroll
    for (int q = 0; q < kFastItems; q++) {
      if (before <= t && t < before + v[q]) s.pick = r0 + q;
      before += v[q];
    }
  }
  __syncthreads();
  const int r = s.pick;
  __syncthreads();
  return r;
}

}  // namespace sv
