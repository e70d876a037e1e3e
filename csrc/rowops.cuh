// rowops.cuh: the block-wide row machinery that renorm, sample and
// spec_verify share, written so that every decision equals engine/cpu's bit
// for bit: the row statistics, the float32 Sum in engine/cpu's exact order,
// the radix descent that finds filter thresholds without sorting, the
// filter predicate, and the search that inverts a fixed-point CDF.
//
// One block owns one row. A "source" gives the weight w_i of token i: XSource
// recomputes it from the logits, WSource reads a 16-byte-aligned row the
// block filled earlier. Both offer w(i) for scattered reads and each(n, f)
// for whole-row passes, which issue 16-byte loads, several per thread,
// before the first use: a pass that loads one element at a time and waits
// for it is bound by memory latency, not bandwidth.
#pragma once

#include "common.cuh"
#include "f32math.cuh"
#include "philox.cuh"

namespace sv {

// kMaxExactVocab bounds the vocabularies of the exact ops: the Sum tree
// keeps one leaf per 256-token chunk in shared memory.
constexpr int kMaxExactVocab = 1 << 19;
constexpr int kMaxLeaves = kMaxExactVocab / 256;

// wstride is the row stride (in floats) of weight buffers: rows start on
// 256-byte boundaries so that float4 loads are aligned.
__host__ __device__ __forceinline__ size_t wstride(int n) { return ((size_t)n + 63) & ~(size_t)63; }

// kHistCopies is the number of copies of each radix histogram: lane l adds
// into copy l % kHistCopies, so at most 32 / kHistCopies lanes of a warp
// contend for one counter (a row's weights share their top byte, and 32
// lanes adding to one shared counter serialise).
constexpr int kHistCopies = 8;

template <int BLOCK>
struct RowShared {
  static_assert(BLOCK >= 256 && BLOCK % 32 == 0, "row kernels need >= 256 threads");
  typename Reduce<BLOCK>::Shared red;
  unsigned int hist_count[256 * kHistCopies];  // [bucket][copy]
  unsigned long long hist_mass[256 * kHistCopies];
  float tree[2 * kMaxLeaves];
  int chosen, top, found, seg;
  unsigned long long sel_count, sel_mass, rem;
};

// Flagged is one block's list of the slots it serves, in shared memory.
template <int BLOCK>
struct Flagged {
  int slot[BLOCK];
  int n;
};

// flagged_slots fills f with the slots of this block (blockIdx.x + j *
// gridDim.x, j < BLOCK; flagged_grid makes that all of them) that todo
// flags, and returns how many to every thread. Every flag is read at once:
// a launch where a fast kernel served every slot costs one load per block,
// not one wave of blocks per resident set.
template <int BLOCK>
__device__ int flagged_slots(const int *todo, int slots, Flagged<BLOCK> &f) {
  if (threadIdx.x == 0) f.n = 0;
  __syncthreads();
  const long long slot = blockIdx.x + (long long)threadIdx.x * gridDim.x;
  if (slot < slots && todo[slot]) f.slot[atomicAdd(&f.n, 1)] = (int)slot;
  __syncthreads();
  return f.n;
}

// RowStat is what one pass over the logits learns: the maximum, the first
// index of the maximum, and whether the row has a distribution (no NaN, no
// +Inf, not all -Inf).
struct RowStat {
  float m;
  int arg;
  bool valid;
};

// row_stat: the row's maximum, its first index and whether the row has a
// distribution (scan_max in common.cuh: NaN carried by the vector max; +Inf
// read off the maximum).
template <typename T, int BLOCK>
__device__ RowStat row_stat(const T *x, int n, RowShared<BLOCK> &sh) {
  ArgBest best{-kInf, 0x7fffffff};
  int nan = 0;
  scan_max<T, BLOCK, 4>(x, 0, n, best, nan);
  nan = Reduce<BLOCK>::any(sh.red, nan);
  best = Reduce<BLOCK>::argbest(sh.red, best);
  RowStat st;
  st.m = best.v;
  st.arg = best.i;
  st.valid = !nan && best.v > -kInf && best.v != kInf;
  return st;
}

// bits_f32 widens the 16-bit pattern b of T to float.
__device__ __forceinline__ float bits_f32(unsigned b, const __half *) {
  return __half2float(__ushort_as_half((unsigned short)b));
}
__device__ __forceinline__ float bits_f32(unsigned b, const __nv_bfloat16 *) {
  return __bfloat162float(__ushort_as_bfloat16((unsigned short)b));
}

// key16 maps a 16-bit float pattern (f16 or bf16, not NaN) to an unsigned
// that orders as the value does (-0 just below +0); unkey16 inverts it.
__device__ __forceinline__ unsigned short key16(unsigned short b) {
  return (b & 0x8000u) ? (unsigned short)~b : (unsigned short)(b | 0x8000u);
}
__device__ __forceinline__ unsigned short unkey16(unsigned short k) {
  return (k & 0x8000u) ? (unsigned short)(k & 0x7fffu) : (unsigned short)~k;
}

// key16x2 is key16 of both 16-bit halves of w: each half is flipped
// whole where its sign bit is set (the sign times 0x7fff, plus the 0x8000
// every half flips), else only in its top bit.
__host__ __device__ __forceinline__ unsigned key16x2(unsigned w) {
  return w ^ (((w & 0x80008000u) >> 15) * 0x7fffu + 0x80008000u);
}

// above16x2 sets bit 15 where the low half of k exceeds the low half of t,
// bit 31 where the high halves do (unsigned 16-bit numbers), and clears
// every other bit: two comparisons in a few word operations. Bit 15 of a
// half of d is whether t's low 15 bits are at least k's (the top bit set
// in t keeps the borrow inside the half); the top bits decide the rest.
__host__ __device__ __forceinline__ unsigned above16x2(unsigned k, unsigned t) {
  const unsigned d = (t | 0x80008000u) - (k & 0x7fff7fffu);
  return ~((t & ~k) | (~(t ^ k) & d)) & 0x80008000u;
}

// Filter is the survivors of top-k, top-p and min-p as thresholds on w:
// token i survives iff kept(i, w_i). Under lowest_index, tokens equal to the
// top-k threshold survive up to index tie_cut.
struct Filter {
  bool topk, topp;
  float tau_k;
  int tie_cut;
  float cut_p;
  float min_p;
  __device__ __forceinline__ bool kept(int i, float w) const {
    if (topk && (w < tau_k || (w == tau_k && i > tie_cut))) return false;
    if (topp && w < cut_p) return false;
    return w >= min_p;
  }
  __device__ __forceinline__ bool topk_kept(int i, float w) const {
    return !topk || !(w < tau_k || (w == tau_k && i > tie_cut));
  }
};

// masked applies an optional filter to a weight.
__device__ __forceinline__ float masked(const Filter *f, int i, float w) {
  return f && !f->kept(i, w) ? 0.0f : w;
}

// ExactWeight is XSource's weight of a token of logit v: its exp.
struct ExactWeight {
  __device__ __forceinline__ float operator()(float v, float m, float t) const { return weight_of(v, m, t); }
};

// XSource recomputes w_i = Exp((x_i - m) / t) from the logits, each weight
// by Weight: ExactWeight, or ptable.cuh's TableWeight (the same bits from a
// table, for bf16 rows).
template <typename T, typename Weight = ExactWeight>
struct XSource {
  const T *x;
  float m, t;
  Weight weigh;
  __device__ __forceinline__ float operator()(int i) const { return weigh(load_f32(x, i), m, t); }

  template <int BLOCK, typename F>
  __device__ __forceinline__ void each(int n, F &&f) const {
    const float m_ = m, t_ = t;
    for_each_vec<T, BLOCK, 4>(x, 0, n, [&](int i, float v) { f(i, weigh(v, m_, t_)); });
  }

  // chunk_sum8 adds the (filtered) weights of chunk [base, base + len) to
  // the 8 lane sums, element e to lane e % 8, in index order.
  __device__ __forceinline__ void chunk_sum8(int base, int len, const Filter *f, float (&a)[8]) const {
    constexpr int N = 16 / sizeof(T);
    if (len == 256 && (reinterpret_cast<uintptr_t>(x) & 15) == 0) {
      const uint4 *v = reinterpret_cast<const uint4 *>(x + base);
#pragma unroll 4
      for (int j = 0; j < 256 / N; j += 8 / N) {
        uint4 u[8 / N];
#pragma unroll
        for (int h = 0; h < 8 / N; h++) u[h] = __ldg(v + j + h);
#pragma unroll
        for (int h = 0; h < 8 / N; h++) {
          const T *e = reinterpret_cast<const T *>(&u[h]);
#pragma unroll
          for (int q = 0; q < N; q++) {
            const int l = h * N + q;
            a[l] = __fadd_rn(a[l], masked(f, base + (j + h) * N + q, weigh(to_f32(e[q]), m, t)));
          }
        }
      }
      return;
    }
    for (int e0 = 0; e0 < len; e0 += 8) {
#pragma unroll
      for (int l = 0; l < 8; l++)
        if (e0 + l < len) a[l] = __fadd_rn(a[l], masked(f, base + e0 + l, (*this)(base + e0 + l)));
    }
  }
};

// WSource reads weights from a 16-byte-aligned buffer row written earlier
// in the same kernel (so plain loads, not the read-only path).
struct WSource {
  const float *w;
  __device__ __forceinline__ float operator()(int i) const { return w[i]; }

  template <int BLOCK, typename F>
  __device__ __forceinline__ void each(int n, F &&f) const {
    constexpr int UNROLL = 4;
    const int nvec = n / 4;
    const float4 *v = reinterpret_cast<const float4 *>(w);
    for (int j0 = threadIdx.x; j0 < nvec; j0 += BLOCK * UNROLL) {
      float4 u[UNROLL];
#pragma unroll
      for (int k = 0; k < UNROLL; k++)
        if (j0 + k * BLOCK < nvec) u[k] = v[j0 + k * BLOCK];
#pragma unroll
      for (int k = 0; k < UNROLL; k++) {
        const int j = j0 + k * BLOCK;
        if (j < nvec) {
          f(4 * j, u[k].x);
          f(4 * j + 1, u[k].y);
          f(4 * j + 2, u[k].z);
          f(4 * j + 3, u[k].w);
        }
      }
    }
    for (int i = 4 * nvec + threadIdx.x; i < n; i += BLOCK) f(i, w[i]);
  }

  __device__ __forceinline__ void chunk_sum8(int base, int len, const Filter *f, float (&a)[8]) const {
    if (len == 256) {
      const float4 *v = reinterpret_cast<const float4 *>(w + base);
#pragma unroll 4
      for (int j = 0; j < 64; j += 2) {
        const float4 u0 = v[j], u1 = v[j + 1];
        const int i = base + 4 * j;
        a[0] = __fadd_rn(a[0], masked(f, i, u0.x));
        a[1] = __fadd_rn(a[1], masked(f, i + 1, u0.y));
        a[2] = __fadd_rn(a[2], masked(f, i + 2, u0.z));
        a[3] = __fadd_rn(a[3], masked(f, i + 3, u0.w));
        a[4] = __fadd_rn(a[4], masked(f, i + 4, u1.x));
        a[5] = __fadd_rn(a[5], masked(f, i + 5, u1.y));
        a[6] = __fadd_rn(a[6], masked(f, i + 6, u1.z));
        a[7] = __fadd_rn(a[7], masked(f, i + 7, u1.w));
      }
      return;
    }
    for (int e0 = 0; e0 < len; e0 += 8) {
#pragma unroll
      for (int l = 0; l < 8; l++)
        if (e0 + l < len) a[l] = __fadd_rn(a[l], masked(f, base + e0 + l, w[base + e0 + l]));
    }
  }
};

// fill_weights writes the weights of x into wrow (one exp per token).
template <typename T, int BLOCK>
__device__ void fill_weights(const T *x, int n, float m, float t, float *wrow) {
  for_each_vec<T, BLOCK, 4>(x, 0, n, [&](int i, float v) { wrow[i] = weight_of(v, m, t); });
  __syncthreads();
}

// tree_leaf returns the leaf of chunk c among chunks in a complete tree of
// the given depth: walking down, splitting as engine/cpu's recursion does
// (c chunks into c/2 and c - c/2).
__device__ __forceinline__ int tree_leaf(int c, int chunks, int depth) {
  int s0 = 0, cnt = chunks, leaf = 0;
  for (int d = 0; d < depth; d++) {
    const int h = cnt >> 1;
    if (c - s0 < h) {
      cnt = h;
      leaf <<= 1;
    } else {
      s0 += h;
      cnt -= h;
      leaf = (leaf << 1) | 1;
    }
  }
  return leaf;
}

// tree_sum returns the float32 sum of the (filtered) weights formed exactly
// as engine/cpu's Sum forms it: 256-element chunks, each summed in 8 lanes
// (lane l adds elements l, l+8, ... in order) combined as
// ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)), then the chunk sums combined by the
// tree that splits c chunks into c/2 and c - c/2. One thread sums one chunk,
// keeping the 8 lane sums in registers, with 16-byte loads. Leaves of a
// complete binary tree that hold no chunk are 0, and x + 0 = x, so the
// complete tree gives the same sum.
template <int BLOCK, typename Src>
__device__ float tree_sum(const Src &src, int n, const Filter *f, RowShared<BLOCK> &sh) {
  const int chunks = (n + 255) / 256;
  int depth = 0;
  while ((1 << depth) < chunks) depth++;
  const int leaves = 1 << depth;
  for (int j = threadIdx.x; j < leaves; j += BLOCK) sh.tree[leaves + j] = 0.0f;
  __syncthreads();
  for (int c = threadIdx.x; c < chunks; c += BLOCK) {
    float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const int base = c * 256;
    src.chunk_sum8(base, min(256, n - base), f, a);
    const float s = __fadd_rn(__fadd_rn(__fadd_rn(a[0], a[1]), __fadd_rn(a[2], a[3])),
                              __fadd_rn(__fadd_rn(a[4], a[5]), __fadd_rn(a[6], a[7])));
    sh.tree[leaves + tree_leaf(c, chunks, depth)] = s;
  }
  __syncthreads();
  for (int len = leaves >> 1; len >= 1; len >>= 1) {
    for (int j = len + threadIdx.x; j < 2 * len; j += BLOCK) sh.tree[j] = __fadd_rn(sh.tree[2 * j], sh.tree[2 * j + 1]);
    __syncthreads();
  }
  const float s = sh.tree[1];
  __syncthreads();
  return s;
}

// descend is engine/cpu's descend: the smallest value v of the weights for
// which ahead(count, mass) holds, where count and mass (of fixed-point
// weights, only when MASS) are those of the tokens strictly greater than v.
// It walks the float bits most significant byte first; weights are >= 0 and
// not NaN. At each level the chosen byte is the lowest non-empty bucket whose
// elements' top one still passes, or the highest non-empty bucket if none
// does; ahead is monotone, so the passing buckets are a prefix from the top.
template <int BLOCK, bool MASS, typename Src, typename Ahead>
__device__ float descend(const Src &src, int n, Ahead ahead, RowShared<BLOCK> &sh) {
  using Scan = cub::BlockScan<unsigned long long, BLOCK>;
  unsigned prefix = 0, mask = 0;
  unsigned long long above_count = 0, above_mass = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256 * kHistCopies; d += BLOCK) {
      sh.hist_count[d] = 0;
      sh.hist_mass[d] = 0;
    }
    if (threadIdx.x == 0) {
      sh.chosen = 256;
      sh.top = -1;
    }
    __syncthreads();
    const int copy = threadIdx.x % kHistCopies;
    src.template each<BLOCK>(n, [&](int, float v) {
      const unsigned b = __float_as_uint(v);
      if ((b & mask) != prefix) return;
      const unsigned d = ((b >> shift) & 0xffu) * kHistCopies + copy;
      atomicAdd(&sh.hist_count[d], 1u);
      if (MASS) {
        const unsigned long long W = weight(v);
        if (W) atomicAdd(&sh.hist_mass[d], W);
      }
    });
    __syncthreads();
    const int d = 255 - (int)threadIdx.x;  // thread t holds bucket 255 - t
    unsigned long long c = 0, m = 0, c_ex = 0, m_ex = 0;
    if (threadIdx.x < 256) {
#pragma unroll
      for (int k = 0; k < kHistCopies; k++) {
        c += sh.hist_count[d * kHistCopies + k];
        m += sh.hist_mass[d * kHistCopies + k];
      }
    }
    Scan(sh.red.s.scan).ExclusiveSum(c, c_ex);
    __syncthreads();
    if (MASS) {
      Scan(sh.red.s.scan).ExclusiveSum(m, m_ex);
      __syncthreads();
    }
    if (threadIdx.x < 256 && c > 0) {
      atomicMax(&sh.top, d);
      if (ahead(above_count + c_ex, above_mass + m_ex)) atomicMin(&sh.chosen, d);
    }
    __syncthreads();
    const int chosen = sh.chosen < 256 ? sh.chosen : sh.top;
    if (threadIdx.x < 256 && d == chosen) {
      sh.sel_count = above_count + c_ex;
      sh.sel_mass = above_mass + m_ex;
    }
    __syncthreads();
    if (chosen < 0) return kInf;  // empty row: cannot happen for n > 0
    prefix |= (unsigned)chosen << shift;
    mask |= 0xffu << shift;
    above_count = sh.sel_count;
    above_mass = sh.sel_mass;
    __syncthreads();
  }
  return __uint_as_float(prefix);
}

// scan_find returns the first i in [lo, hi) whose inclusive prefix sum of
// val(i), counted from lo, exceeds target, or -1 when the total does not.
// Tiles of BLOCK*ITEMS consecutive elements are scanned in order; every
// thread gets the answer.
template <int BLOCK, int ITEMS, typename Val>
__device__ int scan_find(int lo, int hi, unsigned long long target, Val val, RowShared<BLOCK> &sh) {
  using Scan = cub::BlockScan<unsigned long long, BLOCK>;
  if (threadIdx.x == 0) sh.found = -1;
  __syncthreads();
  unsigned long long carry = 0;
  for (int base = lo; base < hi; base += BLOCK * ITEMS) {
    const int i0 = base + (int)threadIdx.x * ITEMS;
    unsigned long long v[ITEMS], sum = 0;
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      v[k] = i0 + k < hi ? val(i0 + k) : 0ull;
      sum += v[k];
    }
    unsigned long long excl, total;
    Scan(sh.red.s.scan).ExclusiveSum(sum, excl, total);
    const unsigned long long before = carry + excl;
    if (before <= target && before + sum > target) {
      unsigned long long run = before;
#pragma unroll
      for (int k = 0; k < ITEMS; k++) {
        run += v[k];
        if (run > target) {
          sh.found = i0 + k;
          break;
        }
      }
    }
    __syncthreads();
    if (sh.found >= 0) break;
    carry += total;
  }
  const int r = sh.found;
  __syncthreads();
  return r;
}

// scan_write writes the inclusive prefix sums of val(0..n) to out and
// returns the total (the fixed-point CDF of many draws).
template <int BLOCK, int ITEMS, typename Val>
__device__ unsigned long long scan_write(int n, Val val, unsigned long long *out, RowShared<BLOCK> &sh) {
  using Scan = cub::BlockScan<unsigned long long, BLOCK>;
  unsigned long long carry = 0;
  for (int base = 0; base < n; base += BLOCK * ITEMS) {
    const int i0 = base + (int)threadIdx.x * ITEMS;
    unsigned long long v[ITEMS], sum = 0;
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      v[k] = i0 + k < n ? val(i0 + k) : 0ull;
      sum += v[k];
    }
    unsigned long long excl, total;
    Scan(sh.red.s.scan).ExclusiveSum(sum, excl, total);
    unsigned long long run = carry + excl;
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
      run += v[k];
      if (i0 + k < n) out[i0 + k] = run;
    }
    carry += total;
    __syncthreads();
  }
  return carry;
}

// compact keeps, in order, the entries k of [0, n) for which keep(k) holds,
// writing get(k) = (token, weight) to out_idx/out_w from position 0, and
// returns how many it kept. Writing never passes reading (the k-th kept
// entry lands at a position <= k), so out may be the list being read.
template <int BLOCK, int ITEMS, typename Keep, typename Get>
__device__ int compact(int n, Keep keep, Get get, int *out_idx, float *out_w, RowShared<BLOCK> &sh) {
  using Scan = cub::BlockScan<int, BLOCK>;
  static_assert(sizeof(typename Scan::TempStorage) <= sizeof(sh.red.s), "scan storage");
  auto &tmp = *reinterpret_cast<typename Scan::TempStorage *>(&sh.red.s);
  int carry = 0;
  for (int base = 0; base < n; base += BLOCK * ITEMS) {
    const int k0 = base + (int)threadIdx.x * ITEMS;
    int idx[ITEMS], flag[ITEMS], count = 0;
    float w[ITEMS];
#pragma unroll
    for (int q = 0; q < ITEMS; q++) {
      flag[q] = k0 + q < n && keep(k0 + q);
      if (flag[q]) get(k0 + q, idx[q], w[q]);
      count += flag[q];
    }
    int pos, total;
    Scan(tmp).ExclusiveSum(count, pos, total);
    __syncthreads();  // every read of this tile is done before the writes
    pos += carry;
#pragma unroll
    for (int q = 0; q < ITEMS; q++)
      if (flag[q]) {
        out_idx[pos] = idx[q];
        out_w[pos] = w[q];
        pos++;
      }
    carry += total;
    __syncthreads();
  }
  return carry;
}

// Segments: for the inverse CDF, thread t owns the contiguous tokens
// [t*S, (t+1)*S) with S = ceil(n / BLOCK). One pass sums each segment
// (seg_total); the segment holding the target is found with one block scan
// of the segment sums, and only that segment is scanned in order
// (seg_find): one pass over the row instead of one block scan per tile.
template <int BLOCK>
__device__ __forceinline__ int seg_len(int n) { return (n + BLOCK - 1) / BLOCK; }

// seg_total returns the block-wide sum of val over [0, n) and leaves this
// thread's segment sum in mine.
template <int BLOCK, typename Val>
__device__ unsigned long long seg_total(int n, Val val, unsigned long long &mine, RowShared<BLOCK> &sh) {
  const int S = seg_len<BLOCK>(n);
  const int lo = min(n, (int)threadIdx.x * S), hi = min(n, lo + S);
  unsigned long long s = 0;
  for (int i = lo; i < hi; i += 8) {
    unsigned long long v[8];
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] = i + k < hi ? val(i + k) : 0ull;
#pragma unroll
    for (int k = 0; k < 8; k++) s += v[k];
  }
  mine = s;
  return Reduce<BLOCK>::sum(sh.red, s);
}

// find_segment returns the thread whose segment (of sum mine, segments in
// thread order) holds target, and in rem the target's offset within it; -1
// when the total does not reach past target.
template <int BLOCK>
__device__ int find_segment(unsigned long long target, unsigned long long mine, unsigned long long &rem,
                            RowShared<BLOCK> &sh) {
  using Scan = cub::BlockScan<unsigned long long, BLOCK>;
  unsigned long long excl;
  if (threadIdx.x == 0) sh.seg = -1;
  Scan(sh.red.s.scan).ExclusiveSum(mine, excl);
  __syncthreads();
  if (mine > 0 && excl <= target && target < excl + mine) {
    sh.seg = threadIdx.x;
    sh.rem = target - excl;
  }
  __syncthreads();
  const int seg = sh.seg;
  rem = sh.rem;
  __syncthreads();
  return seg;
}

// seg_find returns the first i whose inclusive prefix sum of val exceeds
// target, given each thread's segment sum from seg_total; -1 when none does.
template <int BLOCK, typename Val>
__device__ int seg_find(int n, unsigned long long target, unsigned long long mine, Val val, RowShared<BLOCK> &sh) {
  const int S = seg_len<BLOCK>(n);
  unsigned long long rem;
  const int seg = find_segment<BLOCK>(target, mine, rem, sh);
  if (seg < 0) return -1;
  const int lo = seg * S;
  return scan_find<BLOCK, 4>(lo, min(n, lo + S), rem, val, sh);
}

// active_filters reports whether row r of n tokens has a filter on.
__device__ __forceinline__ bool active_filters(const RowParams &rp, int r, int n) {
  const int k = rp.top_k[r];
  return (k > 0 && k < n) || rp.top_p[r] < 1.0f || rp.min_p[r] > 0.0f;
}

// filter_switches is row r's Filter with which filters are on and min-p
// set (a row of n tokens), its other thresholds not yet found: tau_k and
// cut_p 0, no tie cut.
__device__ __forceinline__ Filter filter_switches(const RowParams &rp, int r, int n) {
  Filter f;
  const int k = rp.top_k[r];
  f.topk = k > 0 && k < n;
  f.topp = rp.top_p[r] < 1.0f;
  f.min_p = rp.min_p[r] > 0.0f ? rp.min_p[r] : 0.0f;
  f.tau_k = 0.0f;
  f.tie_cut = 0x7fffffff;
  f.cut_p = 0.0f;
  return f;
}

// make_filter computes row r's thresholds from the weights (engine/cpu
// filter.apply, as thresholds): top-k by descent on counts, the tie cut by
// an ordered scan, top-p by descent on fixed-point mass against
// float64(top_p) * float64(Z').
template <int BLOCK, typename Src>
__device__ Filter make_filter(const Src &w, int n, const RowParams &rp, int r, int flags, RowShared<BLOCK> &sh) {
  Filter f = filter_switches(rp, r, n);
  const int k = rp.top_k[r];
  const float top_p = rp.top_p[r];
  if (f.topk) {
    f.tau_k = descend<BLOCK, false>(
        w, n, [k](unsigned long long count, unsigned long long) { return count < (unsigned long long)k; }, sh);
    if (flags & SV_TIES_LOWEST_INDEX) {
      const float tau = f.tau_k;
      int above = 0;
      w.template each<BLOCK>(n, [&](int, float v) { above += v > tau; });
      above = Reduce<BLOCK>::sum(sh.red, above);
      const int room = k - above;  // >= 1: fewer than k tokens are above tau
      f.tie_cut = scan_find<BLOCK, 8>(
          0, n, (unsigned long long)(room - 1), [&](int i) { return (unsigned long long)(w(i) == tau); }, sh);
    }
  }
  if (f.topp) {
    unsigned long long z = 0;
    const bool joint = flags & SV_ORDER_JOINT;
    const Filter fk = f;
    w.template each<BLOCK>(n, [&](int i, float v) {
      if (joint || fk.topk_kept(i, v)) z += weight(v);
    });
    z = Reduce<BLOCK>::sum(sh.red, z);
    const double limit = (double)top_p * (double)z;
    f.cut_p = descend<BLOCK, true>(
        w, n, [limit](unsigned long long, unsigned long long mass) { return (double)mass < limit; }, sh);
  }
  return f;
}

// fill_row writes v to out[0..n).
template <int BLOCK>
__device__ __forceinline__ void fill_row(float *out, int n, float v) {
  for (int i = threadIdx.x; i < n; i += BLOCK) out[i] = v;
}

}  // namespace sv
