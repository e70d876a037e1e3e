// renorm.cu: softmax, then top-k, top-p on the top-k-renormalised mass (or
// jointly), then min-p, with per-row parameters; filtered tokens exactly 0.
//
// No sort: every filter is a threshold on the weights w, found by radix
// descent over the float bits (rowops.cuh descend: four byte-wide histogram
// passes), or for 16-bit rows on the list of distinct values (patterns.cuh),
// on counts for top-k and on fixed-point mass for top-p; a token
// survives iff it is at or above every threshold. The normaliser is
// engine/cpu's Sum in its exact order (rowops.cuh tree_sum), so the
// probabilities equal engine/cpu's bit for bit, which spec_verify relies on.
//
// History (H100, bf16, V=128256, top-k 50, top-p 0.9, T=0.7; `sampviz
// bench`, 2026-11-22):
//
//   v1  one block of 512 per row, weights written once to a scratch row,
//       every pass a strided loop of one load per iteration. B=1: 1137 us,
//       B=128: 1613 us. Each iteration waited on its load: the passes ran at
//       a few percent of the bandwidth, latency-bound.
//   v2  every pass issues four 16-byte loads per thread before using them;
//       the Sum's 256-token chunks are summed one per thread with the 8 lane
//       sums in registers (16-byte loads); each radix histogram has 8 copies
//       (lane % 8), since a row's weights share their top byte and 32 lanes
//       adding to one shared counter serialise. B=1: 554 us, B=128: 805 us.
//   v3  512 threads per block (ncu: 12.5% occupancy at B=128 with 256),
//       the exact exp without the tests that cannot fire for weights
//       (argument <= 0), the row max from one packed compare per 16-byte
//       vector. B=1: 394 us, B=128: 602-616 us.
//   v4  the top-k fast path (fastrow.cuh, renorm_fast_kernel)
//       for rows with 0 < top_k <= 256: one read of the row, the chunks
//       write the zeros, the row's last block writes the kept
//       probabilities, normalised by the Sum over the kept tokens alone
//       (fastrow.cuh sparse_sum, the same bits). B=1: 28.7 us, B=128:
//       70.8 us (2.1x the floor).
//   v5  fastrow.cuh's lean scan and layout, 16-byte zero stores, and the
//       flagged rows served by a grid of resident blocks: B=1 24.6 us,
//       B=128 60.0 us (1.78x).
//   v6  fastrow.cuh's shorter finishing steps, timed one by one
//       with `make gpu-trace` (chunks of 8192 tokens, the max kept by the
//       merge, one histogram pass for the k-th largest, small sets ranked
//       and filtered without block scans, the sparse Sum three levels a
//       barrier): B=1 19.6 us, B=128 54.7 us (1.64x).
//   v7  at most ~50 rows under SV_ALL_FAST, the fast kernel serves the
//       rows it flags itself (fast_serves), so no full-row kernel
//       follows: B=1 19.9 -> 17.7 us; B=128 unchanged (55.6 us).
//   v8  there, rows of 8 to 16 chunks run as one cluster each
//       (fastrow.cuh fast_cluster_row): the candidates stay in shared
//       memory, no fence or counter; B=1 17.7 -> 16.7 us.
//   v9  a cluster row's chunks push their candidates into
//       block 0's shared memory (fastrow.cuh cluster_push) instead of
//       block 0 pulling them: B=1 16.7 -> 16.0 us.
//   v10 (this file) the full-row kernel serves 16-bit rows by distinct
//       value (patterns.cuh: one count of every pattern, one exp per
//       distinct value, the filters on that list, the weights from a
//       table): top-p alone, B=128: 564.5 -> 149.6 us (2026-11-23).
//       Then the list step skipping absent keys, and the 256-token
//       chunks with no kept token written by bulk stores of zeros from
//       shared memory: 149.6 -> 127.0 us.
//
// What is left (docs/PERF.md): the pattern path runs one block an SM and
// is bound by that block's memory throughput (the count's read of the
// row, the stores of kept chunks); f32 rows and f16 rows of many
// distinct values still make ~13 passes over a 513 KB scratch row.
#include "fastrow.cuh"
#include "patterns.cuh"

namespace sv {
namespace {

constexpr int kRowBlock = 512;

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
  SV_MARK(19);
  const float s = tree_sum<BLOCK>(ps, vocab, (const Filter *)nullptr, p.sh);
  SV_MARK(23);
  for (int j = threadIdx.x; j < p.n; j += BLOCK) p.w[j] = __fdiv_rn(p.w[j], s);  // w[n] = 0 stays
  __syncthreads();
  pattern_write<BLOCK>(ps, vocab, out, p.zeros, [](int, float q) { return q; });
  SV_MARK(24);
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
    SV_MARK(14);
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
// to do cost ~3 us at B = 1 (docs/PERF.md, run 64). That path is compiled
// in only where SERVE (fast_serves): its call costs the fast path a stack
// frame and spills, ~5 us at B = 128. With CLUSTER (only with SERVE) a
// row's chunks are one cluster (fastrow.cuh fast_cluster_row).
template <typename T, bool SERVE, bool CLUSTER>
__global__ void __launch_bounds__(kFastBlock, 4)
    renorm_fast_kernel(const T *__restrict__ logits, FastArgs a, float *probs, int zero_fill, float *wbuf) {
  pdl_trigger();  // renorm_kernel may launch now; it waits for this kernel
  FastSmem &s = fast_smem();
  const int row = blockIdx.y, n = a.vocab;
  float *out = probs + (size_t)row * n;
  FastTop top;
  const FastOutcome got =
      fast_row<T, CLUSTER>(logits + (size_t)row * n, a, row, fast_params(a.rp, row), zero_fill ? out : nullptr, s, top);
  if (SERVE && got == kFastFlagged) {
    renorm_full_row<T>(logits, a, probs, wbuf, row);
    return;
  }
  if (got != kFastServed) return;
  const float sum = sparse_sum(n, top.kept, s);
  SV_MARK(12);
  if (!zero_fill) {
    for (int i = threadIdx.x; i < n; i += kFastBlock) out[i] = 0.0f;
    __syncthreads();
  }
  for (int r = threadIdx.x; r < top.kept; r += kFastBlock) out[s.sidx[r]] = __fdiv_rn(s.sw[r], sum);
  SV_MARK(13);
}

// renorm_kernel serves one row per block, or with todo only the rows
// renorm_fast_kernel flagged (flagged_slots). PATTERN variants take
// sizeof(PatternSmem<BLOCK>) bytes of dynamic shared memory.
template <typename T, int BLOCK, bool PATTERN>
__global__ void __launch_bounds__(BLOCK, 1)
    renorm_kernel(const T *__restrict__ logits, int vocab, int rows, RowParams rp, int flags,
                  float *__restrict__ probs, float *__restrict__ wbuf, const int *__restrict__ todo) {
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

}  // namespace

int launch_renorm(int dtype, const void *logits, int rows, int vocab, uint64_t params, int flags,
                  float *probs) {
  if (rows < 0 || vocab < 1) return set_error(SV_ERR_INVALID, "renorm: %d rows of %d tokens", rows, vocab);
  if (vocab > kMaxExactVocab)
    return set_error(SV_ERR_UNSUPPORTED, "renorm: vocabulary %d over %d", vocab, kMaxExactVocab);
  if (rows == 0) return SV_OK;
  const RowParams rp = row_params(params, rows);
  const size_t wbytes = (sizeof(float) * (size_t)rows * wstride(vocab) + 255) & ~(size_t)255;
  const bool fast = (flags & SV_HAS_FILTERS) && rows <= 65535;  // the fast grid's rows are its y
  int chunks = 1, chunk = vocab;
  if (fast) fast_layout(rows, vocab, chunks, chunk);
  void *ws = nullptr;
  int st = workspace(wbytes + (fast ? fast_bytes(rows, chunks) : 0), &ws);
  if (st != SV_OK) return st;
  FastArgs fa{};
  if (fast) {
    st = fast_args(static_cast<char *>(ws) + wbytes, rows, vocab, rp, flags, nullptr, fa);
    if (st != SV_OK) return st;
  }
  const int zero_fill = static_cast<const void *>(probs) != logits;
  SV_DISPATCH_DTYPE(dtype, T, {
    if (fast) {
      const bool serve = fast_serves(flags, fa);
      const bool cluster = serve && fast_cluster(renorm_fast_kernel<T, true, true>, fa);
      auto fast_kern = cluster ? renorm_fast_kernel<T, true, true>
                               : serve ? renorm_fast_kernel<T, true, false> : renorm_fast_kernel<T, false, false>;
      st = fast_launch(fast_kern, dim3(fa.chunks, rows), cluster, "renorm (top-k fast path)",
                       static_cast<const T *>(logits), fa, probs, zero_fill, static_cast<float *>(ws));
      if (st != SV_OK || serve) return st;  // the fast kernel served its flagged rows
    }
    constexpr bool P16 = sizeof(T) == 2;  // pattern variants exist for 16-bit logits
    const auto full = full_row_variant<kRowBlock>(renorm_kernel<T, kRowBlock, P16>,
                                                  renorm_kernel<T, kRowBlock, false>, P16);
    if (fast)
      return launch_after((flags & SV_ALL_FAST) != 0, full.kern,
                          dim3(flagged_grid((const void *)full.kern, kRowBlock, rows, full.smem)), kRowBlock,
                          full.smem, "renorm", static_cast<const T *>(logits), vocab, rows, rp, flags, probs,
                          static_cast<float *>(ws), fa.todo);
    full.kern<<<rows, kRowBlock, full.smem, stream()>>>(static_cast<const T *>(logits), vocab, rows, rp, flags,
                                                        probs, static_cast<float *>(ws), nullptr);
  });
  return check_launch("renorm");
}

}  // namespace sv

#ifdef SV_TRACE
// sv_trace_read copies renorm's trace stamps (trace.cuh) to host, n words
// at most, and clears them for the next launch. Only in -DSV_TRACE builds.
extern "C" int sv_trace_read(unsigned long long *host, int n) {
  static unsigned long long zero[SV_TRACE_WORDS];
  if (n < 0) return SV_ERR_INVALID;
  const size_t bytes = sizeof(unsigned long long) * (n < SV_TRACE_WORDS ? (size_t)n : (size_t)SV_TRACE_WORDS);
  if (cudaMemcpyFromSymbol(host, sv::trace_buf, bytes) != cudaSuccess) return SV_ERR_CUDA;
  return cudaMemcpyToSymbol(sv::trace_buf, zero, sizeof(zero)) == cudaSuccess ? SV_OK : SV_ERR_CUDA;
}
#endif

extern "C" int sv_renorm(int dtype, uint64_t logits, int rows, int vocab, uint64_t params, int flags,
                         uint64_t probs) {
  if (!params) return sv::set_error(SV_ERR_INVALID, "renorm: no parameters");
  return sv::launch_renorm(dtype, reinterpret_cast<const void *>(logits), rows, vocab, params, flags,
                           reinterpret_cast<float *>(probs));
}
