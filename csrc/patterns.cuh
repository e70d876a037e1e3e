// patterns.cuh: the full-row path's weights by distinct value, for 16-bit
// logits (f16, bf16). A row of 128256 bf16 logits holds a few thousand
// distinct values. One count of every 16-bit pattern (65536 counters in
// shared memory) gives every filter threshold with one exact exp per
// distinct value instead of one per token, and a table from pattern to
// weight gives every later pass a token's weight in two shared loads
// instead of ~40 instructions and a scratch row in global memory.
// engine/ref forms its reference the same way (compute.go). The pattern
// path feeds rowops.cuh's Filter, Sum and draws exactly what the per-token
// path feeds them, so every output is unchanged, bit for bit.
//
// A row takes it when its dtype is 16-bit, the kernel got sizeof
// (PatternSmem) bytes of shared memory (an H100 gives a block 227 KB; an
// A100's 163 KB is too small, and its kernels run the per-token path), no
// finite value repeats 65536 times (-inf is not counted), it has at most
// PatternSmem::kCap distinct finite values (8432 with 512 threads), and
// its weights never rise where the values fall (Exp is monotone; checked
// anyway, since the lists rely on it). Otherwise the same block serves
// the row by the per-token path.
//
// The count also finds the row's maximum (the top of the list) and
// whether it has a distribution (no NaN, no +Inf, a finite value), so a
// row on this path never needs row_stat's pass. (ptable.cuh's memo of bf16
// weights is a second, smaller mechanism; it says why both exist.)
#pragma once

#include <type_traits>

#include "bulk.cuh"
#include "cluster.cuh"
#include "rowops.cuh"

namespace sv {

// PatternRoom is the shared memory a pattern block may use: the 227 KB an
// H100 gives one block, less room for the kernels' static shared memory.
constexpr int kPatternRoom = 227 * 1024 - 4096;
constexpr int kPatterns = 65536;

// PatternSmem is a pattern kernel's dynamic shared memory: the per-token
// path's RowShared (which the pattern path's scans and sums also use) and
// the pattern tables.
template <int BLOCK>
struct PatternSmem {
  // kCap is the most distinct finite values a row may have.
  static constexpr int kCap =
      (kPatternRoom - (int)sizeof(RowShared<BLOCK>) - 2 * kPatterns - 64 - 8 * (BLOCK / 32) - 1024) / 6 / 16 * 16;
  static_assert(2 * kCap >= 8 * kMaxLeaves, "the quads fit where the counts were");
  RowShared<BLOCK> sh;
  // hist holds a 16-bit counter per pattern key (key16: key k is half k & 1
  // of word k >> 1), then each key's position in the list.
  unsigned int hist[kPatterns / 2];
  union {
    unsigned short cnt[kCap];              // cnt[j]: the count of the j-th largest distinct value
    unsigned long long quads[kMaxLeaves];  // once the filters are decided: pattern_quads
  };
  // w[j] is the weight of the j-th largest distinct value, w[n] = 0 (the
  // position of -inf).
  float w[kCap + 1];
  unsigned long long warp_sum[BLOCK / 32];
  // zeros is 1 KB of zeros, the source of pattern_write's bulk stores.
  float4 zeros[64];
  float m;  // the row's maximum
  int n, token;
};

// pattern_smem is a pattern kernel's dynamic shared memory.
template <int BLOCK>
__device__ __forceinline__ PatternSmem<BLOCK> &pattern_smem() {
  static_assert(sizeof(PatternSmem<BLOCK>) <= kPatternRoom, "pattern tables fit a block's shared memory");
  extern __shared__ __align__(16) unsigned char smem[];
  return *reinterpret_cast<PatternSmem<BLOCK> *>(smem);
}

// neg_inf_bits is the 16-bit pattern of -inf in T.
template <typename T>
__device__ __forceinline__ unsigned neg_inf_bits() {
  return std::is_same<T, __half>::value ? 0xfc00u : 0xff80u;
}

// for_each_bits calls f(i, b) with the 16-bit pattern b of every element i
// of row[0..n), in no particular order (common.cuh for_each_uint4).
template <int BLOCK, int UNROLL, typename F>
__device__ __forceinline__ void for_each_bits(const unsigned short *row, int n, F &&f) {
  for_each_uint4<unsigned short, BLOCK, UNROLL>(
      row, 0, n, [&](int i) { f(i, (unsigned)__ldg(row + i)); },
      [&](int i, const uint4 &u) {
        const unsigned word[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int q = 0; q < 4; q++) {
          f(i + 2 * q, word[q] & 0xffffu);
          f(i + 2 * q + 1, word[q] >> 16);
        }
      });
}

// Kept is an optional Filter by value: keep(i, w) is w where the filter
// keeps token i (or there is none), else 0 (rowops.cuh masked, without
// the pointer, whose target a hot loop would load at every token).
struct Kept {
  Filter f;
  bool on;
  __device__ __forceinline__ explicit Kept(const Filter *p) : on(p != nullptr) {
    if (p) f = *p;
  }
  __device__ __forceinline__ float operator()(int i, float w) const { return on && !f.kept(i, w) ? 0.0f : w; }
};

// PSource is a row's weights by pattern table (rowops.cuh's source
// interface: w(i), each, chunk_sum8), once pattern_ready has built it.
// Narrowed to a Filter (pattern_narrow, filtered set), it reads the kept
// weights: 0 for every token the filter drops, so the hot loops need no
// filter of their own. Keys below key_lo read 0 without a table lookup,
// and so do the positions [tie_lo, tie_hi] (the top-k cut's weight, under
// lowest_index ties) after token tie_cut.
template <typename T>
struct PSource {
  const unsigned short *x;    // the row's 16-bit patterns
  const unsigned short *pos;  // key16 -> position in the list
  const float *w;             // weights by position
  bool filtered;
  unsigned key_lo, tie_lo, tie_hi;
  int tie_cut;
  // quads, when set (pattern_quads), has bit q of word c set where one of
  // tokens [256 c + 4 q, + 4) may be kept: every other token reads as 0.
  const unsigned long long *quads;

  // at is the weight of token i, of pattern b.
  __device__ __forceinline__ float at(int i, unsigned b) const {
    const unsigned k = key16((unsigned short)b);
    if (k < key_lo) return 0.0f;
    const unsigned j = pos[k];
    return i > tie_cut && j - tie_lo <= tie_hi - tie_lo ? 0.0f : w[j];
  }
  __device__ __forceinline__ float operator()(int i) const { return at(i, __ldg(x + i)); }

  // four reads the weights of tokens [i, i + 4) below hi (0 past it), i a
  // multiple of 4: one 8-byte load where the row is aligned.
  __device__ __forceinline__ void four(int i, int hi, float (&v)[4]) const {
    if (i + 4 <= hi && (reinterpret_cast<uintptr_t>(x) & 7) == 0) {
      const uint2 u = __ldg(reinterpret_cast<const uint2 *>(x + i));
      v[0] = at(i, u.x & 0xffffu);
      v[1] = at(i + 1, u.x >> 16);
      v[2] = at(i + 2, u.y & 0xffffu);
      v[3] = at(i + 3, u.y >> 16);
      return;
    }
#pragma unroll
    for (int e = 0; e < 4; e++) v[e] = i + e < hi ? (*this)(i + e) : 0.0f;
  }

  template <int BLOCK, typename F>
  __device__ __forceinline__ void each(int n, F &&f) const {
    for_each_bits<BLOCK, 4>(x, n, [&](int i, unsigned b) { f(i, at(i, b)); });
  }

  // chunk_sum8: as XSource's, element e of the chunk into lane e % 8. The
  // filter is copied into registers: read through f, it would be read
  // from local memory at every token.
  __device__ __forceinline__ void chunk_sum8(int base, int len, const Filter *f, float (&a)[8]) const {
    const Kept keep(filtered ? nullptr : f);
    if (quads) {  // only the quads that may hold kept tokens: adding the zeros changes no sum
      for (unsigned long long m = quads[base >> 8]; m; m &= m - 1) {
        const int q = __ffsll((long long)m) - 1, i = base + 4 * q;
        float v[4];
        four(i, base + len, v);
        if (q & 1) {  // lanes 4..7 (constant indices keep a[] in registers)
#pragma unroll
          for (int e = 0; e < 4; e++) a[4 + e] = __fadd_rn(a[4 + e], keep(i + e, v[e]));
        } else {
#pragma unroll
          for (int e = 0; e < 4; e++) a[e] = __fadd_rn(a[e], keep(i + e, v[e]));
        }
      }
      return;
    }
    if (len == 256 && (reinterpret_cast<uintptr_t>(x + base) & 15) == 0) {
      const uint4 *v = reinterpret_cast<const uint4 *>(x + base);
#pragma unroll 4
      for (int j = 0; j < 32; j++) {
        const uint4 u = __ldg(v + j);
        const unsigned word[4] = {u.x, u.y, u.z, u.w};
        const int i = base + 8 * j;
#pragma unroll
        for (int q = 0; q < 4; q++) {
          a[2 * q] = __fadd_rn(a[2 * q], keep(i + 2 * q, at(i + 2 * q, word[q] & 0xffffu)));
          a[2 * q + 1] = __fadd_rn(a[2 * q + 1], keep(i + 2 * q + 1, at(i + 2 * q + 1, word[q] >> 16)));
        }
      }
      return;
    }
    for (int e0 = 0; e0 < len; e0 += 8) {
#pragma unroll
      for (int l = 0; l < 8; l++)
        if (e0 + l < len) a[l] = __fadd_rn(a[l], keep(base + e0 + l, (*this)(base + e0 + l)));
    }
  }
};

template <typename S>
struct IsPatternSource : std::false_type {};
template <typename T>
struct IsPatternSource<PSource<T>> : std::true_type {};

// nonzero16 counts the nonzero 16-bit halves of w; sum16 adds them.
__device__ __forceinline__ unsigned nonzero16(unsigned w) { return ((w & 0xffffu) != 0) + ((w >> 16) != 0); }
__device__ __forceinline__ unsigned sum16(unsigned w) { return (w & 0xffffu) + (w >> 16); }

// warp_exclusive adds up v over the lanes below this one.
__device__ __forceinline__ unsigned warp_exclusive(unsigned v) {
  const int lane = threadIdx.x & 31;
  unsigned incl = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const unsigned o = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += o;
  }
  return incl - v;
}

// PatternOutcome is what pattern_ready found.
enum PatternOutcome {
  kPatternReady,    // the tables are built
  kPatternInvalid,  // the row has no distribution (NaN, +Inf or all -inf)
  kPatternNo,       // the row cannot take the pattern path: serve it per token
};

// pattern_ready builds row x's tables in p: the counts of its finite values
// by pattern, the list of its distinct values in descending order with
// their weights Exp((x - m)/t) (m the row's maximum, p.m) and counts, and
// every pattern's position in it (absent patterns 0xffff, -inf the
// position p.n, of weight 0). Every thread gets the same outcome. t > 0.
template <typename T, int BLOCK>
__device__ PatternOutcome pattern_ready(const T *x, int n, float t, PatternSmem<BLOCK> &p) {
  constexpr int WARPS = BLOCK / 32;
  constexpr int STEPS = kPatterns / BLOCK / 8;  // 16-byte vectors of counters per thread
  uint4 *hv = reinterpret_cast<uint4 *>(p.hist);
  for (int j = threadIdx.x; j < kPatterns / 8; j += BLOCK) hv[j] = make_uint4(0u, 0u, 0u, 0u);
  __syncthreads();

  // Count: one shared add per finite token, with no return value to wait
  // for. A counter that passes 0xffff wraps (into its neighbour, or out of
  // the word), which leaves the stored counts short of the finite tokens:
  // that row is not served. NaN and +Inf are the patterns at or above
  // +Inf's magnitude, -inf excepted.
  const unsigned ninf = neg_inf_bits<T>(), pinf = ninf & 0x7fffu;
  int finite = 0, bad = 0;
  for_each_bits<BLOCK, 4>(reinterpret_cast<const unsigned short *>(x), n, [&](int, unsigned b) {
    if ((b & 0x7fffu) >= pinf) {
      bad |= b != ninf;
      return;
    }
    finite++;
    const unsigned k = key16((unsigned short)b);
    atomicAdd(&p.hist[k >> 1], 1u << ((k & 1u) << 4));
  });
  bad = Reduce<BLOCK>::any(p.sh.red, bad);  // its barrier also ends the count
  finite = Reduce<BLOCK>::sum(p.sh.red, finite);
  if (bad || finite == 0) return kPatternInvalid;

  // List, in descending key order: warp w owns the keys below 65536 - w *
  // 32 * 8 * STEPS, step s of it the next 256 keys, lane l the next 8
  // after the lanes below it, so a warp's 16-byte loads are consecutive
  // (no bank conflicts) and the order is (warp, step, lane, key down).
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int top = kPatterns - warp * 256 * STEPS;  // one past the warp's largest key
  auto vec_of = [&](int s) { return (top - 256 * s - 8 * (lane + 1)) / 8; };
  unsigned present = 0, counted = 0;
  for (int s = 0; s < STEPS; s++) {
    const uint4 q = hv[vec_of(s)];
    if (q.x | q.y | q.z | q.w) {  // most vectors count nothing: a row's values fill few stretches of keys
      present += nonzero16(q.x) + nonzero16(q.y) + nonzero16(q.z) + nonzero16(q.w);
      counted += sum16(q.x) + sum16(q.y) + sum16(q.z) + sum16(q.w);
    }
  }
#pragma unroll
  for (int d = 16; d >= 1; d >>= 1) {
    present += __shfl_xor_sync(0xffffffffu, present, d);
    counted += __shfl_xor_sync(0xffffffffu, counted, d);
  }
  if (lane == 0) p.warp_sum[warp] = ((unsigned long long)present << 32) | counted;
  __syncthreads();
  unsigned base = 0, total = 0, stored = 0;
  for (int w = 0; w < WARPS; w++) {
    const unsigned long long v = p.warp_sum[w];
    if (w < warp) base += (unsigned)(v >> 32);
    total += (unsigned)(v >> 32);
    stored += (unsigned)v;
  }
  if (total > (unsigned)PatternSmem<BLOCK>::kCap || stored != (unsigned)finite) return kPatternNo;
  for (int s = 0; s < STEPS; s++) {
    uint4 q = hv[vec_of(s)];
    if (!__any_sync(0xffffffffu, q.x | q.y | q.z | q.w)) {  // 256 absent keys: no positions to hand out
      hv[vec_of(s)] = make_uint4(~0u, ~0u, ~0u, ~0u);
      continue;
    }
    unsigned *word = reinterpret_cast<unsigned *>(&q);
    const unsigned mine = nonzero16(q.x) + nonzero16(q.y) + nonzero16(q.z) + nonzero16(q.w);
    unsigned pos = base + warp_exclusive(mine);
    base = __shfl_sync(0xffffffffu, pos + mine, 31);
    const unsigned first = (unsigned)(top - 256 * s - 8 * (lane + 1));  // the vector's lowest key
#pragma unroll
    for (int h = 7; h >= 0; h--) {  // descending keys: word 3's high half first
      const unsigned shift = (h & 1) << 4;
      const unsigned c = (word[h >> 1] >> shift) & 0xffffu;
      unsigned at = 0xffffu;
      if (c) {
        p.cnt[pos] = (unsigned short)c;
        p.w[pos] = __uint_as_float(first + h);  // the key until the weights pass
        at = pos++;
      }
      word[h >> 1] = (word[h >> 1] & ~(0xffffu << shift)) | (at << shift);
    }
    hv[vec_of(s)] = q;
  }
  __syncthreads();  // every position is written (the -inf key's included)
  const int nd = (int)total;
  const float m = bits_f32(unkey16((unsigned short)__float_as_uint(p.w[0])), (const T *)nullptr);
  __syncthreads();  // every thread has read the top key before its weight replaces it
  if (threadIdx.x == 0) {
    p.m = m;
    p.n = nd;
    p.w[nd] = 0.0f;
    reinterpret_cast<unsigned short *>(p.hist)[key16((unsigned short)ninf)] = (unsigned short)nd;
  }
  for (int j = threadIdx.x; j < nd; j += BLOCK) {
    const unsigned key = __float_as_uint(p.w[j]);
    p.w[j] = weight_of(bits_f32(unkey16((unsigned short)key), (const T *)nullptr), m, t);
  }
  __syncthreads();
  int rises = 0;
  for (int j = threadIdx.x + 1; j < nd; j += BLOCK) rises |= p.w[j] > p.w[j - 1];
  rises = Reduce<BLOCK>::any(p.sh.red, rises);
  return rises ? kPatternNo : kPatternReady;
}

// pattern_source is the PSource of row x over p's tables.
template <typename T, int BLOCK>
__device__ __forceinline__ PSource<T> pattern_source(const T *x, const PatternSmem<BLOCK> &p) {
  return PSource<T>{reinterpret_cast<const unsigned short *>(x), reinterpret_cast<const unsigned short *>(p.hist),
                    p.w, false, 0u, 1u, 0u, 0x7fffffff, nullptr};
}

// pattern_narrow narrows ps to f (PSource filtered): key_lo becomes the
// smallest key whose weight passes every threshold of f (every token below
// it is dropped), and under lowest_index ties the positions of the top-k
// cut's weight drop after f.tie_cut. The thresholds are weights of the
// list, so the last position at or above them is found by bisection, and
// its key by one pass over the position table.
template <typename T, int BLOCK>
__device__ void pattern_narrow(PSource<T> &ps, const Filter &f, PatternSmem<BLOCK> &p) {
  ps.filtered = true;
  float thr = f.min_p;
  if (f.topk) thr = fmaxf(thr, f.tau_k);
  if (f.topp) thr = fmaxf(thr, f.cut_p);
  // first_below is the first position whose weight is below v (or <= v).
  auto first_below = [&](float v, bool or_equal) {
    int lo = -1, hi = p.n;  // w[n] = 0
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (p.w[mid] < v || (or_equal && p.w[mid] == v))
        hi = mid;
      else
        lo = mid;
    }
    return hi;
  };
  if (f.topk && f.tie_cut != 0x7fffffff && f.tau_k > 0.0f) {
    ps.tie_lo = (unsigned)first_below(f.tau_k, true);
    ps.tie_hi = (unsigned)first_below(f.tau_k, false) - 1;
    ps.tie_cut = f.tie_cut;
  }
  if (!(thr > 0.0f)) return;  // nothing dropped by weight alone
  const unsigned last = (unsigned)first_below(thr, false) - 1;  // >= 0: w[0] = 1 passes every threshold
  if (threadIdx.x == 0) p.sh.found = 0xffff;
  __syncthreads();
  unsigned best = 0xffffu;
  for (int j = threadIdx.x; j < kPatterns / 2; j += BLOCK) {
    const unsigned v = p.hist[j];
    if ((v & 0xffffu) <= last)
      best = min(best, 2u * j);
    else if ((v >> 16) <= last)
      best = min(best, 2u * j + 1);
  }
  if (best != 0xffffu) atomicMin(&p.sh.found, (int)best);
  __syncthreads();
  ps.key_lo = (unsigned)p.sh.found;
  __syncthreads();
}

// pattern_quads fills p.quads for a narrowed ps (PSource quads): one
// coalesced read of the row, a warp taking a 256-token chunk a step and
// lane l its tokens [8 l, 8 l + 8). It overwrites the counts.
template <typename T, int BLOCK>
__device__ void pattern_quads(const PSource<T> &ps, int n, PatternSmem<BLOCK> &p) {
  constexpr int WARPS = BLOCK / 32, UNROLL = 4;
  const int chunks = (n + 255) / 256, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bool vec = (reinterpret_cast<uintptr_t>(ps.x) & 15) == 0;
  const unsigned lo = ps.key_lo;
  __syncthreads();  // every read of the counts is done
  for (int c0 = warp; c0 < chunks; c0 += WARPS * UNROLL) {
    uint4 u[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      const int i = (c0 + k * WARPS) * 256 + 8 * lane;
      if (vec && i + 8 <= n) u[k] = __ldg(reinterpret_cast<const uint4 *>(ps.x + i));
    }
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      const int c = c0 + k * WARPS;
      if (c >= chunks) break;  // the same for the whole warp
      const int i = c * 256 + 8 * lane;
      unsigned bits = 0;  // quads 2 lane and 2 lane + 1
      if (vec && i + 8 <= n) {
        const unsigned word[4] = {u[k].x, u[k].y, u[k].z, u[k].w};
#pragma unroll
        for (int e = 0; e < 8; e++)
          bits |= (unsigned)(key16((unsigned short)(word[e >> 1] >> ((e & 1) << 4))) >= lo) << (e >> 2);
      } else {
        for (int e = 0; e < 8 && i + e < n; e++) bits |= (unsigned)(key16(__ldg(ps.x + i + e)) >= lo) << (e >> 2);
      }
      unsigned word = bits << (2 * (lane & 15));
#pragma unroll
      for (int d = 1; d < 16; d <<= 1) word |= __shfl_xor_sync(0xffffffffu, word, d);
      const unsigned hi = __shfl_sync(0xffffffffu, word, 16);
      if (lane == 0) p.quads[c] = ((unsigned long long)hi << 32) | word;
    }
  }
  __syncthreads();
}

// list_first returns the first position j of a list of n entries at which
// hit(the inclusive sum of val(0..j)) holds, hit monotone (once true, true
// for every larger sum); -1 where it holds nowhere. Thread t sums a
// contiguous stretch; one block scan places the stretches.
template <int BLOCK, typename Val, typename Hit>
__device__ int list_first(int n, Val val, Hit hit, RowShared<BLOCK> &sh) {
  const int per = (n + BLOCK - 1) / BLOCK;
  const int lo = min(n, (int)threadIdx.x * per), hi = min(n, lo + per);
  unsigned long long s = 0, excl;
  for (int j = lo; j < hi; j++) s += val(j);
  cub::BlockScan<unsigned long long, BLOCK>(sh.red.s.scan).ExclusiveSum(s, excl);
  if (threadIdx.x == 0) sh.found = 0x7fffffff;
  __syncthreads();
  if (lo < hi && hit(excl + s) && (threadIdx.x == 0 || !hit(excl))) {
    unsigned long long run = excl;
    for (int j = lo; j < hi; j++) {
      run += val(j);
      if (hit(run)) {
        atomicMin(&sh.found, j);
        break;
      }
    }
  }
  __syncthreads();
  const int r = sh.found;
  __syncthreads();
  return r == 0x7fffffff ? -1 : r;
}

// pattern_filter is make_filter (rowops.cuh) on the list of distinct
// values: the same Filter, bit for bit. With values in descending order,
// the k-th largest weight is the weight at the first position whose
// inclusive count reaches k (descend's "smallest v with fewer than k
// tokens above it"), and top-p's cut the weight at the first position
// whose inclusive fixed-point mass, as a double, reaches top_p * Z'. Only
// the lowest_index tie cut still reads the row (an ordered scan).
template <typename T, int BLOCK>
__device__ Filter pattern_filter(const PSource<T> &ps, int n, const RowParams &rp, int r, int flags,
                                 PatternSmem<BLOCK> &p) {
  RowShared<BLOCK> &sh = p.sh;
  const int nd = p.n;
  Filter f = filter_switches(rp, r, n);
  const int k = rp.top_k[r];
  const float top_p = rp.top_p[r];
  const bool lowest = flags & SV_TIES_LOWEST_INDEX;
  int room = 0;
  if (f.topk) {
    const int j = list_first<BLOCK>(
        nd, [&](int j) { return (unsigned long long)p.cnt[j]; },
        [k](unsigned long long c) { return c >= (unsigned long long)k; }, sh);
    f.tau_k = j >= 0 ? p.w[j] : 0.0f;  // fewer than k finite tokens: the zero weights tie at the cut
    if (lowest) {
      const float tau = f.tau_k;
      int above = 0;
      for (int j = threadIdx.x; j < nd; j += BLOCK) above += p.w[j] > tau ? p.cnt[j] : 0;
      room = k - Reduce<BLOCK>::sum(sh.red, above);  // >= 1
      f.tie_cut = scan_find<BLOCK, 8>(
          0, n, (unsigned long long)(room - 1), [&](int i) { return (unsigned long long)(ps(i) == tau); }, sh);
    }
  }
  if (f.topp) {
    const bool joint = flags & SV_ORDER_JOINT;
    const bool by_k = f.topk && !joint;
    const float tau = f.tau_k;
    unsigned long long z = 0;
    for (int j = threadIdx.x; j < nd; j += BLOCK) {
      const float v = p.w[j];
      if (by_k && (v < tau || (lowest && v == tau))) continue;  // the tied room is added below
      z += (unsigned long long)p.cnt[j] * weight(v);
    }
    z = Reduce<BLOCK>::sum(sh.red, z);
    if (by_k && lowest) z += (unsigned long long)room * weight(tau);
    const double limit = (double)top_p * (double)z;
    const int j = list_first<BLOCK>(
        nd, [&](int j) { return (unsigned long long)p.cnt[j] * weight(p.w[j]); },
        [limit](unsigned long long mass) { return (double)mass >= limit; }, sh);
    f.cut_p = j >= 0 ? p.w[j] : 0.0f;
  }
  return f;
}

// pattern_pick_quads is pattern_pick for a source with quads (few of the
// row's tokens kept): thread t sums the quads of its stretch of chunks
// (8-byte loads of the quads' tokens), one block scan finds the thread
// whose stretch holds the target, and it walks its quads in order.
template <typename T, int BLOCK>
__device__ int pattern_pick_quads(const PSource<T> &ps, int n, const Filter *f, uint64_t u, PatternSmem<BLOCK> &p) {
  const Kept keep(ps.filtered ? nullptr : f);
  const int chunks = (n + 255) / 256, per = (chunks + BLOCK - 1) / BLOCK;
  const int c_lo = min(chunks, (int)threadIdx.x * per), c_hi = min(chunks, c_lo + per);
  unsigned long long mine = 0, excl, total;
  for (int c = c_lo; c < c_hi; c++)
    for (unsigned long long m = ps.quads[c]; m; m &= m - 1) {
      const int i = 256 * c + 4 * (__ffsll((long long)m) - 1);
      float v[4];
      ps.four(i, n, v);
#pragma unroll
      for (int e = 0; e < 4; e++) mine += weight(keep(i + e, v[e]));
    }
  cub::BlockScan<unsigned long long, BLOCK>(p.sh.red.s.scan).ExclusiveSum(mine, excl, total);
  if (threadIdx.x == 0) p.token = -1;
  __syncthreads();
  if (total > 0) {
    const unsigned long long t = pick(u, total);
    if (excl <= t && t < excl + mine) {
      unsigned long long rem = t - excl;
      for (int c = c_lo; c < c_hi && p.token < 0; c++)
        for (unsigned long long m = ps.quads[c]; m; m &= m - 1) {
          const int i = 256 * c + 4 * (__ffsll((long long)m) - 1);
          float v[4];
          ps.four(i, n, v);
          int e = 0;
          for (; e < 4; e++) {
            const unsigned long long w = weight(keep(i + e, v[e]));
            if (rem < w) break;
            rem -= w;
          }
          if (e < 4) {
            p.token = i + e;
            break;
          }
        }
    }
  }
  __syncthreads();
  const int token = p.token;
  __syncthreads();
  return token;
}

// pattern_pick is sample_row's inverse CDF draw on a pattern source: the
// first token whose inclusive prefix sum of kept fixed-point weights
// exceeds pick(u, total), -1 when the total is 0. Each warp sums a
// contiguous stretch of the row with coalesced 16-byte loads (the
// per-thread segments of seg_total would read 2 bytes at a time across
// the whole row); the stretch that holds the target is found from the
// warps' sums, and its warp walks it 256 tokens a step.
template <typename T, int BLOCK>
__device__ int pattern_pick(const PSource<T> &ps, int n, const Filter *f, uint64_t u, PatternSmem<BLOCK> &p) {
  if (ps.quads) return pattern_pick_quads<T, BLOCK>(ps, n, f, u, p);
  constexpr int WARPS = BLOCK / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int stretch = ((n + WARPS - 1) / WARPS + 255) / 256 * 256;
  const bool vec = (reinterpret_cast<uintptr_t>(ps.x) & 15) == 0;
  const Kept keep(ps.filtered ? nullptr : f);
  // eight is the kept fixed-point weights of tokens [i, i + 8) below hi.
  auto eight = [&](int i, int hi, unsigned long long (&v)[8]) {
    if (vec && i + 8 <= hi) {
      const uint4 q = __ldg(reinterpret_cast<const uint4 *>(ps.x + i));
      const unsigned word[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const unsigned b = (word[e >> 1] >> ((e & 1) << 4)) & 0xffffu;
        v[e] = weight(keep(i + e, ps.at(i + e, b)));
      }
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) v[e] = i + e < hi ? weight(keep(i + e, ps(i + e))) : 0ull;
    }
  };
  const int lo = min(n, warp * stretch), hi = min(n, lo + stretch);
  unsigned long long s = 0;
  for (int i = lo + 8 * lane; i < hi; i += 256) {
    unsigned long long v[8];
    eight(i, hi, v);
#pragma unroll
    for (int e = 0; e < 8; e++) s += v[e];
  }
#pragma unroll
  for (int d = 16; d >= 1; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
  if (lane == 0) p.warp_sum[warp] = s;
  if (threadIdx.x == 0) p.token = -1;
  __syncthreads();
  unsigned long long total = 0;
  for (int w = 0; w < WARPS; w++) total += p.warp_sum[w];
  if (total > 0) {
    unsigned long long rem = pick(u, total);
    int at = 0;
    while (rem >= p.warp_sum[at]) rem -= p.warp_sum[at++];  // ends: rem < total
    if (warp == at) {
      for (int base = lo; base < hi; base += 256) {
        const int i = base + 8 * lane;
        unsigned long long v[8], mine = 0;
        eight(i, hi, v);
#pragma unroll
        for (int e = 0; e < 8; e++) mine += v[e];
        unsigned long long incl = mine;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
          const unsigned long long o = __shfl_up_sync(0xffffffffu, incl, d);
          if (lane >= d) incl += o;
        }
        const unsigned long long step = __shfl_sync(0xffffffffu, incl, 31);
        if (rem < step) {
          if (incl - mine <= rem && rem < incl) {
            unsigned long long run = incl - mine;
#pragma unroll
            for (int e = 0; e < 8; e++) {
              run += v[e];
              if (run > rem) {
                p.token = i + e;
                break;
              }
            }
          }
          break;
        }
        rem -= step;
      }
    }
  }
  __syncthreads();
  const int token = p.token;
  __syncthreads();
  return token;
}

// KeyCut is the rule of a rejection round's candidates on an unfiltered
// pattern source, as keys (key16): token i is a candidate iff its key
// exceeds tied where i < tie_end, else above; each threshold (the least
// candidate key minus one) held in both halves of a word.
struct KeyCut {
  unsigned above, tied;
  int tie_end;

  // take8 is the candidates among tokens [i, i + 8) of patterns u (token
  // i + e in half e & 1 of word e >> 1), as bit e. Only the one group that
  // holds tie_end compares with both thresholds.
  __host__ __device__ __forceinline__ unsigned take8(const uint4 &u, int i) const {
    auto bits = [&](unsigned t) {
      const unsigned r = (above16x2(key16x2(u.x), t) >> 15) | (above16x2(key16x2(u.y), t) >> 13) |
                         (above16x2(key16x2(u.z), t) >> 11) | (above16x2(key16x2(u.w), t) >> 9);
      return (r | (r >> 15)) & 0xffu;  // bits 16 + 2q to 2q + 1
    };
    unsigned m = bits(i + 8 <= tie_end ? tied : above);
    if (i < tie_end && tie_end < i + 8) m |= bits(tied) & ((1u << (tie_end - i)) - 1u);  // tied <= above
    return m;
  }
};

// pattern_cut is sample_row's rejection rule for the tokens ordered before
// the drawn token c, weight(v) > 0 and (v > w_c, or under lowest_index
// v == w_c and i < c), on the unfiltered source ps (the one rejection
// draws from), as a KeyCut. The list holds the row's values in descending
// key order, their weights never rising, so the positions that pass either
// half of the rule are a prefix of the list (found by bisection; the
// weight 0 at position p.n ends every prefix), and the row's patterns at
// those positions are those whose keys reach the key at the prefix's last:
// c's key where the prefix ends at c, c's key plus one where it ends just
// before c, and otherwise (other values of c's weight) the least key whose
// position is inside it, from one pass over the position table. -inf
// (position p.n) and the patterns absent from the row (0xffff) are inside
// no prefix.
template <typename T, int BLOCK>
__device__ KeyCut pattern_cut(const PSource<T> &ps, int c, bool lowest, PatternSmem<BLOCK> &p) {
  const int nd = p.n;
  const unsigned kc = key16(__ldg(ps.x + c));
  const int jc = ps.pos[kc];
  const float wc = ps.w[jc];  // ps(c)
  auto end = [&](bool or_equal) {
    int lo = -1, hi = nd;
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      const float v = ps.w[mid];
      if (weight(v) > 0 && (v > wc || (or_equal && v == wc)))
        lo = mid;
      else
        hi = mid;
    }
    return hi;
  };
  const int e_above = end(false), e_tied = lowest ? end(true) : e_above;
  // For an e that near accepts, least_key(e) is the least key at a position below e (0x10000: none).
  auto near = [&](int e) { return e == 0 || (jc < nd && (e == jc || e == jc + 1)); };
  auto least_key = [&](int e) -> unsigned { return e == 0 ? 0x10000u : e == jc ? kc + 1 : kc; };
  unsigned k_above, k_tied;
  if (near(e_above) && near(e_tied)) {  // the same in every thread
    k_above = least_key(e_above);
    k_tied = least_key(e_tied);
  } else {
    RowShared<BLOCK> &sh = p.sh;
    if (threadIdx.x == 0) sh.found = sh.seg = 0x10000;
    __syncthreads();
    unsigned ka = 0x10000u, kt = 0x10000u;
    for (int j = threadIdx.x; j < kPatterns / 2; j += BLOCK) {
      const unsigned v = p.hist[j];  // key 2 j in the low half; absent keys 0xffff, above every e
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int at = (int)((v >> (16 * h)) & 0xffffu);
        if (at < e_above) ka = min(ka, 2u * j + h);
        if (at < e_tied) kt = min(kt, 2u * j + h);
      }
    }
    if (ka < 0x10000u) atomicMin(&sh.found, (int)ka);
    if (kt < 0x10000u) atomicMin(&sh.seg, (int)kt);
    __syncthreads();
    k_above = (unsigned)sh.found;
    k_tied = (unsigned)sh.seg;
    __syncthreads();
  }
  return KeyCut{(k_above - 1u) * 0x10001u, (k_tied - 1u) * 0x10001u, lowest ? c : 0};
}

// pattern_compact is compact (rowops.cuh) of the row under cut: it writes
// every candidate i < n, in index order, with its weight ps(i) to out_idx
// and out_w, and returns how many, to every thread. compact walks the row
// in tiles of 4096 tokens, each a table lookup a token, a block scan and
// two barriers; here the rule is on the patterns alone, and the row takes
// two barriers. Warp w owns a contiguous stretch of 256-token chunks, lane
// l tokens [8 l, 8 l + 8) of each, read with 16-byte loads, UNROLL chunks
// in flight. The first pass counts each warp's candidates and notes, a
// word a chunk in p.sh's radix counters (unused on the pattern path), the
// lanes that hold any; one barrier places the warps' lists; the second
// pass reads again only those lanes' 16 bytes (still in the L2) and
// writes, a warp scan a chunk ordering the lanes. ps must be unfiltered.
template <typename T, int BLOCK>
__device__ int pattern_compact(const PSource<T> &ps, int n, const KeyCut &cut, int *out_idx, float *out_w,
                               PatternSmem<BLOCK> &p) {
  constexpr int WARPS = BLOCK / 32, UNROLL = 4;
  static_assert(sizeof(p.sh.hist_count) / sizeof(unsigned) >= kMaxLeaves, "a word for every chunk");
  unsigned *lanes = p.sh.hist_count;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int chunks = (n + 255) / 256, per = (chunks + WARPS - 1) / WARPS;
  const int c_lo = min(chunks, warp * per), c_hi = min(chunks, c_lo + per);
  const bool vec = (reinterpret_cast<uintptr_t>(ps.x) & 15) == 0;
  // group is the patterns of tokens [i, i + 8); past n, 0xffff (key 0, never a candidate).
  auto group = [&](int i) {
    if (vec && i + 8 <= n) return __ldg(reinterpret_cast<const uint4 *>(ps.x + i));
    unsigned h[8];
#pragma unroll
    for (int e = 0; e < 8; e++) h[e] = i + e < n ? (unsigned)__ldg(ps.x + i + e) : 0xffffu;
    return make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
  };
  unsigned count = 0;
  for (int c0 = c_lo; c0 < c_hi; c0 += UNROLL) {
    uint4 u[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; k++)
      if (c0 + k < c_hi) u[k] = group(256 * (c0 + k) + 8 * lane);
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      if (c0 + k >= c_hi) break;  // the same for the whole warp
      const unsigned m = cut.take8(u[k], 256 * (c0 + k) + 8 * lane);
      count += __popc(m);
      const unsigned any = __ballot_sync(0xffffffffu, m != 0);
      if (lane == 0) lanes[c0 + k] = any;
    }
  }
#pragma unroll
  for (int d = 16; d >= 1; d >>= 1) count += __shfl_xor_sync(0xffffffffu, count, d);
  if (lane == 0) p.warp_sum[warp] = count;
  __syncthreads();
  int base = 0, total = 0;
  for (int w = 0; w < WARPS; w++) {
    const int s = (int)p.warp_sum[w];
    base += w < warp ? s : 0;
    total += s;
  }
  for (int c0 = c_lo; c0 < c_hi; c0 += UNROLL) {
    uint4 u[UNROLL];
    unsigned any[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      any[k] = c0 + k < c_hi ? lanes[c0 + k] : 0u;
      if ((any[k] >> lane) & 1u) u[k] = group(256 * (c0 + k) + 8 * lane);
    }
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      if (any[k] == 0) continue;  // the same for the whole warp
      const int i = 256 * (c0 + k) + 8 * lane;
      unsigned m = (any[k] >> lane) & 1u ? cut.take8(u[k], i) : 0u;
      const unsigned mine = __popc(m), before = warp_exclusive(mine);
      int at = base + (int)before;
      base += (int)__shfl_sync(0xffffffffu, before + mine, 31);
      const unsigned long long lo = ((unsigned long long)u[k].y << 32) | u[k].x;
      const unsigned long long hi = ((unsigned long long)u[k].w << 32) | u[k].z;
      for (; m; m &= m - 1u, at++) {
        const int e = __ffs(m) - 1;
        const unsigned b = (unsigned)((e < 4 ? lo : hi) >> (16 * (e & 3))) & 0xffffu;
        out_idx[at] = i + e;
        out_w[at] = ps.at(i + e, b);
      }
    }
  }
  __syncthreads();  // the list is written before any thread reads it, and lanes read before it is reused
  return total;
}

// pattern_candidates is rejection's first compaction on row x's
// unfiltered pattern source (pattern_source over p): the candidates
// ordered before the drawn token c (pattern_cut), written by
// pattern_compact; it returns how many. Not inlined, so that its registers
// stay out of the kernels that inline the other draws
// (sample_flagged_kernel spilled more with it inlined), and it builds the
// source itself: one passed by reference would live in local memory in
// the caller.
template <typename T, int BLOCK>
__device__ __noinline__ int pattern_candidates(const T *x, int n, int c, bool lowest, int *out_idx, float *out_w,
                                               PatternSmem<BLOCK> &p) {
  const PSource<T> ps = pattern_source<T>(x, p);
  return pattern_compact<T, BLOCK>(ps, n, pattern_cut<T, BLOCK>(ps, c, lowest, p), out_idx, out_w, p);
}

// pattern_write writes out[i] = g(i, w_i) for every token of the row (g
// must give 0 for a weight of 0 outside the quads, where it is not asked):
// four tokens a thread, with 8-byte loads and 16-byte stores where both
// rows are aligned, so that each store of a warp fills 512 contiguous
// bytes (one store a token, from lanes 32 bytes apart, costs a sector
// each). On sm_90, a whole 256-token chunk outside the quads (most of a
// filtered row) is written by one 1 KB bulk store from zeros (shared
// memory): one block an SM stores far below the copy bandwidth with its
// threads, which made this the path's slowest step.
template <int BLOCK, typename T, typename G>
__device__ void pattern_write(const PSource<T> &ps, int n, float *out, float4 *zeros, G &&g) {
  if ((reinterpret_cast<uintptr_t>(ps.x) & 7) || (reinterpret_cast<uintptr_t>(out) & 15)) {
    ps.template each<BLOCK>(n, [&](int i, float w) { out[i] = g(i, w); });
    return;
  }
  constexpr int UNROLL = 4;
  const int nq = n / 4;
  const uint2 *xv = reinterpret_cast<const uint2 *>(ps.x);
  float4 *ov = reinterpret_cast<float4 *>(out);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int bulk_chunks = ps.quads ? n / 256 : 0;  // whole chunks only
#else
  const int bulk_chunks = 0;
#endif
  bool issued = false;
  if (bulk_chunks > 0) {  // the same in every thread
    if (threadIdx.x < 64) zeros[threadIdx.x] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    bulk_fence();  // the zeros, written by threads, visible to the bulk copies
    __syncthreads();
  }
  for (int c = threadIdx.x; c < bulk_chunks; c += BLOCK)
    if (ps.quads[c] == 0) {
      bulk_store(ov + 64 * c, zeros, 1024);
      issued = true;
    }
  for (int j0 = threadIdx.x; j0 < nq; j0 += BLOCK * UNROLL) {
    uint2 u[UNROLL];
    bool need[UNROLL];  // outside the quads, every weight reads 0 and g gives 0: no load
    bool bulk[UNROLL];  // written by a bulk store
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      const int j = j0 + k * BLOCK;
      const unsigned long long q = j < nq && ps.quads ? ps.quads[j >> 6] : ~0ull;
      bulk[k] = (j >> 6) < bulk_chunks && q == 0;
      need[k] = j < nq && ((q >> (j & 63)) & 1);
      if (need[k]) u[k] = __ldg(xv + j);
    }
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      const int j = j0 + k * BLOCK;
      if (j < nq && !bulk[k]) {
        const int i = 4 * j;
        ov[j] = need[k] ? make_float4(g(i, ps.at(i, u[k].x & 0xffffu)), g(i + 1, ps.at(i + 1, u[k].x >> 16)),
                                      g(i + 2, ps.at(i + 2, u[k].y & 0xffffu)),
                                      g(i + 3, ps.at(i + 3, u[k].y >> 16)))
                        : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
  }
  for (int i = 4 * nq + threadIdx.x; i < n; i += BLOCK) out[i] = g(i, ps(i));
  if (issued) bulk_wait();  // before the block moves on (its shared memory is the source)
}

// FullRowKernels are a full-row kernel's two variants for one dtype: by
// pattern (16-bit logits; the same kernel as tokens for f32) and per token.
template <typename K>
struct FullRowKernels {
  K pattern, tokens;
};

// FullRowLaunch is the full-row kernel a launcher runs and its dynamic
// shared memory.
template <typename K>
struct FullRowLaunch {
  K kern;
  size_t smem;
};

// full_row_variant picks a full-row kernel of BLOCK threads: the pattern
// variant (want: the logits are 16-bit) where the device runs it from an
// sm_90 binary (the sm_80 pass compiles it empty) and gives it its shared
// memory, else the per-token one.
template <int BLOCK, typename K>
inline FullRowLaunch<K> full_row_variant(K pattern, K tokens, bool want) {
  constexpr size_t smem = sizeof(PatternSmem<BLOCK>);
  if (want && sm90_binary((const void *)pattern) && smem_ready((const void *)pattern, smem)) return {pattern, smem};
  return {tokens, 0};
}

// full_row_shared is a full-row kernel's RowShared: with PATTERN the one in
// the pattern tables (pat set to them, in dynamic shared memory), else a
// block-wide one of its own (pat null).
template <int BLOCK, bool PATTERN>
__device__ __forceinline__ RowShared<BLOCK> &full_row_shared(PatternSmem<BLOCK> *&pat) {
  if constexpr (PATTERN) {
    pat = &pattern_smem<BLOCK>();
    return pat->sh;
  } else {
    __shared__ RowShared<BLOCK> own;
    pat = nullptr;
    return own;
  }
}

}  // namespace sv
