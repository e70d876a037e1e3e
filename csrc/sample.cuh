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
//     logs, the first maximum of the scores over the kept tokens;
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
// serves them.
//
// The kernels are compiled in csrc/instances/ (sample_fast_*.cu,
// sample_tokens_*.cu, sample_pattern_*.cu), so that the build runs them
// side by side; sample.cu, the launcher, takes them by pointer.
#pragma once

#include "fastrow.cuh"
#include "patterns.cuh"

namespace sv {

constexpr int kSampleBlock = 512;

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
struct SampleFullKernels {
  SampleKernel<T> filtered, lean;
  SampleFlaggedKernel<T> flagged;
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
    // Round 0 draws from every token of positive weight.
    unsigned long long mine;
    unsigned long long total = seg_total<BLOCK>(n, kept_weight_all(w), mine, sh);
    int c = total > 0 ? seg_find<BLOCK>(n, pick(rng.u64(0), total), mine, kept_weight_all(w), sh) : -1;
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
      int len = compact<BLOCK, 8>(
          n, [&](int i) { const float v = w(i); return weight(v) > 0 && (v > bw || (lowest && v == bw && i < bi)); },
          [&](int i, int &id, float &v) { id = i, v = w(i); }, lidx, lw, sh);
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


// sample_fast_instances and sample_full_instances take the addresses of a
// dtype's kernels, which compiles them in the translation unit that calls
// them (one of csrc/instances/).
template <typename T>
FastKernels<SampleFastKernel<T>> sample_fast_instances() {
  return {sample_fast_kernel<T, false, false>, sample_fast_kernel<T, true, false>, sample_fast_kernel<T, true, true>};
}
template <typename T, bool PATTERN>
SampleFullKernels<T> sample_full_instances() {
  return {sample_kernel<T, kSampleBlock, true, PATTERN>, sample_kernel<T, kSampleBlock, false, PATTERN>,
          sample_flagged_kernel<T, kSampleBlock, PATTERN>};
}

}  // namespace
}  // namespace sv
