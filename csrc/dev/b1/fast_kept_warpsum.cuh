// fast_kept.cuh: what the ops do with a row's kept tokens once the fast
// path has them (fastrow.cuh): engine/cpu's Sum over them, and a draw.
#pragma once

#include "fast_select.cuh"

namespace sv {

// chunk_leaf_sum is the leaf of tree_sum for the 256-token chunk that
// holds kept token r (ranked by index), r the first of its chunk: the
// chunk's kept weights summed in its 8 lanes in index order, then
// ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)), its other tokens adding +0.
__device__ __forceinline__ float chunk_leaf_sum(int r, int kept, const FastSmem &s) {
  const int c = s.sidx[r] >> 8;
  float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int e = r; e < kept && (s.sidx[e] >> 8) == c; e++) {
    const int l = s.sidx[e] & 7;
    a[l] = __fadd_rn(a[l], s.sw[e]);
  }
  return __fadd_rn(__fadd_rn(__fadd_rn(a[0], a[1]), __fadd_rn(a[2], a[3])),
                   __fadd_rn(__fadd_rn(a[4], a[5]), __fadd_rn(a[6], a[7])));
}

// sparse_sum_block is sparse_sum for any number of kept tokens: the tree
// of 2^depth leaves in shared memory, zeroed, the kept chunks' leaves
// written, then formed three levels a block barrier.
__device__ inline float sparse_sum_block(int n, int kept, FastSmem &s) {
  const int chunks = (n + 255) / 256;
  int depth = 0;
  while ((1 << depth) < chunks) depth++;
  const int leaves = 1 << depth;
  for (int j = threadIdx.x; j < leaves; j += kFastBlock) s.tree[leaves + j] = 0.0f;
  __syncthreads();
  for (int r = threadIdx.x; r < kept; r += kFastBlock) {
    const int c = s.sidx[r] >> 8;
    if (r > 0 && (s.sidx[r - 1] >> 8) == c) continue;  // not the first of its chunk
    s.tree[leaves + tree_leaf(c, chunks, depth)] = chunk_leaf_sum(r, kept, s);
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

// sparse_sum is engine/cpu's Sum (rowops.cuh tree_sum) of a row of n
// tokens that is zero except at the kept tokens sidx/sw[0..kept) (ranked by
// index): adding zeros changes no float sum, so only the chunks that hold
// kept tokens get a leaf (chunk_leaf_sum). Every thread gets the sum.
//
// Up to kSmallSet kept tokens, one warp forms only the nodes on the paths
// up from those leaves, with no shared tree to zero and no block barrier
// but the one that hands the sum on: tree_sum's tree is a binary tree over
// the leaves (tree_leaf), each node the rounded sum of its two children,
// and a leaf without kept tokens is +0 (w >= +0), so a node with one
// nonzero child is that child. Level by level, a live entry merges with
// the next live one when both lie under one parent: they are then
// siblings, left before right, since the kept tokens are ranked by index
// and tree_leaf keeps the chunks' order. Entry e (kept token e, if the
// first of its chunk) is lane e % 32, slot e / 32; the live entries are
// the bits of a 64-bit mask. More kept tokens take sparse_sum_block.
__device__ inline float sparse_sum(int n, int kept, FastSmem &s) {
  static_assert(kSmallSet <= 64, "a 64-bit mask of the entries");
  if (kept > kSmallSet) return sparse_sum_block(n, kept, s);
  const int chunks = (n + 255) / 256;
  int depth = 0;
  while ((1 << depth) < chunks) depth++;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float v[2];
    int leaf[2];
    bool live[2];
#pragma unroll
    for (int q = 0; q < 2; q++) {
      const int r = q * 32 + lane;
      v[q] = 0.0f;
      leaf[q] = 0;
      live[q] = false;
      if (r < kept) {
        const int c = s.sidx[r] >> 8;
        if (r == 0 || (s.sidx[r - 1] >> 8) != c) {  // the first of its chunk: the chunk's leaf
          v[q] = chunk_leaf_sum(r, kept, s);
          leaf[q] = tree_leaf(c, chunks, depth);
          live[q] = true;
        }
      }
    }
    unsigned long long alive = (unsigned long long)__ballot_sync(0xffffffffu, live[0]) |
                               (unsigned long long)__ballot_sync(0xffffffffu, live[1]) << 32;
    for (int L = 0; L < depth && __popcll(alive) > 1; L++) {
      bool left[2];
#pragma unroll
      for (int q = 0; q < 2; q++) {
        const int e = q * 32 + lane;
        // The next live entry after e (-1: none); every lane shuffles.
        const unsigned long long after = alive & ~((2ull << e) - 1ull);
        const int nx = after ? __ffsll((long long)after) - 1 : -1;
        const int src = nx < 0 ? lane : nx & 31;
        const float v0 = __shfl_sync(0xffffffffu, v[0], src), v1 = __shfl_sync(0xffffffffu, v[1], src);
        const int l0 = __shfl_sync(0xffffffffu, leaf[0], src), l1 = __shfl_sync(0xffffffffu, leaf[1], src);
        const float vn = nx >= 32 ? v1 : v0;
        const int ln = nx >= 32 ? l1 : l0;
        left[q] = ((alive >> e) & 1ull) && nx >= 0 && (leaf[q] >> (L + 1)) == (ln >> (L + 1));
        if (left[q]) v[q] = __fadd_rn(v[q], vn);
      }
      const unsigned long long lefts = (unsigned long long)__ballot_sync(0xffffffffu, left[0]) |
                                       (unsigned long long)__ballot_sync(0xffffffffu, left[1]) << 32;
      // A right sibling dies: a live entry whose previous live entry merged.
      bool dead[2];
#pragma unroll
      for (int q = 0; q < 2; q++) {
        const int e = q * 32 + lane;
        const unsigned long long before = alive & ((1ull << e) - 1ull);
        dead[q] = ((alive >> e) & 1ull) && before && ((lefts >> (63 - __clzll((long long)before))) & 1ull);
      }
      alive &= ~((unsigned long long)__ballot_sync(0xffffffffu, dead[0]) |
                 (unsigned long long)__ballot_sync(0xffffffffu, dead[1]) << 32);
    }
    // One entry is left (or none: kept = 0, sum +0): the root.
    const int root = alive ? __ffsll((long long)alive) - 1 : 0;
    const float r0 = __shfl_sync(0xffffffffu, v[0], root & 31), r1 = __shfl_sync(0xffffffffu, v[1], root & 31);
    if (lane == 0) s.tree[1] = root >= 32 ? r1 : r0;
  }
  __syncthreads();
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
