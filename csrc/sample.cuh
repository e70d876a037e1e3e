// sample.cuh: sample's kernels: seeded draws from the renorm distribution,
// drawing exactly the tokens engine/cpu draws for the same seed, offset
// and method.
//
//
// Draws use fixed-point weights (philox.Weight, p * 2^40) summed as
// integers, exact in any order, and find the first token whose inclusive
// prefix exceeds philox.Pick(u, total), so no draw depends on a summation
// order. 16-bit rows take their weights from a table of their distinct
// values where they can (patterns.cuh). Methods:
//   - inverse CDF: filters as thresholds (rowops.cuh), one pass summing each
//     thread's segment of the row, then one block scan over the segment
//     sums and one ordered scan of the segment that holds the target;
//   - Gumbel-max over the logits: one Philox block per 4 tokens, f32math
//     logs, the first maximum of the scores over the kept tokens; without
//     filters and for single draws, gumbel_kernel reads the row once with
//     hardware logs and computes f32math's scores only for the tokens that
//     can win (its comment says why that is exact);
//   - sort-free rejection: draw from the candidates, accept if the filters
//     keep it, else keep only the tokens ordered before it;
//   - mixed batches: greedy rows through the indexed argmax in one launch
//     (sample.cu), the sampled rows one block each;
//   - many draws: each sampled row's CDF is written once (a block scan),
//     then one thread per draw binary-searches it: 10^6 draws per row cost
//     one pass plus 10^6 * log2(V) cached reads.
//
// Single draws by inverse CDF from rows whose filters are decided inside
// their top-k set take the top-k fast path (fastrow.cuh); the full-row
// kernels serve every other row, by distinct value where the row is 16-bit
// (patterns.cuh), else per token. Where no row of a launch has a filter, a
// lean full-row kernel (no filter code: fewer registers, two blocks an SM)
// serves them, or for bf16 single draws by inverse CDF table_kernel (the
// weights from a table of the row's patterns, ptable.cuh); where top-p is
// the only filter (SV_TOP_P_ONLY), bf16 single draws by inverse CDF take
// topp_kernel (the window's patterns counted for the cut, then
// table_kernel's draw), or for one wave of rows topp_held_kernel (the same
// with the row held in a cluster's shared memory), in place of the top-k
// fast path.
//
// The kernels are compiled in csrc/instances/ (sample_fast_*.cu,
// sample_tokens_*.cu, sample_pattern_*.cu), so that the build runs them
// side by side; sample.cu, the launcher, takes them by pointer.
#pragma once

#include "fastrow.cuh"
#include "patterns.cuh"
#include "ptable.cuh"

namespace sv {

constexpr int kSampleBlock = 512;
// kGumbelBlock threads, two blocks an SM, serve a row in gumbel_kernel.
constexpr int kGumbelBlock = 512;

// SampleArgs are the full-row kernels' arguments (and the fast kernels',
// for the rows they serve themselves).
struct SampleArgs {
  int vocab;
  RowParams rp;
  int flags;
  const int *rows;  // the sampled rows
  int *tokens;
  float *wbuf;                   // [n_sampled, vocab]
  unsigned long long *cdf;       // [n_sampled, vocab] or null
  unsigned long long *totals;    // [n_sampled] or null
  int *list_idx;                 // rejection candidates [n_sampled, wstride(vocab)] or null
  float *list_w;
};

// The kernels' types for logits of T, and one dtype's full-row kernels:
// with filters, without (lean), and on the rows a fast kernel flagged.
template <typename T>
using SampleFastKernel = void (*)(const T *__restrict__, FastArgs, int *, SampleArgs);
template <typename T>
using SampleKernel = void (*)(const T *__restrict__, SampleArgs);
template <typename T>
using SampleFlaggedKernel = void (*)(const T *__restrict__, SampleArgs, const int *__restrict__, int);
template <typename T>
using SampleToppKernel = void (*)(const T *__restrict__, SampleArgs, int *__restrict__);
template <typename T>
struct SampleFullKernels {
  SampleKernel<T> filtered, lean;
  SampleFlaggedKernel<T> flagged;
  SampleKernel<T> gumbel;  // unfiltered Gumbel-max, single draws (per-token families only, else null)
  SampleKernel<T> table;   // unfiltered bf16 inverse CDF, single draws (per-token family only, else null)
  SampleToppKernel<T> topp;  // bf16 inverse CDF under top-p alone, single draws (likewise)
  SampleToppKernel<T> topp_held;  // the same, the row held in a cluster's shared memory (sm_90)
};

// One dtype's kernels, each family defined in its own translation unit
// (csrc/instances/): the fast kernels, the full-row kernels per token, and
// (16-bit logits) the full-row kernels by pattern.
FastKernels<SampleFastKernel<float>> sample_fast_kernels(const float *);
FastKernels<SampleFastKernel<__half>> sample_fast_kernels(const __half *);
FastKernels<SampleFastKernel<__nv_bfloat16>> sample_fast_kernels(const __nv_bfloat16 *);
SampleFullKernels<float> sample_token_kernels(const float *);
SampleFullKernels<__half> sample_token_kernels(const __half *);
SampleFullKernels<__nv_bfloat16> sample_token_kernels(const __nv_bfloat16 *);
SampleFullKernels<__half> sample_pattern_kernels(const __half *);
SampleFullKernels<__nv_bfloat16> sample_pattern_kernels(const __nv_bfloat16 *);

namespace {

// kept_weight_all is the fixed-point weight of every token (no filter).
template <typename Src>
struct kept_weight_all {
  const Src &w;
  __device__ explicit kept_weight_all(const Src &src) : w(src) {}
  __device__ __forceinline__ unsigned long long operator()(int i) const { return weight(w(i)); }
};

// sample_row draws row's token with the method of flags from the weights of
// src (filtered by f when not null) and, when a.cdf is set, writes the
// row's CDF for the many-draws kernel. pat is the pattern tables behind
// src when src is a PSource (patterns.cuh), else null.
template <typename T, int BLOCK, typename Src>
__device__ void sample_row(const SampleArgs &a, const T *x, const RowStat &st, float temp, int slot, int row,
                          const Src &w, const Filter *f, RowShared<BLOCK> &sh, PatternSmem<BLOCK> *pat) {
  const int n = a.vocab;
  const Stream rng(a.rp.seed[row], a.rp.offset[row], row, 0);
  int method = (a.flags >> SV_METHOD_SHIFT) & 15;
  if (method == SV_METHOD_AUTO) method = SV_METHOD_INVERSE_CDF;
  auto kept_weight = [&](int i) -> unsigned long long { return weight(masked(f, i, w(i))); };

  int token = -1;
  if (method == SV_METHOD_GUMBEL) {
    ArgBest best{-kInf, 0x7fffffff};
    for (int q = threadIdx.x; q < (n + 3) / 4; q += BLOCK) {
      const uint4 words = rng.block((uint64_t)q);
      const uint32_t word[4] = {words.x, words.y, words.z, words.w};
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int i = 4 * q + e;
        if (i >= n) break;
        if (f && !f->kept(i, w(i))) continue;
        const float g = -f32_log(-f32_log(open_u01(word[e])));
        const float score = __fadd_rn(scaled(load_f32(x, i), st.m, temp), g);
        if (better(score, i, best)) best = ArgBest{score, i};
      }
    }
    best = Reduce<BLOCK>::argbest(sh.red, best);
    token = best.i == 0x7fffffff ? -1 : best.i;
  } else if (method == SV_METHOD_REJECTION) {
    const bool lowest = a.flags & SV_TIES_LOWEST_INDEX;
    // Round 0 draws from every token of positive weight: on a pattern
    // source by pattern_pick (one coalesced pass; seg_total's per-thread
    // segments read 2 bytes at a time across the row, twice).
    unsigned long long mine, total = 0;
    int c;
    if constexpr (IsPatternSource<Src>::value) {
      c = pattern_pick<T, BLOCK>(w, n, nullptr, rng.u64(0), *pat);
    } else {
      total = seg_total<BLOCK>(n, kept_weight_all(w), mine, sh);
      c = total > 0 ? seg_find<BLOCK>(n, pick(rng.u64(0), total), mine, kept_weight_all(w), sh) : -1;
    }
    if (c >= 0 && (!f || f->kept(c, w(c)))) {
      token = c;
    } else if (c >= 0 && a.list_idx) {
      // The candidates become the tokens ordered before c: keep them, in
      // index order, in a list that shrinks every round, so later rounds
      // read the candidates, not the row.
      int *lidx = a.list_idx + (size_t)slot * wstride(n);
      float *lw = a.list_w + (size_t)slot * wstride(n);
      float bw = w(c);
      int bi = c;
      int len;
      if constexpr (IsPatternSource<Src>::value) {
        // w is x's unfiltered pattern source (sample_patterns narrows it
        // for the other methods only), whose candidates are a rule on the
        // patterns alone (pattern_cut).
        len = pattern_candidates<T, BLOCK>(x, n, c, lowest, lidx, lw, *pat);
      } else {
        len = compact<BLOCK, 8>(
            n, [&](int i) { const float v = w(i); return weight(v) > 0 && (v > bw || (lowest && v == bw && i < bi)); },
            [&](int i, int &id, float &v) { id = i, v = w(i); }, lidx, lw, sh);
      }
      for (uint64_t round = 1; len > 0; round++) {
        auto lweight = [&](int k) -> unsigned long long { return weight(lw[k]); };
        total = seg_total<BLOCK>(len, lweight, mine, sh);
        const int p = seg_find<BLOCK>(len, pick(rng.u64(round), total), mine, lweight, sh);
        if (p < 0) break;
        const int cand = lidx[p];
        const float wc = lw[p];
        if (f->kept(cand, wc)) {
          token = cand;
          break;
        }
        bw = wc;
        bi = cand;
        len = compact<BLOCK, 8>(
            len, [&](int k) { const float v = lw[k]; return v > bw || (lowest && v == bw && lidx[k] < bi); },
            [&](int k, int &id, float &v) { id = lidx[k], v = lw[k]; }, lidx, lw, sh);
      }
    } else if (c >= 0) {  // no list space: rounds over the whole row
      float bw = w(c);
      int bi = c;
      for (uint64_t round = 1;; round++) {
        auto cand = [&](int i) -> unsigned long long {
          const float v = w(i);
          if (!(v > bw || (lowest && v == bw && i < bi))) return 0ull;
          return weight(v);
        };
        total = seg_total<BLOCK>(n, cand, mine, sh);
        if (total == 0) break;
        const int d = seg_find<BLOCK>(n, pick(rng.u64(round), total), mine, cand, sh);
        if (d < 0) break;
        const float wd = w(d);
        if (f->kept(d, wd)) {
          token = d;
          break;
        }
        bw = wd;
        bi = d;
      }
    }
  } else if constexpr (IsPatternSource<Src>::value) {
    token = pattern_pick<T, BLOCK>(w, n, f, rng.u64(0), *pat);
  } else {
    unsigned long long mine;
    const unsigned long long total = seg_total<BLOCK>(n, kept_weight, mine, sh);
    if (total > 0) token = seg_find<BLOCK>(n, pick(rng.u64(0), total), mine, kept_weight, sh);
  }
  if (threadIdx.x == 0) a.tokens[row] = token;

  if (a.cdf) {
    const unsigned long long total = scan_write<BLOCK, 8>(n, kept_weight, a.cdf + (size_t)slot * n, sh);
    if (threadIdx.x == 0) a.totals[slot] = total;
  }
}

// sample_tokens is sample_slot's per-token path: row_stat, then an exact
// weight per token (filtered rows: into a scratch row of a.wbuf), the
// filters by radix descent, and the draw. FILTERS = false is the lean
// variant for launches where no row has a filter on: fewer registers,
// more blocks per SM.
template <typename T, int BLOCK, bool FILTERS>
__device__ __forceinline__ void sample_tokens(const T *x, const SampleArgs &a, int slot, int row,
                                              RowShared<BLOCK> &sh) {
  const int n = a.vocab;
  const RowStat st = row_stat<T, BLOCK>(x, n, sh);
  const float temp = a.rp.temperature[row];
  if (!st.valid || temp == 0.0f) {  // the host lists greedy rows apart; stay exact anyway
    if (threadIdx.x == 0) {
      a.tokens[row] = st.valid ? st.arg : -1;
      if (a.totals) a.totals[slot] = 0;
    }
    return;
  }
  if (FILTERS && active_filters(a.rp, row, n)) {
    float *wrow = a.wbuf + (size_t)slot * wstride(n);
    fill_weights<T, BLOCK>(x, n, st.m, temp, wrow);
    const WSource ws{wrow};
    const Filter f = make_filter<BLOCK>(ws, n, a.rp, row, a.flags, sh);
    sample_row<T, BLOCK>(a, x, st, temp, slot, row, ws, &f, sh, (PatternSmem<BLOCK> *)nullptr);
  } else {
    sample_row<T, BLOCK>(a, x, st, temp, slot, row, XSource<T>{x, st.m, temp}, (const Filter *)nullptr, sh,
                         (PatternSmem<BLOCK> *)nullptr);
  }
}

// sample_tokens_call is sample_tokens, not inlined: a pattern kernel calls
// it for the rows the pattern path cannot take, and inlined, its registers
// would add to the pattern path's (spills, in a block whose shared memory
// leaves L1 little room for them).
template <typename T, int BLOCK, bool FILTERS>
__device__ __noinline__ void sample_tokens_call(const T *x, const SampleArgs &a, int slot, int row,
                                                RowShared<BLOCK> &sh) {
  sample_tokens<T, BLOCK, FILTERS>(x, a, slot, row, sh);
}

// sample_patterns draws from a row whose tables pattern_ready built: the
// same filters and draws as sample_tokens, on weights from the tables.
template <typename T, int BLOCK, bool FILTERS>
__device__ __noinline__ void sample_patterns(const T *x, const SampleArgs &a, int slot, int row,
                                             PatternSmem<BLOCK> &p) {
  const int n = a.vocab;
  const RowStat st{p.m, 0, true};
  const float temp = a.rp.temperature[row];
  PSource<T> ps = pattern_source<T>(x, p);
  if (FILTERS && active_filters(a.rp, row, n)) {
    const Filter f = pattern_filter<T, BLOCK>(ps, n, a.rp, row, a.flags, p);
    // Rejection's first round draws from every token; the other methods
    // read the weights only through f.
    if (((a.flags >> SV_METHOD_SHIFT) & 15) != SV_METHOD_REJECTION) {
      pattern_narrow<T, BLOCK>(ps, f, p);  // from here on ps reads the kept weights
      pattern_quads<T, BLOCK>(ps, n, p);
      ps.quads = p.quads;
    }
    sample_row<T, BLOCK>(a, x, st, temp, slot, row, ps, &f, p.sh, &p);
  } else {
    sample_row<T, BLOCK>(a, x, st, temp, slot, row, ps, (const Filter *)nullptr, p.sh, &p);
  }
}

// sample_slot draws slot's row. With PATTERN (16-bit T only), pat is the
// block's pattern tables (patterns.cuh; sh is pat->sh), and a row that can
// take the pattern path takes it.
template <typename T, int BLOCK, bool FILTERS, bool PATTERN>
__device__ void sample_slot(const T *__restrict__ logits, const SampleArgs &a, int slot, RowShared<BLOCK> &sh,
                            PatternSmem<BLOCK> *pat) {
  const int row = a.rows[slot];
  const T *x = logits + (size_t)row * a.vocab;
  if constexpr (PATTERN && sizeof(T) == 2) {
    const float temp = a.rp.temperature[row];
    const bool filtered = FILTERS && active_filters(a.rp, row, a.vocab);
    // Gumbel-max reads weights only to filter: without filters it needs none.
    if (temp != 0.0f && (filtered || ((a.flags >> SV_METHOD_SHIFT) & 15) != SV_METHOD_GUMBEL)) {
      const PatternOutcome got = pattern_ready<T, BLOCK>(x, a.vocab, temp, *pat);
      if (got == kPatternInvalid) {
        if (threadIdx.x == 0) {
          a.tokens[row] = -1;
          if (a.totals) a.totals[slot] = 0;
        }
        return;
      }
      if (got == kPatternReady) {
        sample_patterns<T, BLOCK, FILTERS>(x, a, slot, row, *pat);
        return;
      }
    }
    sample_tokens_call<T, BLOCK, FILTERS>(x, a, slot, row, sh);
  } else {
    sample_tokens<T, BLOCK, FILTERS>(x, a, slot, row, sh);
  }
}

// sample_kernel serves one slot per block; PATTERN variants take
// sizeof(PatternSmem<BLOCK>) bytes of dynamic shared memory.
template <typename T, int BLOCK, bool FILTERS, bool PATTERN>
__global__ void __launch_bounds__(BLOCK, FILTERS || PATTERN ? 1 : 2)
    sample_kernel(const T *__restrict__ logits, SampleArgs a) {
  if constexpr (PATTERN && !kSm90Pass) {
    return;  // sm_80 pass: never launched from an sm_80 binary (full_row_variant)
  } else {
    PatternSmem<BLOCK> *pat;
    RowShared<BLOCK> &sh = full_row_shared<BLOCK, PATTERN>(pat);
    sample_slot<T, BLOCK, FILTERS, PATTERN>(logits, a, blockIdx.x, sh, pat);
  }
}

// ---- Gumbel-max without filters: one read and an exact recheck ----
//
// gumbel_kernel draws one token a slot by Gumbel-max for launches where no
// row has a filter and no many-draws CDF is written: the first index of the
// maximum of the exact scores E_i = float32(float32((x_i - m) / t) + g_i),
// g_i = -f32_log(-f32_log(open_u01(word))), sample_row's scores, bit for
// bit, while computing f32math's logs for a handful of tokens a row.
//
// One read: each thread takes groups of 8 tokens (two Philox blocks; one
// 16-byte load, two for f32, where the row starts on a 16-byte boundary)
// and scores them approximately in log2 units,
//   A_i = x_i * c - lg2(L),  c = float32(log2(e) / t),  L = -lg2(u) (a
//   series in 1 - u for u within 2^-6 of 1),
// with MUFU.LG2 (lg2.approx), so that A_i ~ log2(e) * E_i + K for a
// constant K of the row. It keeps the row's maximum logit m, max |x_i| (X,
// NaN-propagating) and, for the share, the best group maximum a1 (its
// group) and the best of the other groups' maxima a2.
// Why the recheck is exact: if eps bounds |A_i - (log2(e) * E_i + K)| for
// every token, the exact winner w (first maximum of E) has A_w >= M - 2 eps,
// M the row's best A, so scoring exactly every token with A_i >= M - 2 eps
// and taking the first maximum of those exact scores gives w. A thread
// whose a1 reaches M - 2 eps recomputes its group's 8 approximate scores
// (the same bits: the same intrinsics on the same words) and scores exactly
// those that reach it, usually one token; a thread whose a2 does too scores
// its whole share exactly (more tokens scored exactly never change the
// first maximum).
// The bound: the CUDA C Programming Guide (intrinsic functions) gives
// lg2.approx a maximum absolute error of 2^-22.6 for x in [0.5, 2], else 2
// ulp; with that, a host check over the top 2^22 uniforms of the grid and
// 2^22 random ones (csrc/dev/fast_sampler/eps_check.cpp) bounds the noise
// term's error by 2^-15.8. The logit term is computed the same way on both
// sides up to roundings: x - m, / t and + g in E (f32math's logs add under
// 2^-21), c and the fused multiply-add in A, each within 2^-24 of a value
// below 2 X / |t| + 25 in magnitude (X = max |x_i|), c within 2^-23 of
// log2(e) / t. So |error| < 2^-15.5 + 2^-20.3 X / |t|, and
// eps = 2^-10 + 2^-17 (X + X / |t|) leaves a factor of 9 or more.
// A greedy row, a row with a NaN or infinite logit, or one with
// X (1 + |c|) >= 2^100 (where scores could overflow) takes sample_tokens
// (every score exact). engine/cuda's TestGumbelRecheckModel runs this
// recheck in Go against the exact Gumbel-max, lg2 pushed by its error.
constexpr float kGumbelLog2E = 1.44269504088896341f;
constexpr int kGumbelNone = 0x7fffffff;

// gumbel_lg2 is MUFU.LG2 (flush-to-zero form: its arguments here are
// normal), the same bits wherever it is recomputed.
__device__ __forceinline__ float gumbel_lg2(float x) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// gumbel_max_nan is max(a, b), NaN when either is.
__device__ __forceinline__ float gumbel_max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// gumbel_approx is A = x * c - lg2(-lg2(u)), u = open_u01(w).
__device__ __forceinline__ float gumbel_approx(float x, float c, uint32_t w) {
  const float u = __fmaf_rn((float)(w >> 9), 0x1p-23f, 0x1p-24f);  // open_u01(w), exactly
  const float d = __fsub_rn(1.0f, u);
  const float ser = __fmul_rn(d, __fmaf_rn(d, __fmaf_rn(d, kGumbelLog2E / 3.0f, kGumbelLog2E / 2.0f), kGumbelLog2E));
  const float l = d < 0x1p-6f ? ser : -gumbel_lg2(u);
  return __fmaf_rn(x, c, -gumbel_lg2(l));
}

// GumbelKeys is a row's Philox key schedule and the first round's products
// of the row word, computed once: block(b) == Stream(seed, offset, row, 0).block(b).
struct GumbelKeys {
  uint32_t k0[10], k1[10];
  uint32_t hi_row, lo_row;
  uint64_t offset;
  __device__ __forceinline__ GumbelKeys(uint64_t seed, uint64_t off, uint32_t row) : offset(off) {
    uint32_t a = (uint32_t)seed, b = (uint32_t)(seed >> 32);
#pragma unroll
    for (int i = 0; i < 10; i++) k0[i] = a, k1[i] = b, a += 0x9E3779B9u, b += 0xBB67AE85u;
    hi_row = __umulhi(0xCD9E8D57u, row);
    lo_row = 0xCD9E8D57u * row;
  }
  __device__ __forceinline__ uint4 block(uint64_t blk) const {
    const uint64_t c64 = offset + blk;
    const uint32_t cx = (uint32_t)c64, cy = (uint32_t)(c64 >> 32);
    uint4 c = make_uint4(hi_row ^ cy ^ k0[0], lo_row, __umulhi(0xD2511F53u, cx) ^ k1[0], 0xD2511F53u * cx);
#pragma unroll
    for (int i = 1; i < 10; i++) {
      const uint32_t hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
      const uint32_t hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
      c = make_uint4(hi1 ^ c.y ^ k0[i], lo1, hi0 ^ c.w ^ k1[i], lo0);
    }
    return c;
  }
};

// GumbelRaw is one group's 16 bytes a 16-bit group, 32 for f32.
template <typename T>
struct GumbelRaw {
  uint4 v[sizeof(T) == 4 ? 2 : 1];
};

__device__ __forceinline__ uint4 gumbel_ld(const uint4 *p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

template <typename T>
__device__ __forceinline__ GumbelRaw<T> gumbel_load(const T *x, int g) {
  GumbelRaw<T> r;
  const uint4 *p = reinterpret_cast<const uint4 *>(x) + (sizeof(T) == 4 ? 2 : 1) * g;
#pragma unroll
  for (int k = 0; k < (sizeof(T) == 4 ? 2 : 1); k++) r.v[k] = gumbel_ld(p + k);
  return r;
}

// gumbel_unpack writes a group's 8 logits as floats.
template <typename T>
__device__ __forceinline__ void gumbel_unpack(const GumbelRaw<T> &r, float xs[8]) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int k = 0; k < 8; k++) xs[k] = __uint_as_float(k < 4 ? (&r.v[0].x)[k] : (&r.v[1].x)[k - 4]);
  } else {
    const uint32_t h[4] = {r.v[0].x, r.v[0].y, r.v[0].z, r.v[0].w};
#pragma unroll
    for (int k = 0; k < 8; k++) {
      const uint32_t bits = (k & 1) ? h[k >> 1] >> 16 : h[k >> 1] & 0xffffu;
      if constexpr (std::is_same<T, __nv_bfloat16>::value)
        xs[k] = __uint_as_float(bits << 16);
      else
        xs[k] = __half2float(__ushort_as_half((unsigned short)bits));
    }
  }
}

// GumbelShare is a thread's state over its groups.
struct GumbelShare {
  float mx = -kInf, ax = 0.0f;  // the largest logit, the largest |logit| (NaN if any is)
  float a1 = -kInf, a2 = -kInf;
  int g1 = kGumbelNone;
};

// gumbel_pmax, gumbel_pmin are NaN-propagating max and min of packed 16-bit pairs.
template <typename T>
__device__ __forceinline__ uint32_t gumbel_pmax(uint32_t a, uint32_t b) {
  uint32_t r;
  if constexpr (std::is_same<T, __nv_bfloat16>::value)
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  else
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <typename T>
__device__ __forceinline__ uint32_t gumbel_pmin(uint32_t a, uint32_t b) {
  uint32_t r;
  if constexpr (std::is_same<T, __nv_bfloat16>::value)
    asm("min.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  else
    asm("min.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <typename T>
__device__ __forceinline__ float gumbel_h2f(uint32_t bits) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value)
    return __uint_as_float(bits << 16);
  else
    return __half2float(__ushort_as_half((unsigned short)bits));
}

// gumbel_take scores group g's first cnt tokens (logits xs) approximately.
template <bool STAT = true>
__device__ __forceinline__ void gumbel_take(GumbelShare &s, const GumbelKeys &K, float c, int g, const float xs[8],
                                            int cnt) {
  const uint4 w0 = K.block((uint64_t)(2 * g)), w1 = K.block((uint64_t)(2 * g + 1));
  const uint32_t w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
  float m8 = -kInf;
#pragma unroll
  for (int e = 0; e < 8; e++) {
    if (e < cnt) {
      if (STAT) {
        s.mx = fmaxf(s.mx, xs[e]);
        s.ax = gumbel_max_nan(s.ax, fabsf(xs[e]));
      }
      m8 = fmaxf(m8, gumbel_approx(xs[e], c, w[e]));
    }
  }
  s.a2 = fmaxf(s.a2, fminf(s.a1, m8));
  s.g1 = m8 > s.a1 ? g : s.g1;  // strictly greater: the earlier group keeps a tie
  s.a1 = fmaxf(s.a1, m8);
}

// gumbel_exact folds the exact scores of tokens [lo, hi) (one group) into best.
template <typename T>
__device__ __forceinline__ void gumbel_exact(const T *x, const Stream &rng, float m, float temp, int lo, int hi,
                                             ArgBest &best) {
  uint4 words = make_uint4(0, 0, 0, 0);
  for (int i = lo; i < hi; i++) {
    if (i == lo || (i & 3) == 0) words = rng.block((uint64_t)(i >> 2));
    const uint32_t word[4] = {words.x, words.y, words.z, words.w};
    const float g = -f32_log(-f32_log(open_u01(word[i & 3])));
    const float score = __fadd_rn(scaled(load_f32(x, i), m, temp), g);
    if (better(score, i, best)) best = ArgBest{score, i};
  }
}

// gumbel_pick folds into best the exact scores of the tokens of group g
// whose approximate score reaches thr (gumbel_take's scores, recomputed).
template <typename T>
__device__ __forceinline__ void gumbel_pick(const T *x, const GumbelKeys &K, const Stream &rng, float c, float thr,
                                            float m, float temp, int g, int n, ArgBest &best) {
  const uint4 w0 = K.block((uint64_t)(2 * g)), w1 = K.block((uint64_t)(2 * g + 1));
  const uint32_t w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
  unsigned pick = 0;
#pragma unroll
  for (int e = 0; e < 8; e++)
    if (8 * g + e < n && gumbel_approx(load_f32(x, 8 * g + e), c, w[e]) >= thr) pick |= 1u << e;
  for (; pick; pick &= pick - 1) {
    const int i = 8 * g + __ffs(pick) - 1;
    gumbel_exact(x, rng, m, temp, i, i + 1, best);
  }
}

// gumbel_max3 is the block's maxima of a, b and d (no NaN among them), each
// to every thread, in one round of shared memory.
template <int BLOCK>
__device__ __forceinline__ void gumbel_max3(float (&red)[3][BLOCK / 32], float &a, float &b, float &d) {
  static_assert(BLOCK >= 64 && BLOCK <= 1024 && (BLOCK & (BLOCK - 1)) == 0, "a power-of-two block of 2 to 32 warps");
#pragma unroll
  for (int o = 16; o; o >>= 1) {
    a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    b = fmaxf(b, __shfl_xor_sync(0xffffffffu, b, o));
    d = fmaxf(d, __shfl_xor_sync(0xffffffffu, d, o));
  }
  if ((threadIdx.x & 31) == 0) red[0][threadIdx.x >> 5] = a, red[1][threadIdx.x >> 5] = b, red[2][threadIdx.x >> 5] = d;
  __syncthreads();
  const int j = threadIdx.x & (BLOCK / 32 - 1);
  a = red[0][j], b = red[1][j], d = red[2][j];
#pragma unroll
  for (int o = BLOCK / 64; o; o >>= 1) {
    a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    b = fmaxf(b, __shfl_xor_sync(0xffffffffu, b, o));
    d = fmaxf(d, __shfl_xor_sync(0xffffffffu, d, o));
  }
}

// gumbel_kernel serves one slot a block, 1024 / BLOCK blocks an SM; the
// section comment above says what it computes and why that is exact.
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 1024 / BLOCK) gumbel_kernel(const T *__restrict__ logits, SampleArgs a) {
  __shared__ RowShared<BLOCK> sh;
  const int slot = blockIdx.x;
  const int row = a.rows[slot];
  const int n = a.vocab;
  const T *x = logits + (size_t)row * n;
  const float temp = a.rp.temperature[row];
  if (temp == 0.0f) {  // greedy (the host lists such rows apart; stay exact anyway)
    sample_tokens_call<T, BLOCK, false>(x, a, slot, row, sh);
    return;
  }
  const float c = __fdiv_rn(kGumbelLog2E, temp);
  const GumbelKeys K(a.rp.seed[row], a.rp.offset[row], (uint32_t)row);
  const int full = n / 8, groups = (n + 7) / 8;
  GumbelShare s;
  float xs[8];
  if ((reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    int g = threadIdx.x;
    const uint32_t ninf2 = std::is_same<T, __nv_bfloat16>::value ? 0xff80ff80u : 0xfc00fc00u;
    uint32_t hi2 = ninf2, lo2 = ninf2 ^ 0x80008000u;  // -inf, +inf pairs
    GumbelRaw<T> cur;
    if (g < full) cur = gumbel_load(x, g);
    for (; g < full; g += BLOCK) {
      GumbelRaw<T> nxt = cur;
      if (g + BLOCK < full) nxt = gumbel_load(x, g + BLOCK);  // one load ahead
      gumbel_unpack<T>(cur, xs);
      if constexpr (sizeof(T) == 2) {
        const uint4 r = cur.v[0];
        hi2 = gumbel_pmax<T>(hi2, gumbel_pmax<T>(gumbel_pmax<T>(r.x, r.y), gumbel_pmax<T>(r.z, r.w)));
        lo2 = gumbel_pmin<T>(lo2, gumbel_pmin<T>(gumbel_pmin<T>(r.x, r.y), gumbel_pmin<T>(r.z, r.w)));
        gumbel_take<false>(s, K, c, g, xs, 8);
      } else {
        gumbel_take(s, K, c, g, xs, 8);
      }
      cur = nxt;
    }
    if (sizeof(T) == 2 && (int)threadIdx.x < full) {
      const float h0 = gumbel_h2f<T>(hi2 & 0xffffu), h1 = gumbel_h2f<T>(hi2 >> 16);
      const float l0 = gumbel_h2f<T>(lo2 & 0xffffu), l1 = gumbel_h2f<T>(lo2 >> 16);
      s.mx = fmaxf(s.mx, fmaxf(h0, h1));
      s.ax = gumbel_max_nan(gumbel_max_nan(s.ax, gumbel_max_nan(fabsf(h0), fabsf(h1))),
                            gumbel_max_nan(fabsf(l0), fabsf(l1)));
    }
    if (full < groups && full % BLOCK == (int)threadIdx.x) {  // the last, partial group
      for (int e = 0; e < 8; e++) xs[e] = 8 * full + e < n ? load_f32(x, 8 * full + e) : 0.0f;
      gumbel_take(s, K, c, full, xs, n - 8 * full);
    }
  } else {  // a row off 16-byte boundaries: the same groups, read a token at a time
    for (int g = threadIdx.x; g < groups; g += BLOCK) {
      const int cnt = min(8, n - 8 * g);
      for (int e = 0; e < 8; e++) xs[e] = e < cnt ? load_f32(x, 8 * g + e) : 0.0f;
      gumbel_take(s, K, c, g, xs, cnt);
    }
  }
  __shared__ float red3[3][BLOCK / 32];
  float m = s.mx, ax = s.ax == s.ax ? s.ax : kInf, amax = s.a1;  // NaN counts as +Inf
  gumbel_max3<BLOCK>(red3, m, ax, amax);
  if (!(ax * (1.0f + fabsf(c)) < 0x1p100f) || !(fabsf(amax) < kInf)) {  // block-uniform
    sample_tokens_call<T, BLOCK, false>(x, a, slot, row, sh);
    return;
  }
  const float eps = __fadd_rn(0x1p-10f, __fmul_rn(__fadd_rn(ax, __fdiv_rn(ax, fabsf(temp))), 0x1p-17f));
  const float thr = __fsub_rn(amax, __fmul_rn(2.0f, eps));
  const Stream rng(a.rp.seed[row], a.rp.offset[row], row, 0);
  ArgBest best{-kInf, kGumbelNone};
  if (s.a2 >= thr) {  // two groups reach it: the whole share exactly
    for (int g = threadIdx.x; g < groups; g += BLOCK) gumbel_exact(x, rng, m, temp, 8 * g, min(n, 8 * g + 8), best);
  } else if (s.a1 >= thr) {
    gumbel_pick(x, K, rng, c, thr, m, temp, s.g1, n, best);
  }
  best = Reduce<BLOCK>::argbest(sh.red, best);
  if (threadIdx.x == 0) a.tokens[row] = best.i == kGumbelNone ? -1 : best.i;
}

// sample_flagged_kernel serves the slots sample_fast_kernel flagged in todo
// (flagged_slots). It is a kernel of its own because the loop costs
// sample_kernel's filtered variant a few registers it does not have: folded
// into it, the rejection rounds spilled and ran slower.
template <typename T, int BLOCK, bool PATTERN>
__global__ void __launch_bounds__(BLOCK, 1)
    sample_flagged_kernel(const T *__restrict__ logits, SampleArgs a, const int *__restrict__ todo, int slots) {
  if constexpr (PATTERN && !kSm90Pass) {
    return;  // sm_80 pass: never launched from an sm_80 binary (full_row_variant)
  } else {
    __shared__ Flagged<BLOCK> fl;
    PatternSmem<BLOCK> *pat;
    RowShared<BLOCK> &sh = full_row_shared<BLOCK, PATTERN>(pat);
    pdl_wait();  // launched behind sample_fast_kernel: its flags first
    const int n = flagged_slots(todo, slots, fl);
    for (int i = 0; i < n; i++) {  // one call site, so that it is inlined
      sample_slot<T, BLOCK, true, PATTERN>(logits, a, fl.slot[i], sh, pat);
      __syncthreads();  // sh (and pat) serve the next slot
    }
  }
}

// sample_full_slot is sample_slot in a fast kernel's block, for a slot it
// flagged: not inlined, so that the full path's registers stay out of the
// fast path's.
template <typename T>
__device__ __noinline__ void sample_full_slot(const T *__restrict__ logits, const SampleArgs &sa, int slot) {
  sample_slot<T, kFastBlock, true, false>(logits, sa, slot, fast_full_shared(), nullptr);
}

// sample_fast_kernel draws one token (inverse CDF) for the sampled rows
// that take the top-k fast path (fastrow.cuh): block (c, slot) scans chunk
// c of the slot's row, and the row's last block draws from the kept tokens
// by index, which is the full-row draw with every zero left out. Rows it
// cannot serve are flagged in a.todo for sample_flagged_kernel, or, where
// fast_serves (no sample_flagged_kernel follows), drawn by the flagging
// block with the full-row path (sa): the launch of a second kernel that
// has nothing to do is a large part of a small launch. That path is
// compiled in only where SERVE (fast_serves): its call costs the fast path
// a stack frame and spills, which large launches would pay. With CLUSTER (only
// with SERVE) a row's chunks are one cluster (fast_row.cuh fast_cluster_row).
template <typename T, bool SERVE, bool CLUSTER>
__global__ void __launch_bounds__(kFastBlock, 4)
    sample_fast_kernel(const T *__restrict__ logits, FastArgs a, int *tokens, SampleArgs sa) {
  if constexpr (CLUSTER && !kSm90Pass) {
    return;  // sm_80 pass: an sm_80 binary never runs clusters
  } else {
    pdl_trigger();  // sample_flagged_kernel may launch now; it waits for this kernel
    FastSmem &s = fast_smem();
    const int slot = blockIdx.y, row = a.map[slot];
    FastTop top;
    const FastOutcome got =
        fast_row<T, CLUSTER>(logits + (size_t)row * a.vocab, a, slot, fast_params(a.rp, row), nullptr, s, top);
    if (SERVE && got == kFastFlagged) {
      sample_full_slot<T>(logits, sa, slot);
      return;
    }
    if (got != kFastServed) return;
    const Stream rng(a.rp.seed[row], a.rp.offset[row], row, 0);
    const int r = kept_pick(top.kept, rng.u64(0), [&](int q) { return weight(s.sw[q]); }, s);
    if (threadIdx.x == 0) tokens[row] = r >= 0 ? s.sidx[r] : -1;
  }
}


// ---- Inverse CDF without filters, bf16, single draws: a table of weights ----
//
// TableRow is a valid bf16 row's weights as the table kernels draw them:
// w_of(v) is w * 2^40 (exact: a power of two; w is in [0, 1], so its
// truncation is W = Weight(w), the bits philox.cuh's weight gives), and
// kept(v) the same where it is at least cut (top-p's least kept weight; 0:
// every token).
struct TableRow {
  float m, temp, cut;
  __device__ __forceinline__ float w_of(float v) const { return __fmul_rn(weight_of(v, m, temp), 1099511627776.0f); }
  __device__ __forceinline__ float kept(float v) const {
    const float e = w_of(v);
    return e >= cut ? e : 0.0f;
  }
};

// table_fixed is a table entry's fixed-point weight W: its truncation.
__device__ __forceinline__ unsigned long long table_fixed(float e) { return __float2ull_rz(e); }

// table_draw is the table kernels' draw from bf16 row x: draw_bits over
// tr's kept weights, tab's (filled with them) inside its window.
template <int BLOCK>
__device__ int table_draw(const __nv_bfloat16 *x, int n, const PatternTable<float> &tab, const TableRow &tr,
                          uint64_t u, RowShared<BLOCK> &sh) {
  auto kept = [&](float v) { return tr.kept(v); };
  auto fixed = [](float e) { return table_fixed(e); };
  auto sums = [&](int lo, int hi) { return DrawWeights{0ull, table_sum(tab, x, lo, hi, kept, fixed)}; };
  auto w = [&](int, unsigned b) { return DrawWeights{0ull, fixed(tab.value(b, kept))}; };
  return draw_bits<BLOCK>(x, n, false, u, sums, w, sh);
}

// table_kernel draws one token a slot by the inverse CDF, for launches
// where no row has a filter, the logits are bf16 and each row makes one
// draw: the row's maximum (row_stat), a table of the weights of the window
// of patterns the row's tokens can take (one exact exp a pattern of the
// window, ptable.cuh, not one a token), then draw_bits: each thread's
// segment total from the table, and the ordered search of the segment that
// holds the target (table_draw). The table holds TableRow's w * 2^40 as a
// float (4 bytes a lookup, half the shared-memory traffic of the
// fixed-point W itself). The weights are the per-token path's and their
// sum an integer, so it draws engine/cpu's token. It needs no count of the
// row's patterns (the lean pattern kernel's 65536 counters, which fill an
// SM), so two blocks share an SM. Greedy and invalid rows write what
// sample_tokens writes. It never writes a CDF: the many-draws mode keeps
// the lean kernels.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2) table_kernel(const __nv_bfloat16 *__restrict__ logits, SampleArgs a) {
  __shared__ RowShared<BLOCK> sh;
  const int row = a.rows[blockIdx.x];
  const int n = a.vocab;
  const __nv_bfloat16 *x = logits + (size_t)row * n;
  const RowStat st = row_stat<__nv_bfloat16, BLOCK>(x, n, sh);
  const float temp = a.rp.temperature[row];
  if (!st.valid || temp == 0.0f) {  // the host lists greedy rows apart; stay exact anyway
    if (threadIdx.x == 0) a.tokens[row] = st.valid ? st.arg : -1;
    return;
  }
  const TableRow tr{st.m, temp, 0.0f};
  const PatternTable<float> tab{table_room(sh), table_window(st.m, temp)};
  fill_table<BLOCK>(tab, [&](float v) { return tr.w_of(v); });
  const Stream rng(a.rp.seed[row], a.rp.offset[row], row, 0);
  const int token = table_draw<BLOCK>(x, n, tab, tr, rng.u64(0), sh);
  if (threadIdx.x == 0) a.tokens[row] = token;
}

// ---- Top-p alone, bf16, single draws: the window's patterns counted ----
//
// topp_cut is top-p's cut over a row counted by pattern: count(j) tokens
// of the window's entry j (weight tab.v[j], w * 2^40) and the lump's mass
// (the tokens of magnitudes below the window) make the row's mass z; the
// cut is pattern_filter's, in descending order of value the first value
// whose inclusive fixed-point mass, as a double, reaches top_p * z. It
// returns that value's tab.v (the least kept weight), or -1 when the cut
// falls in the lump, whose order it does not know; every thread gets the
// answer. red and found are the block's scan storage and a scratch int.
template <int BLOCK, typename Count>
__device__ float topp_cut(const PatternTable<float> &tab, Count count, unsigned long long lump, float top_p,
                          typename Reduce<BLOCK>::Shared &red, int &found) {
  // Positions in descending order of value: the window's positive
  // patterns from the top (o < kTableSpan), the lump (o = kTableSpan),
  // the negative ones from the smallest magnitude; kPer a thread.
  constexpr int kOrder = kTableEntries + 1, kPer = (kOrder + BLOCK - 1) / BLOCK;
  auto entry = [](int o) { return o < (int)kTableSpan ? kTableSpan - 1 - o : o - 1; };
  auto mass = [&](int o) -> unsigned long long {
    if (o == (int)kTableSpan) return lump;
    const unsigned j = entry(o);
    const unsigned c = count(j);
    return c ? (unsigned long long)c * table_fixed(tab.v[j]) : 0ull;
  };
  const int o0 = (int)threadIdx.x * kPer;
  unsigned long long ms[kPer], mine = 0, excl, z;  // each position's mass, read once
#pragma unroll
  for (int q = 0; q < kPer; q++) {
    ms[q] = o0 + q < kOrder ? mass(o0 + q) : 0ull;
    mine += ms[q];
  }
  cub::BlockScan<unsigned long long, BLOCK>(red.s.scan).ExclusiveSum(mine, excl, z);
  if (threadIdx.x == 0) found = kOrder;
  __syncthreads();
  const double limit = (double)top_p * (double)z;
  bool done = false;
#pragma unroll
  for (int q = 0; q < kPer; q++) {
    excl += ms[q];
    if (!done && o0 + q < kOrder && (double)excl >= limit) {
      atomicMin(&found, o0 + q);
      done = true;
    }
  }
  __syncthreads();
  const int oc = found;  // < kOrder: the last position's inclusive mass is z
  return oc == (int)kTableSpan ? -1.0f : tab.v[entry(oc)];
}

// topp_count counts bf16 pattern b for topp_cut: in tab's window, one to
// its entry of cnt (a shared-memory atomic); below it, its exact fixed-point
// weight (w_of, w * 2^40) into lump; above it, above is set where that
// weight is not 0 (never under table_window's window).
template <typename W>
__device__ __forceinline__ void topp_count(const PatternTable<float> &tab, unsigned *cnt, unsigned b, W &&w_of,
                                           unsigned long long &lump, int &above) {
  unsigned j;
  if (tab.find(b, j)) {
    atomicAdd(cnt + j, 1u);
  } else {
    const unsigned long long w = table_fixed(w_of(bits_f32(b, (const __nv_bfloat16 *)nullptr)));
    if ((b & 0x7fffu) < tab.lo)
      lump += w;
    else
      above |= w != 0;
  }
}

// topp_draw ends a top-p row of topp_kernel's from its table tab (filled
// with tr's weights) and topp_cut's cut: left in todo where the cut falls in
// the lump (cut < 0), else the weights below the cut zeroed and
// table_draw's token written.
template <int BLOCK>
__device__ void topp_draw(const __nv_bfloat16 *x, int n, const SampleArgs &a, int slot, int row,
                          const PatternTable<float> &tab, TableRow tr, float cut, int *todo, RowShared<BLOCK> &sh) {
  if (cut < 0.0f) {  // the same in every thread
    if (threadIdx.x == 0) todo[slot] = 1;
    return;
  }
  if (cut > 0.0f) {  // the same in every thread; 0 (top-p off) cuts nothing
    __syncthreads();  // every thread has read the cut before the table changes
    for (unsigned j = threadIdx.x; j < kTableEntries; j += BLOCK)
      if (tab.v[j] < cut) tab.v[j] = 0.0f;
    __syncthreads();
  }
  tr.cut = cut;
  const Stream rng(a.rp.seed[row], a.rp.offset[row], row, 0);
  const int token = table_draw<BLOCK>(x, n, tab, tr, rng.u64(0), sh);
  if (threadIdx.x == 0) {
    a.tokens[row] = token;
    todo[slot] = 0;
  }
}

// kToppLump bounds the tokens below the window that topp_one_read lists
// (their patterns, for their exact weights once the maximum is known).
constexpr int kToppLump = 512;

// topp_one_read is topp_kernel's row in one read where it can: the window
// is placed from the temperature alone, as table_window places it for a
// maximum of -104 t (its top binade holds 208 t), so that the count by
// pattern, the row's maximum and the list of the tokens below the window
// come from one pass. That window serves every row with |m| <= 100 t: a
// token above it is negative (it exceeds 208 t in magnitude, m does not)
// and lies more than 104 t below m, where f32math.Exp is 0; and any window
// gives the table's bits (ptable.cuh). Then the table, the lump's exact
// weights, topp_cut and table_draw, as topp_kernel. It returns false, the
// row untouched, where the row needs topp_kernel's three reads (|m| > 100 t,
// more than kToppLump tokens below the window), else true with the row
// drawn, invalid (-1) or left in todo (the cut in the lump). The caller has
// checked temp > 0 and top_p in (0, 1). Not inlined: inlined beside the
// three reads' path, the kernel spilled in its loops.
template <int BLOCK>
__device__ __noinline__ bool topp_one_read(const __nv_bfloat16 *x, int n, const SampleArgs &a, int slot, int row,
                                              float temp, float top_p, int *todo, RowShared<BLOCK> &sh,
                                              unsigned short *lumped, int &nlump) {
  static_assert(sizeof(sh.tree) >= kTableEntries * sizeof(unsigned), "the counts fit the tree");
  unsigned *cnt = reinterpret_cast<unsigned *>(sh.tree);
  for (unsigned j = threadIdx.x; j < kTableEntries; j += BLOCK) cnt[j] = 0;
  if (threadIdx.x == 0) nlump = 0;
  __syncthreads();
  const PatternTable<float> tab{table_room(sh), table_window(-104.0f * temp, temp)};
  auto see = [&](unsigned b) {
    unsigned j;
    if (tab.find(b, j)) {
      atomicAdd(cnt + j, 1u);
    } else if ((b & 0x7fffu) < tab.lo) {
      const int q = atomicAdd(&nlump, 1);
      if (q < kToppLump) lumped[q] = (unsigned short)b;
    }  // above the window: weight 0 where |m| <= 100 t (NaN and the infinities too)
  };
  const __nv_bfloat16 ninf = __ushort_as_bfloat16((unsigned short)0xff80u);
  __nv_bfloat162 hm = __halves2bfloat162(ninf, ninf);  // __hmax2_nan carries a NaN
  auto pair_of = [](unsigned w) {
    __nv_bfloat162 h;
    memcpy(&h, &w, sizeof(h));
    return h;
  };
  const unsigned short *xs = reinterpret_cast<const unsigned short *>(x);
  for_each_uint4<__nv_bfloat16, BLOCK, 4>(
      x, 0, n,
      [&](int i) {
        const __nv_bfloat16 v = __ushort_as_bfloat16(xs[i]);
        hm = __hmax2_nan(hm, __halves2bfloat162(v, v));
        see(xs[i]);
      },
      [&](int, const uint4 &u) {
        hm = __hmax2_nan(__hmax2_nan(hm, pair_of(u.x)), __hmax2_nan(pair_of(u.y), __hmax2_nan(pair_of(u.z), pair_of(u.w))));
        each_pattern(u, see);
      });
  const float h0 = __low2float(hm), h1 = __high2float(hm);
  const int nan = Reduce<BLOCK>::any(sh.red, h0 != h0 || h1 != h1);
  const float m = Reduce<BLOCK>::max(sh.red, fmaxf(h0, h1));  // and waits for the counts and the list
  if (nan || !(m > -kInf) || m == kInf) {  // no distribution (row_stat's rule)
    if (threadIdx.x == 0) {
      a.tokens[row] = -1;
      todo[slot] = 0;
    }
    return true;
  }
  const int listed = nlump;
  if (!(fabsf(m) <= 100.0f * temp) || listed > kToppLump) return false;  // the same in every thread
  const TableRow tr{m, temp, 0.0f};
  fill_table<BLOCK>(tab, [&](float v) { return tr.w_of(v); });
  unsigned long long lump = 0;
  for (int q = threadIdx.x; q < listed; q += BLOCK) lump += table_fixed(tr.w_of(bits_f32(lumped[q], x)));
  lump = Reduce<BLOCK>::sum(sh.red, lump);
  const float cut = topp_cut<BLOCK>(tab, [&](unsigned j) { return cnt[j]; }, lump, top_p, sh.red, sh.found);
  topp_draw<BLOCK>(x, n, a, slot, row, tab, tr, cut, todo, sh);
  return true;
}

// topp_kernel draws one token a slot by the inverse CDF for launches whose
// only filter is top-p (SV_TOP_P_ONLY), from bf16 logits, one draw a row,
// in two reads of the row where topp_one_read can, else in three: its
// maximum (row_stat); a count of its tokens
// by pattern over table_kernel's window of weights (ptable.cuh), the tokens
// of magnitudes below the window (about zero, one weight between the
// positive and the negative patterns') in one lump of their exact
// fixed-point weights; then top-p's cut from the counts (topp_cut), and
// table_kernel's draw over the kept weights. A token is kept iff its weight
// is at least the cut value's (make_filter's rule, bit for bit: w is
// monotone in the logit, so the order of values is the order of weights).
// topp_held_kernel below reads the row once where it can. Every row it
// serves has its todo entry cleared; a row it cannot serve (top-k or min-p
// on after all, the cut inside the lump, whose order it does not know, or a
// token of nonzero weight above the window) keeps its entry for
// sample_flagged_kernel, which follows. Greedy and invalid rows write what
// sample_tokens writes.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2)
    topp_kernel(const __nv_bfloat16 *__restrict__ logits, SampleArgs a, int *__restrict__ todo) {
  __shared__ RowShared<BLOCK> sh;
  __shared__ unsigned short lumped[kToppLump];
  __shared__ int nlump;
  pdl_trigger();  // sample_flagged_kernel may launch now; it waits for this kernel
  const int slot = blockIdx.x;
  const int row = a.rows[slot];
  const int n = a.vocab;
  const __nv_bfloat16 *x = logits + (size_t)row * n;
  const float temp = a.rp.temperature[row];
  {
    const int k = a.rp.top_k[row];
    const float top_p = a.rp.top_p[row];
    if (temp > 0.0f && !(k > 0 && k < n) && !(a.rp.min_p[row] > 0.0f) && top_p > 0.0f && top_p < 1.0f &&
        topp_one_read<BLOCK>(x, n, a, slot, row, temp, top_p, todo, sh, lumped, nlump))
      return;
  }
  const RowStat st = row_stat<__nv_bfloat16, BLOCK>(x, n, sh);
  if (!st.valid || temp == 0.0f) {
    if (threadIdx.x == 0) {
      a.tokens[row] = st.valid ? st.arg : -1;
      todo[slot] = 0;
    }
    return;
  }
  const int k = a.rp.top_k[row];
  if ((k > 0 && k < n) || a.rp.min_p[row] > 0.0f) {  // not this kernel's row: the hint was wrong
    if (threadIdx.x == 0) todo[slot] = 1;
    return;
  }
  const TableRow tr{st.m, temp, 0.0f};  // topp_draw sets the cut
  auto w_of = [&](float v) { return tr.w_of(v); };
  const PatternTable<float> tab{table_room(sh), table_window(st.m, temp)};
  // The counts live in the Sum's tree, which no step here uses.
  static_assert(sizeof(sh.tree) >= kTableEntries * sizeof(unsigned), "the counts fit the tree");
  unsigned *cnt = reinterpret_cast<unsigned *>(sh.tree);
  for (unsigned j = threadIdx.x; j < kTableEntries; j += BLOCK) cnt[j] = 0;
  fill_table<BLOCK>(tab, w_of);  // and waits for the block
  const float top_p = a.rp.top_p[row];
  if (!(top_p > 0.0f)) {  // outside top-p's range: the full path's answer, whatever it is
    if (threadIdx.x == 0) todo[slot] = 1;
    return;
  }
  float cut = 0.0f;  // every token, where top-p is off
  if (top_p < 1.0f) {
    unsigned long long lump = 0;
    int above = 0;
    auto count = [&](unsigned b) { topp_count(tab, cnt, b, w_of, lump, above); };
    const unsigned short *xs = reinterpret_cast<const unsigned short *>(x);
    for_each_uint4<__nv_bfloat16, BLOCK, 4>(
        x, 0, n, [&](int i) { count(xs[i]); }, [&](int, const uint4 &u) { each_pattern(u, count); });
    lump = Reduce<BLOCK>::sum(sh.red, lump);  // and waits for the counts
    if (Reduce<BLOCK>::any(sh.red, above)) {
      if (threadIdx.x == 0) todo[slot] = 1;
      return;
    }
    cut = topp_cut<BLOCK>(tab, [&](unsigned j) { return cnt[j]; }, lump, top_p, sh.red, sh.found);
  }
  topp_draw<BLOCK>(x, n, a, slot, row, tab, tr, cut, todo, sh);
}

// ---- Top-p alone, bf16, single draws: the row held in a cluster ----
//
// topp_held_kernel draws topp_kernel's token reading the row once: a
// cluster of kHeldCluster blocks holds it in shared memory, block r the
// chunk of held_chunk tokens from r * chunk (one bulk copy), and every pass
// after the copy reads shared memory:
//   1. the chunk's maximum (the row's: each block's over distributed
//      shared memory), with NaN carried, so that rows without a
//      distribution answer -1 as row_stat's do;
//   2. table_kernel's table of weights, and the chunk's tokens counted by
//      pattern over its window as topp_kernel counts them;
//   3. top-p's cut (topp_cut) from every block's counts, which block 0
//      reads over distributed shared memory and adds, then hands the cut
//      to the others;
//   4. each tile's (kHeldTile tokens) sum of kept weights, the block's
//      total handed to every block; the block whose range of the row's
//      prefix sums holds the target finds the tile, then the token.
// The sums are integers, so the token is topp_kernel's. Where the row
// cannot be held (another device, rows off 16-byte vectors, a chunk that
// does not fit) the launcher takes topp_kernel; rows that topp_kernel
// leaves to sample_flagged_kernel are left to it here too, and greedy rows
// (the host lists them apart) as well.
constexpr int kHeldCluster = 4;
// kHeldTile tokens make a tile: a warp's 32 lanes each take four 16-byte
// vectors of it, lane l the vectors 32 k + l (k < 4: shared-memory loads
// without bank conflicts), in the order of the row.
constexpr int kHeldTile = 1024;
// kHeldMaxTiles bounds a chunk's tiles: the search's warp takes two a lane.
constexpr int kHeldMaxTiles = 64;

// held_chunk is the tokens of a row that each block of a cluster of csize
// holds: a multiple of 8 (whole 16-byte vectors).
__host__ __device__ inline int held_chunk(int vocab, int csize) { return ((vocab + csize - 1) / csize + 7) / 8 * 8; }
// held_smem is topp_held_kernel's dynamic shared memory for a chunk: the
// chunk itself and its tiles' sums.
__host__ __device__ inline size_t held_smem(int chunk) {
  return (size_t)chunk * 2 + sizeof(unsigned long long) * ((chunk + kHeldTile - 1) / kHeldTile);
}

// HeldShared is topp_held_kernel's static shared memory; stat, lump and
// total hold one entry a block of the cluster, each written by its block
// into every block's copy.
template <int BLOCK>
struct HeldShared {
  typename Reduce<BLOCK>::Shared red;
  float table[kTableEntries];
  alignas(16) unsigned cnt[kTableEntries];  // read 16 bytes at a time
  unsigned long long landed;                // the bulk copy's barrier
  unsigned long long stat[kMaxCluster];     // the chunk's maximum's bits, NaN at bit 32
  unsigned long long lump[kMaxCluster];     // the lump's mass, ~0: a weight above the window
  unsigned long long total[kMaxCluster];    // the kept mass
  float cut;                                // top-p's cut, from block 0
  int found;
};

// warp_inclusive is the inclusive prefix sum of v over the warp's lanes.
__device__ __forceinline__ unsigned long long warp_inclusive(unsigned long long v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += u;
  }
  return v;
}

// topp_held_kernel: a cluster of kHeldCluster blocks a slot (the section
// comment above), held_smem(chunk) bytes of dynamic shared memory.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2)
    topp_held_kernel(const __nv_bfloat16 *__restrict__ logits, SampleArgs a, int *__restrict__ todo) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ HeldShared<BLOCK> sh;
  extern __shared__ __align__(16) unsigned char held_raw[];
  pdl_trigger();  // sample_flagged_kernel may launch now; it waits for this kernel
  const int C = cluster_blocks(), r = cluster_rank();
  const int slot = blockIdx.x / C;
  const int row = a.rows[slot];
  const int n = a.vocab;
  const __nv_bfloat16 *x = logits + (size_t)row * n;
  const float temp = a.rp.temperature[row], top_p = a.rp.top_p[row];
  const int k = a.rp.top_k[row];
  // The same for every block of the cluster, before any of them touches a
  // peer: rows for sample_flagged_kernel (greedy, top-k or min-p on after a
  // wrong hint, top-p outside (0, 1], a row off 16-byte vectors).
  if (!(temp > 0.0f) || (k > 0 && k < n) || a.rp.min_p[row] > 0.0f || !(top_p > 0.0f) || (n & 7) ||
      (reinterpret_cast<uintptr_t>(x) & 15)) {
    if (r == 0 && threadIdx.x == 0) todo[slot] = 1;
    return;
  }
  const int chunk = held_chunk(n, C);
  const int lo = min(n, r * chunk), len = min(n, lo + chunk) - lo;  // this block's tokens
  const int nvec = len / 8;
  const uint4 *vec = reinterpret_cast<const uint4 *>(held_raw);
  unsigned long long *tsum = reinterpret_cast<unsigned long long *>(held_raw + (size_t)chunk * 2);
  if (threadIdx.x == 0 && len > 0) {
    bulk_barrier_init(&sh.landed);
    bulk_load(held_raw, x + lo, (unsigned)len * 2, &sh.landed);
  }
  cluster_arrive();  // cluster_wait below: every block has started before anyone writes to a peer
  for (unsigned j = threadIdx.x; j < kTableEntries; j += BLOCK) sh.cnt[j] = 0;
  __syncthreads();  // the barrier's init before anyone waits on it
  if (len > 0) bulk_barrier_wait(&sh.landed);

  // 1. The maximum; __hmax2_nan carries a NaN.
  const __nv_bfloat16 ninf = __ushort_as_bfloat16((unsigned short)0xff80u);
  __nv_bfloat162 hm = __halves2bfloat162(ninf, ninf);
  auto pair_of = [](unsigned w) {
    __nv_bfloat162 h;
    memcpy(&h, &w, sizeof(h));
    return h;
  };
  for (int j = threadIdx.x; j < nvec; j += BLOCK) {
    const uint4 u = vec[j];
    hm = __hmax2_nan(__hmax2_nan(hm, pair_of(u.x)), __hmax2_nan(pair_of(u.y), __hmax2_nan(pair_of(u.z), pair_of(u.w))));
  }
  const float h0 = __low2float(hm), h1 = __high2float(hm);
  const int nan = Reduce<BLOCK>::any(sh.red, h0 != h0 || h1 != h1);
  const float mb = Reduce<BLOCK>::max(sh.red, fmaxf(h0, h1));
  cluster_wait();
  if ((int)threadIdx.x < C)
    store_peer(&sh.stat[r], threadIdx.x, (unsigned long long)__float_as_uint(mb) | (unsigned long long)(nan != 0) << 32);
  cluster_sync();
  float m = -kInf;
  bool bad = false;
  for (int p = 0; p < C; p++) {
    const unsigned long long v = sh.stat[p];
    m = fmaxf(m, __uint_as_float((unsigned)v));
    bad |= (v >> 32) != 0;
  }
  if (bad || !(m > -kInf) || m == kInf) {  // no distribution (row_stat's rule)
    if (r == 0 && threadIdx.x == 0) {
      a.tokens[row] = -1;
      todo[slot] = 0;
    }
    return;
  }

  // 2. The table and the count.
  TableRow tr{m, temp, 0.0f};  // cut: 0 (every token) until top-p's is known
  auto w_of = [&](float v) { return tr.w_of(v); };
  const PatternTable<float> tab{sh.table, table_window(m, temp)};
  fill_table<BLOCK>(tab, w_of);  // and waits for the block
  if (top_p < 1.0f) {
    unsigned long long lump = 0;
    int above = 0;
    auto count = [&](unsigned b) { topp_count(tab, sh.cnt, b, w_of, lump, above); };
    for (int j = threadIdx.x; j < nvec; j += BLOCK) each_pattern(vec[j], count);
    lump = Reduce<BLOCK>::sum(sh.red, lump);
    above = Reduce<BLOCK>::any(sh.red, above);
    if ((int)threadIdx.x < C) store_peer(&sh.lump[r], threadIdx.x, above ? ~0ull : lump);
    cluster_sync();  // every block's counts and lump in place

    // 3. The cut: block 0 adds its peers' counts to its own, 16 bytes a
    // load (distributed shared memory serves few loads a clock, so one
    // block reads, and in vectors), finds the cut and hands it to every
    // block.
    unsigned long long lumps = 0;
    bool up = false;
    for (int p = 0; p < C; p++) {
      up |= sh.lump[p] == ~0ull;
      lumps += sh.lump[p];
    }
    if (r == 0 && !up) {
      uint4 *cnt4 = reinterpret_cast<uint4 *>(sh.cnt);
      for (int v = threadIdx.x; v < (int)kTableEntries / 4; v += BLOCK) {
        uint4 c = cnt4[v];
#pragma unroll
        for (int p = 1; p < kMaxCluster; p++)
          if (p < C) {
            const uint4 d = load_peer_v4(peer_address(cnt4 + v, p));
            c.x += d.x, c.y += d.y, c.z += d.z, c.w += d.w;
          }
        cnt4[v] = c;
      }
      __syncthreads();
      const float cut = topp_cut<BLOCK>(tab, [&](unsigned j) { return sh.cnt[j]; }, lumps, top_p, sh.red, sh.found);
      if ((int)threadIdx.x < C) store_peer_f32(&sh.cut, threadIdx.x, cut);
    }
    cluster_sync();  // the cut in every block; no block reads a peer's counts after this
    if (up || sh.cut < 0.0f) {  // the same in every block
      if (r == 0 && threadIdx.x == 0) todo[slot] = 1;
      return;
    }
    const float cut = sh.cut;
    __syncthreads();  // every thread has read the cut before the table changes
    for (unsigned j = threadIdx.x; j < kTableEntries; j += BLOCK)
      if (tab.v[j] < cut) tab.v[j] = 0.0f;
    __syncthreads();
    tr.cut = cut;
  }

  // 4. The tiles' sums, the blocks' totals, the draw.
  auto kept_of = [&](float v) { return tr.kept(v); };
  const unsigned koff = tab.pair_offset();
  auto vec_sum = [&](int j) -> unsigned long long {  // vector j's kept weights
    float e[8];
    tab.vector(vec[j], koff, kept_of, e);
    unsigned long long s = 0;
#pragma unroll
    for (int l = 0; l < 8; l++) s += table_fixed(e[l]);
    return s;
  };
  constexpr int kTileVecs = kHeldTile / 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tiles = (len + kHeldTile - 1) / kHeldTile;
  unsigned long long mine = 0;
  for (int t = warp; t < tiles; t += BLOCK / 32) {
    unsigned long long s = 0;
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int j = t * kTileVecs + 32 * q + lane;
      if (j < nvec) s += vec_sum(j);
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) tsum[t] = s;
    mine += s;
  }
  const unsigned long long own = Reduce<BLOCK>::sum(sh.red, lane == 0 ? mine : 0ull);  // and waits for tsum
  if ((int)threadIdx.x < C) store_peer(&sh.total[r], threadIdx.x, own);
  cluster_sync();  // every block's total in place, and no block reads a peer after this
  unsigned long long z = 0, before = 0;
  for (int p = 0; p < C; p++) {
    z += sh.total[p];
    if (p < r) before += sh.total[p];
  }
  if (z == 0) {  // never for a row with a distribution (its maximum weighs 2^40)
    if (r == 0 && threadIdx.x == 0) {
      a.tokens[row] = -1;
      todo[slot] = 0;
    }
    return;
  }
  const Stream rng(a.rp.seed[row], a.rp.offset[row], row, 0);
  const unsigned long long target = pick(rng.u64(0), z);
  if (target < before || target - before >= own || warp != 0) return;  // another block's, or warp's
  // The first token whose inclusive prefix exceeds rem, in this chunk: the
  // tile (lane l holds tiles l and 32 + l), then its four rows of vectors.
  unsigned long long rem = target - before;
  int tile = -1;
  for (int h = 0; h < 2 && tile < 0; h++) {
    const int tt = 32 * h + lane;
    const unsigned long long v = tt < tiles ? tsum[tt] : 0ull;
    const unsigned long long inc = warp_inclusive(v);
    const unsigned hit = __ballot_sync(0xffffffffu, inc > rem);
    const int l = hit ? __ffs(hit) - 1 : 31;
    const unsigned long long skip = __shfl_sync(0xffffffffu, hit ? inc - v : inc, l);
    rem -= skip;
    if (hit) tile = 32 * h + l;
  }
  int token = -1;
  for (int q = 0; tile >= 0 && q < 4 && token < 0; q++) {
    const int j = tile * kTileVecs + 32 * q + lane;
    const unsigned long long v = j < nvec ? vec_sum(j) : 0ull;
    const unsigned long long inc = warp_inclusive(v);
    const unsigned hit = __ballot_sync(0xffffffffu, inc > rem);
    if (!hit) {
      rem -= __shfl_sync(0xffffffffu, inc, 31);
      continue;
    }
    const int l = __ffs(hit) - 1;
    if (lane == l) {
      unsigned long long left = rem - (inc - v);
      const uint4 u = vec[j];
      const unsigned word[4] = {u.x, u.y, u.z, u.w};
      for (int e = 0; e < 8; e++) {
        const unsigned long long w = table_fixed(tab.value((word[e / 2] >> (16 * (e & 1))) & 0xffffu, kept_of));
        if (left < w) {
          token = lo + 8 * j + e;
          break;
        }
        left -= w;
      }
    }
    token = __shfl_sync(0xffffffffu, token, l);
  }
  if (lane == 0) {
    a.tokens[row] = token;
    todo[slot] = token < 0;  // never: the target lies in this chunk
  }
#endif
}

// sample_fast_instances and sample_full_instances take the addresses of a
// dtype's kernels, which compiles them in the translation unit that calls
// them (one of csrc/instances/).
template <typename T>
FastKernels<SampleFastKernel<T>> sample_fast_instances() {
  return {sample_fast_kernel<T, false, false>, sample_fast_kernel<T, true, false>, sample_fast_kernel<T, true, true>};
}
template <typename T, bool PATTERN>
SampleFullKernels<T> sample_full_instances() {
  SampleKernel<T> gumbel = nullptr, table = nullptr;
  SampleToppKernel<T> topp = nullptr, topp_held = nullptr;
  if constexpr (!PATTERN) gumbel = gumbel_kernel<T, kGumbelBlock>;
  if constexpr (!PATTERN && tabled<T>()) {
    table = table_kernel<kSampleBlock>;
    topp = topp_kernel<kSampleBlock>;
    topp_held = topp_held_kernel<kSampleBlock>;
  }
  return {sample_kernel<T, kSampleBlock, true, PATTERN>, sample_kernel<T, kSampleBlock, false, PATTERN>,
          sample_flagged_kernel<T, kSampleBlock, PATTERN>, gumbel, table, topp, topp_held};
}

}  // namespace
}  // namespace sv
