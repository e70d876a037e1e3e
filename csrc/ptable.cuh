// ptable.cuh: per-row memo tables of the exact weights of bf16 logits.
//
// Every exact weight is w = f32math.Exp((x - m) / T) (SEMANTICS.md): ~40
// separately rounded float operations a token, which bounded the
// unfiltered spec_verify kernels (docs/PERF.md, the floors). For
// bf16 logits w is a function of the token's 16-bit pattern once the row's
// m and T are known, and a row of 128k tokens holds a few thousand
// distinct patterns. A PatternTable holds a value computed from w (w
// itself, p = w / S, or p's fixed-point weight) for a window of 4096
// patterns, filled once per row by the block, so a token inside the window
// costs one shared-memory load.
// Tokens outside it (magnitudes far below or above the row's range, -Inf)
// compute their value exactly. The table is a memo: every window gives the
// same bits; the window decides only how many tokens find their value in
// it.
//
// bf16 only: its 7-bit mantissa puts 16 binades of either sign in 4096
// entries (16 KB). A window that size holds 2 binades of f16 patterns, too
// few for logits, so f16 and f32 rows keep computing every weight.
//
// Why this and patterns.cuh both exist: patterns.cuh counts all 65536
// patterns of a row and lists its distinct values in order, which the
// filters need (a count and a mass per value), in ~222 KB of shared
// memory, one block an SM. The kernels here (the unfiltered spec_verify
// prepare and chain) need no filter, only each token's weight, and run two
// blocks an SM; a 16 KB window of weights serves them, where patterns.cuh's
// tables would halve their blocks and add a count and a list pass a row.
// So this table is never a filter, a sort or a histogram.
#pragma once

#include <type_traits>

#include "rowops.cuh"

namespace sv {

// kTableSpan is the window's width in magnitude patterns, per sign.
constexpr unsigned kTableSpan = 2048;
// kTableEntries is a table's length (both signs).
constexpr unsigned kTableEntries = 2 * kTableSpan;

// tabled says whether rows of T take tables: bf16 only (above).
template <typename T>
__host__ __device__ constexpr bool tabled() {
  return std::is_same<T, __nv_bfloat16>::value;
}

// PatternTable is a window of magnitude patterns (b & 0x7fff in [lo, lo +
// kTableSpan), both signs) and their values of type V in shared memory,
// sign-major.
template <typename V>
struct PatternTable {
  V *v;  // [kTableEntries]
  unsigned lo;

  // find sets j to pattern b's index in v and says whether b is in the
  // window: the magnitude's offset from lo, the sign's half above it.
  __device__ __forceinline__ bool find(unsigned b, unsigned &j) const {
    const unsigned d = (b - lo) & 0x7fffu;
    j = d | ((b >> 4) & kTableSpan);
    return d < kTableSpan;
  }
  // value is pattern b's entry, or exact(its value) outside the window.
  template <typename F>
  __device__ __forceinline__ V value(unsigned b, F &&exact) const {
    unsigned j;
    return find(b, j) ? v[j] : exact(bits_f32(b, (const __nv_bfloat16 *)nullptr));
  }

  // pair_offset is pair's koff for this window: 0x8000 - lo in both halves.
  __device__ __forceinline__ unsigned pair_offset() const { return (0x8000u - lo) * 0x10001u; }

  // pair sets a and b to the entries of the low and the high pattern of the
  // 32-bit word w, both at once and without a branch: value()'s branch a
  // token, with its convergence barrier, cost more than the lookup itself.
  // Outside the window the index wraps to another
  // entry; pair ORs into miss what missed(miss) then reads, and the caller
  // takes value() for the tokens of a word that missed.
  __device__ __forceinline__ void pair(unsigned w, unsigned koff, V &a, V &b, unsigned &miss) const {
    // Per half: bit 15 is set iff the magnitude is >= lo, and the low 15
    // bits are then the magnitude's offset from lo (no carry between halves).
    const unsigned d = (w & 0x7fff7fffu) + koff;
    miss |= d ^ 0x80008000u;  // bits 11-15 of a half clear iff it is in the window
    const unsigned j = ((d & 0x07ff07ffu) | ((w & 0x80008000u) >> 4)) * (unsigned)sizeof(V);  // < 2^16 a half
    const char *base = reinterpret_cast<const char *>(v);
    a = *reinterpret_cast<const V *>(base + (j & 0xffffu));
    b = *reinterpret_cast<const V *>(base + (j >> 16));
  }
  __device__ __forceinline__ static bool missed(unsigned miss) { return (miss & 0xf800f800u) != 0; }

  // vector sets e to the entries of the 8 patterns of the 16-byte vector q
  // in token order (pair's lookups; exact(v) for every token of a vector
  // one of whose patterns is outside the window).
  template <typename F>
  __device__ __forceinline__ void vector(const uint4 &q, unsigned koff, F &&exact, V (&e)[8]) const {
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
    unsigned miss = 0;
#pragma unroll
    for (int h = 0; h < 4; h++) pair(w[h], koff, e[2 * h], e[2 * h + 1], miss);
    if (missed(miss)) {  // rare: tiny or huge magnitudes, -Inf
#pragma unroll
      for (int h = 0; h < 4; h++) {
        e[2 * h] = value(w[h] & 0xffffu, exact);
        e[2 * h + 1] = value(w[h] >> 16, exact);
      }
    }
  }
};
static_assert(kTableSpan == 0x8000u >> 4, "the sign bit, shifted, selects the table's upper half");

// table_room is the shared memory a row kernel's table lives in: the radix
// histogram's mass counters, which only the filters' descents use. A kernel
// that fills a table never descends while the table is live.
template <int BLOCK>
__device__ __forceinline__ float *table_room(RowShared<BLOCK> &sh) {
  static_assert(sizeof(sh.hist_mass) >= kTableEntries * sizeof(float), "the table fits the mass counters");
  return reinterpret_cast<float *>(sh.hist_mass);
}

// table_window places the window for a row of maximum m at temperature t:
// its top binade holds the larger of |m| and |m - 104 t|, the widest
// magnitude a token of nonzero weight can have (f32math.Exp is 0 below
// -103.97), and it reaches down 15 binades from there (bf16 exponents share
// float's field and bias).
__device__ __forceinline__ unsigned table_window(float m, float t) {
  const float r = fmaxf(fabsf(m), fabsf(m - 104.0f * t));
  const unsigned e = min((__float_as_uint(r) >> 23) & 0xffu, 254u);
  const unsigned top = (e << 7) | 0x7fu;  // the binade's last pattern
  return top + 1 > kTableSpan ? top + 1 - kTableSpan : 0;
}

// fill_table sets tab.v to f(x) for every pattern x of the window, one
// entry per thread at a time, and waits for the block. f may see patterns
// above the row's maximum; their entries are never read.
template <int BLOCK, typename V, typename F>
__device__ void fill_table(const PatternTable<V> &tab, F f) {
  for (unsigned j = threadIdx.x; j < kTableEntries; j += BLOCK) {
    const unsigned b = ((j / kTableSpan) << 15) | (tab.lo + j % kTableSpan);
    tab.v[j] = f(bits_f32(b, (const __nv_bfloat16 *)nullptr));
  }
  __syncthreads();
}

// TableWeight is XSource's weight of a bf16 token from a table of the
// weights (fill_table with weight_of): the same w, bit for bit. v is a
// widened bf16, so its top half is the token's pattern.
struct TableWeight {
  PatternTable<float> tab;
  __device__ __forceinline__ float operator()(float v, float m, float t) const {
    return tab.value(__float_as_uint(v) >> 16, [&](float x) { return weight_of(x, m, t); });
  }
};

// bits_each calls f(i, b) for the tokens i in [lo, hi) of bf16 row x in
// order, b the token's pattern: 16-byte loads where x + lo is aligned,
// 2-byte loads elsewhere.
template <typename F>
__device__ __forceinline__ void bits_each(const __nv_bfloat16 *x, int lo, int hi, F &&f) {
  const unsigned short *xs = reinterpret_cast<const unsigned short *>(x);
  int i = lo;
  if ((reinterpret_cast<uintptr_t>(xs + lo) & 15) == 0) {
    const uint4 *v = reinterpret_cast<const uint4 *>(xs + lo);
    const int nv = (hi - lo) / 8;
#pragma unroll 4
    for (int j = 0; j < nv; j++) {
      const uint4 q = __ldg(v + j);
      const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int h = 0; h < 4; h++) {
        f(lo + 8 * j + 2 * h, w[h] & 0xffffu);
        f(lo + 8 * j + 2 * h + 1, w[h] >> 16);
      }
    }
    i = lo + 8 * nv;
  }
  for (; i < hi; i++) f(i, (unsigned)__ldg(xs + i));
}

// each_pattern calls f(b) for the 8 patterns of the 16-byte vector u of a
// bf16 row, in token order.
template <typename F>
__device__ __forceinline__ void each_pattern(const uint4 &u, F &&f) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int h = 0; h < 4; h++) {
    f(w[h] & 0xffffu);
    f(w[h] >> 16);
  }
}

// DrawWeights is a token's two fixed-point weights in a chain's draw: the
// residual's and the target's.
struct DrawWeights {
  unsigned long long residual, target;
};

// table_sum returns the sum of conv(tab's value) over the tokens [lo, hi)
// of bf16 row x: 16-byte loads where x + lo is aligned, two patterns a
// lookup (PatternTable::pair), exact(v) for the tokens of a missed word,
// and 2-byte loads elsewhere. conv's result is an integer type: the order
// of the adds is free.
template <typename V, typename F, typename C>
__device__ __forceinline__ auto table_sum(const PatternTable<V> &tab, const __nv_bfloat16 *x, int lo, int hi,
                                          F &&exact, C &&conv) -> decltype(conv(V{})) {
  const unsigned short *xs = reinterpret_cast<const unsigned short *>(x);
  decltype(conv(V{})) s = 0;
  int i = lo;
  if ((reinterpret_cast<uintptr_t>(xs + lo) & 15) == 0) {
    const uint4 *v = reinterpret_cast<const uint4 *>(xs + lo);
    const int nv = (hi - lo) / 8;
    const unsigned koff = tab.pair_offset();
#pragma unroll 4
    for (int j = 0; j < nv; j++) {
      V e[8];
      tab.vector(__ldg(v + j), koff, exact, e);
#pragma unroll
      for (int l = 0; l < 8; l++) s += conv(e[l]);
    }
    i = lo + 8 * nv;
  }
  for (; i < hi; i++) s += conv(tab.value((unsigned)__ldg(xs + i), exact));
  return s;
}

// table_sum with the values added as they are (V an integer type).
template <typename V, typename F>
__device__ __forceinline__ V table_sum(const PatternTable<V> &tab, const __nv_bfloat16 *x, int lo, int hi,
                                       F &&exact) {
  return table_sum(tab, x, lo, hi, exact, [](V v) { return v; });
}

// segment_sums returns this thread's DrawWeights over its segment of S
// tokens of an n-token row ([t * S, (t + 1) * S), S a multiple of 256),
// sums(lo, hi) giving a range's, with the row read coalesced: the four
// lanes of a group take one segment, 8 tokens (16 bytes) a lane in turn,
// so that a warp's load covers 64 contiguous bytes of eight segments,
// where a thread summing its own segment reads 16 bytes at S * 2-byte
// strides across the warp. The segments of a warp's threads stay with the
// warp; a segment's total reaches its thread by a shuffle. The sums are
// integers: any order gives the same total.
template <int BLOCK, typename Sums>
__device__ __forceinline__ DrawWeights segment_sums(int n, int S, Sums &&sums) {
  const int lane = threadIdx.x & 31, first = threadIdx.x & ~31;  // the warp's first segment
  const int q = lane >> 2, r = lane & 3;
  DrawWeights own{0ull, 0ull};
#pragma unroll 1
  for (int s0 = 0; s0 < 32; s0 += 8) {
    const int lo = min(n, (first + s0 + q) * S), hi = min(n, lo + S);
    DrawWeights acc{0ull, 0ull};
#pragma unroll 4
    for (int i = lo + 8 * r; i < hi; i += 32) {
      const DrawWeights d = sums(i, min(hi, i + 8));
      acc.residual += d.residual;
      acc.target += d.target;
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      acc.residual += __shfl_xor_sync(0xffffffffu, acc.residual, off);
      acc.target += __shfl_xor_sync(0xffffffffu, acc.target, off);
    }
    // Lane s0 + j owns segment first + s0 + j, whose total group j holds.
    const int j = lane - s0;
    const unsigned long long res = __shfl_sync(0xffffffffu, acc.residual, 4 * (j & 7));
    const unsigned long long tgt = __shfl_sync(0xffffffffu, acc.target, 4 * (j & 7));
    if (j >= 0 && j < 8) own = DrawWeights{res, tgt};
  }
  return own;
}

// draw_bits draws from a bf16 row by the fixed-point inverse CDF, as
// rowops.cuh's seg_total and seg_find do, with w(i, b) the weights of
// token i of pattern b: from the residual weights when residual_first is
// set and they are not all 0, else from the target weights, the first token
// whose inclusive prefix sum exceeds pick(u, total). Both totals of a
// thread's segment (whole 256-token chunks) come from one pass, sums(lo,
// hi) over the thread's own segment, or with COALESCED segment_sums; the
// segment that holds the target is searched token by token with w. It
// returns the token, or -1 when every weight is 0. COALESCED pays where a
// token's weight reads more than the row (the chain's draft distribution
// q, a row of its own) and costs where a table lookup is all a token takes
// (table_kernel, topp_kernel, the one-hot chain: the per-call overhead of
// eight tokens at a time outweighs the coalesced read; docs/perf-log.md).
template <int BLOCK, bool COALESCED = false, typename Sums, typename W>
__device__ int draw_bits(const __nv_bfloat16 *x, int n, bool residual_first, uint64_t u, Sums &&sums, W &&w,
                         RowShared<BLOCK> &sh) {
  const int chunks = (n + 255) / 256;
  const int S = 256 * ((chunks + BLOCK - 1) / BLOCK);
  const int lo = min(n, (int)threadIdx.x * S), hi = min(n, lo + S);
  const DrawWeights own = COALESCED ? segment_sums<BLOCK>(n, S, sums) : sums(lo, hi);
  const unsigned long long rtotal = residual_first ? Reduce<BLOCK>::sum(sh.red, own.residual) : 0;
  const bool use_residual = rtotal > 0;
  const unsigned long long mine = use_residual ? own.residual : own.target;
  const unsigned long long total = use_residual ? rtotal : Reduce<BLOCK>::sum(sh.red, own.target);
  if (total == 0) return -1;
  unsigned long long rem;
  const int seg = find_segment<BLOCK>(pick(u, total), mine, rem, sh);
  if (seg < 0) return -1;
  const unsigned short *xs = reinterpret_cast<const unsigned short *>(x);
  const int slo = seg * S, shi = min(n, slo + S);
  return scan_find<BLOCK, 4>(
      slo, shi, rem,
      [&](int i) {
        const DrawWeights d = w(i, (unsigned)__ldg(xs + i));
        return use_residual ? d.residual : d.target;
      },
      sh);
}

// draw_bits with the segment totals summed token by token from w, 16 bytes
// at a time (bits_each), the row read coalesced (segment_sums).
template <int BLOCK, typename W>
__device__ int draw_bits(const __nv_bfloat16 *x, int n, bool residual_first, uint64_t u, W &&w,
                         RowShared<BLOCK> &sh) {
  auto sums = [&](int lo, int hi) {
    DrawWeights s{0, 0};
    bits_each(x, lo, hi, [&](int i, unsigned b) {
      const DrawWeights d = w(i, b);
      s.residual += d.residual;
      s.target += d.target;
    });
    return s;
  };
  return draw_bits<BLOCK, true>(x, n, residual_first, u, sums, w, sh);
}

}  // namespace sv
