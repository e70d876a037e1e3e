// sparse_sum_warp.cuh (dev, b1 variant "warpsum"): fast_kept.cuh's
// sparse_sum with the tree walked by one warp over the nonzero leaves
// alone, for at most kSmallSet kept tokens. b1_variants.sh splices it into
// a copy of fast_kept.cuh in place of sparse_sum's head; the product's
// block version stays, as sparse_sum_block, for more kept tokens.
//
// Why the same bits: the tree of tree_sum is a binary tree over the leaves
// (tree_leaf), each node the rounded sum of its two children, and a leaf
// with no kept token is +0, which changes no sum of weights (w >= +0). So
// a node with one nonzero child is that child, and only the nodes on the
// paths up from the nonzero leaves need forming: level by level, an entry
// merges with the next live entry when both lie under the same parent
// (they are then siblings, left before right: the kept tokens are ranked
// by index and tree_leaf keeps the chunks' order). Entry e (the e-th kept
// token by index, if it is the first of its 256-token chunk) is lane
// e % 32, slot e / 32; live entries are bits of a 64-bit mask.
// What it saves against the block version: the 2^depth leaves are never
// zeroed, and no step waits on a block barrier.
#pragma once

namespace sv {

__device__ inline float sparse_sum_block(int n, int kept, FastSmem &s);

__device__ inline float sparse_sum(int n, int kept, FastSmem &s) {
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
          float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
          for (int e = r; e < kept && (s.sidx[e] >> 8) == c; e++) {
            const int l = s.sidx[e] & 7;
            a[l] = __fadd_rn(a[l], s.sw[e]);
          }
          v[q] = __fadd_rn(__fadd_rn(__fadd_rn(a[0], a[1]), __fadd_rn(a[2], a[3])),
                           __fadd_rn(__fadd_rn(a[4], a[5]), __fadd_rn(a[6], a[7])));
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

}  // namespace sv
