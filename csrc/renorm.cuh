// renorm.cuh: renorm's kernels: softmax, then top-k, top-p on the
// top-k-renormalised mass (or jointly), then min-p, with per-row
// parameters; filtered tokens exactly 0.
//
// No sort: every filter is a threshold on the weights w, found by radix
// descent over the float bits (rowops.cuh descend: four byte-wide histogram
// passes), or for 16-bit rows on the list of distinct values (patterns.cuh),
// on counts for top-k and on fixed-point mass for top-p; a token
// survives iff it is at or above every threshold. The normaliser is
// engine/cpu's Sum in its exact order (rowops.cuh tree_sum), so the
// probabilities equal engine/cpu's bit for bit, which spec_verify relies on.
//
// Rows whose filters are decided inside their top-k set take the top-k
// fast path (fastrow.cuh): one read of the row, the chunks write the
// zeros, the row's last block writes the kept probabilities, normalised by
// the Sum over the kept tokens alone (the same bits). Every other row is
// served by the full-row kernel, one block a row, by distinct value where
// the row is 16-bit (patterns.cuh), else per token through a scratch row
// of weights.
//
// The kernels are compiled in csrc/instances/ (renorm_fast_*.cu,
// renorm_full_*.cu), a dtype and a family each, so that the build runs
// them side by side; renorm.cu, the launcher, takes them by pointer.
#pragma once

#include "fastrow.cuh"
#include "patterns.cuh"

namespace sv {

constexpr int kRenormBlock = 512;

// RenormFastKernel and RenormKernel are the types of renorm_fast_kernel
// and renorm_kernel for logits of T.
template <typename T>
using RenormFastKernel = void (*)(const T *__restrict__, FastArgs, float *, int, float *);
template <typename T>
using RenormKernel = void (*)(const T *__restrict__, int, int, RowParams, int, float *__restrict__,
                              float *__restrict__, const int *__restrict__);

// renorm_fast_kernels and renorm_full_kernels are one dtype's kernels,
// each defined in its own translation unit (csrc/instances/).
FastKernels<RenormFastKernel<float>> renorm_fast_kernels(const float *);
FastKernels<RenormFastKernel<__half>> renorm_fast_kernels(const __half *);
FastKernels<RenormFastKernel<__nv_bfloat16>> renorm_fast_kernels(const __nv_bfloat16 *);
FullRowKernels<RenormKernel<float>> renorm_full_kernels(const float *);
FullRowKernels<RenormKernel<__half>> renorm_full_kernels(const __half *);
FullRowKernels<RenormKernel<__nv_bfloat16>> renorm_full_kernels(const __nv_bfloat16 *);

namespace {

// renorm_tokens is renorm_row's per-token path: row_stat, then an exact
// weight per token (filtered rows: into a scratch row of wbuf), the
// filters by radix descent, and the Sum.
template <typename T, int BLOCK>
__device__ __forceinline__ void renorm_tokens(const T *x, int vocab, const RowParams &rp, int flags, float *out,
                                              float *wbuf, int row, RowShared<BLOCK> &sh) {
  const RowStat st = row_stat<T, BLOCK>(x, vocab, sh);
  if (!st.valid) {
    fill_row<BLOCK>(out, vocab, nan_f32());
    return;
  }
  const float temp = rp.temperature[row];
  if (temp == 0.0f) {
    for (int i = threadIdx.x; i < vocab; i += BLOCK) out[i] = i == st.arg ? 1.0f : 0.0f;
    return;
  }
  if (!active_filters(rp, row, vocab)) {
    const XSource<T> xs{x, st.m, temp};
    const float s = tree_sum<BLOCK>(xs, vocab, (const Filter *)nullptr, sh);
    xs.template each<BLOCK>(vocab, [&](int i, float w) { out[i] = __fdiv_rn(w, s); });
    return;
  }
  float *wrow = wbuf + (size_t)row * wstride(vocab);
  fill_weights<T, BLOCK>(x, vocab, st.m, temp, wrow);
  const WSource ws{wrow};
  const Filter f = make_filter<BLOCK>(ws, vocab, rp, row, flags, sh);
  const float s = tree_sum<BLOCK>(ws, vocab, &f, sh);
  ws.template each<BLOCK>(vocab, [&](int i, float w) { out[i] = f.kept(i, w) ? __fdiv_rn(w, s) : 0.0f; });
}

// renorm_tokens_call is renorm_tokens, not inlined: a pattern kernel calls
// it for the rows the pattern path cannot take, and inlined, its registers
// would add to the pattern path's (spills, in a block whose shared memory
// leaves L1 little room for them).
template <typename T, int BLOCK>
__device__ __noinline__ void renorm_tokens_call(const T *x, int vocab, const RowParams &rp, int flags, float *out,
                                                float *wbuf, int row, RowShared<BLOCK> &sh) {
  renorm_tokens<T, BLOCK>(x, vocab, rp, flags, out, wbuf, row, sh);
}

// renorm_patterns writes a row whose tables pattern_ready built: the same
// filters, Sum and quotients as renorm_tokens, on weights from the tables,
// and each distinct weight divided once.
template <typename T, int BLOCK>
__device__ __noinline__ void renorm_patterns(const T *x, int vocab, const RowParams &rp, int flags, float *out,
                                             int row, PatternSmem<BLOCK> &p) {
  PSource<T> ps = pattern_source<T>(x, p);
  if (active_filters(rp, row, vocab)) {
    const Filter f = pattern_filter<T, BLOCK>(ps, vocab, rp, row, flags, p);
    pattern_narrow<T, BLOCK>(ps, f, p);  // from here on ps reads the kept weights
    pattern_quads<T, BLOCK>(ps, vocab, p);
    ps.quads = p.quads;
  }
  const float s = tree_sum<BLOCK>(ps, vocab, (const Filter *)nullptr, p.sh);
  for (int j = threadIdx.x; j < p.n; j += BLOCK) p.w[j] = __fdiv_rn(p.w[j], s);  // w[n] = 0 stays
  __syncthreads();
  pattern_write<BLOCK>(ps, vocab, out, p.zeros, [](int, float q) { return q; });
}

// renorm_row writes row's probabilities. With PATTERN (16-bit T only), pat
// is the block's pattern tables (patterns.cuh; sh is pat->sh), and a row
// that can take the pattern path takes it.
template <typename T, int BLOCK, bool PATTERN>
__device__ void renorm_row(const T *__restrict__ logits, int vocab, const RowParams &rp, int flags,
                           float *__restrict__ probs, float *__restrict__ wbuf, int row, RowShared<BLOCK> &sh,
                           PatternSmem<BLOCK> *pat) {
  const T *x = logits + (size_t)row * vocab;
  float *out = probs + (size_t)row * vocab;
  if constexpr (PATTERN && sizeof(T) == 2) {
    const float temp = rp.temperature[row];
    if (temp != 0.0f) {
      const PatternOutcome got = pattern_ready<T, BLOCK>(x, vocab, temp, *pat);
      if (got == kPatternInvalid) {
        fill_row<BLOCK>(out, vocab, nan_f32());
        return;
      }
      if (got == kPatternReady) {
        renorm_patterns<T, BLOCK>(x, vocab, rp, flags, out, row, *pat);
        return;
      }
    }
    renorm_tokens_call<T, BLOCK>(x, vocab, rp, flags, out, wbuf, row, sh);
  } else {
    renorm_tokens<T, BLOCK>(x, vocab, rp, flags, out, wbuf, row, sh);
  }
}

// renorm_full_row is renorm_row in a fast kernel's block, for a row it
// flagged: not inlined, so that the full path's registers stay out of the
// fast path's.
template <typename T>
__device__ __noinline__ void renorm_full_row(const T *__restrict__ logits, const FastArgs &a, float *probs,
                                             float *wbuf, int row) {
  renorm_row<T, kFastBlock, false>(logits, a.vocab, a.rp, a.flags, probs, wbuf, row, fast_full_shared(), nullptr);
}

// renorm_fast_kernel serves the rows that take the top-k fast path
// (fastrow.cuh): block (c, row) scans chunk c; the row's last block writes
// the kept tokens' probabilities over the zeros the chunks wrote (when
// zero_fill; in place, the last block writes the zeros itself). Rows it
// cannot serve are flagged in a.todo for renorm_kernel, or, where
// fast_serves (no renorm_kernel follows), served by the flagging block
// with the full-row path: the launch of a second kernel that has nothing
// to do is a large part of a small launch. That path is compiled in only
// where SERVE (fast_serves): its call costs the fast path a stack frame
// and spills, which large launches would pay. With CLUSTER (only with SERVE) a
// row's chunks are one cluster (fast_row.cuh fast_cluster_row).
template <typename T, bool SERVE, bool CLUSTER>
__global__ void __launch_bounds__(kFastBlock, 4)
    renorm_fast_kernel(const T *__restrict__ logits, FastArgs a, float *probs, int zero_fill, float *wbuf) {
  if constexpr (CLUSTER && !kSm90Pass) {
    return;  // sm_80 pass: an sm_80 binary never runs clusters
  } else {
    pdl_trigger();  // renorm_kernel may launch now; it waits for this kernel
    FastSmem &s = fast_smem();
    const int row = blockIdx.y, n = a.vocab;
    float *out = probs + (size_t)row * n;
    FastTop top;
    const FastOutcome got = fast_row<T, CLUSTER>(logits + (size_t)row * n, a, row, fast_params(a.rp, row),
                                                 zero_fill ? out : nullptr, s, top);
    if (SERVE && got == kFastFlagged) {
      renorm_full_row<T>(logits, a, probs, wbuf, row);
      return;
    }
    if (got != kFastServed) return;
    const float sum = sparse_sum(n, top.kept, s);
    if (!zero_fill) {
      for (int i = threadIdx.x; i < n; i += kFastBlock) out[i] = 0.0f;
      __syncthreads();
    }
    for (int r = threadIdx.x; r < top.kept; r += kFastBlock) out[s.sidx[r]] = __fdiv_rn(s.sw[r], sum);
  }
}

// renorm_kernel serves one row per block, or with todo only the rows
// renorm_fast_kernel flagged (flagged_slots). PATTERN variants take
// sizeof(PatternSmem<BLOCK>) bytes of dynamic shared memory.
template <typename T, int BLOCK, bool PATTERN>
__global__ void __launch_bounds__(BLOCK, 1)
    renorm_kernel(const T *__restrict__ logits, int vocab, int rows, RowParams rp, int flags,
                  float *__restrict__ probs, float *__restrict__ wbuf, const int *__restrict__ todo) {
  if constexpr (PATTERN && !kSm90Pass) {
    return;  // sm_80 pass: never launched from an sm_80 binary (full_row_variant)
  } else {
    __shared__ Flagged<BLOCK> fl;
    PatternSmem<BLOCK> *pat;
    RowShared<BLOCK> &sh = full_row_shared<BLOCK, PATTERN>(pat);
    pdl_wait();  // launched behind renorm_fast_kernel: its flags and zeros first
    const int n = todo ? flagged_slots(todo, rows, fl) : 1;
    for (int i = 0; i < n; i++) {  // one call site, so that it is inlined
      renorm_row<T, BLOCK, PATTERN>(logits, vocab, rp, flags, probs, wbuf, todo ? fl.slot[i] : (int)blockIdx.x, sh,
                                    pat);
      __syncthreads();  // sh serves the next row
    }
  }
}


// renorm_fast_instances and renorm_full_instances take the addresses of a
// dtype's kernels, which compiles them in the translation unit that calls
// them (one of csrc/instances/).
template <typename T>
FastKernels<RenormFastKernel<T>> renorm_fast_instances() {
  return {renorm_fast_kernel<T, false, false>, renorm_fast_kernel<T, true, false>, renorm_fast_kernel<T, true, true>};
}
template <typename T>
FullRowKernels<RenormKernel<T>> renorm_full_instances() {
  return {renorm_kernel<T, kRenormBlock, sizeof(T) == 2>, renorm_kernel<T, kRenormBlock, false>};
}

}  // namespace
}  // namespace sv
