// sample.cu: seeded draws from the renorm distribution, drawing exactly the
// tokens engine/cpu draws for the same seed, offset and method.
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
//   - mixed batches: greedy rows through the indexed argmax in one launch,
//     the sampled rows one block each;
//   - many draws: each sampled row's CDF is written once (a block scan),
//     then one thread per draw binary-searches it: 10^6 draws per row cost
//     one pass plus 10^6 * log2(V) cached reads.
//
// History (H100, bf16, B=512, V=128256; "filtered" is top-k 50, top-p 0.9,
// T=0.7, auto = rejection; "plain" is T=1, inverse CDF; 2026-11-22):
//
//   v1  one block of 512 per row, strided loops of one load at a time, the
//       CDF search a block scan per 4096-token tile, rejection rounds over
//       the whole row. Filtered 6542 us, plain 932 us, Gumbel 1140 us.
//   v2  16-byte loads four per thread, the two-level segment search (one
//       pass instead of 31 tile scans), 256-thread blocks, weights
//       recomputed (no scratch row) for unfiltered rows. Filtered 4486 us,
//       plain 610 us, Gumbel 579 us.
//   v3  8-copy radix histograms, and the rejection candidates kept in an
//       ordered list (stable compaction after each rejected round), so
//       rounds after the first read the candidates, not the row: filtered
//       2552 us.
//   v4  512-thread blocks, the cheaper exact exp for weights, the packed
//       row max: filtered 2362 us, plain 371 us, Gumbel 506 us.
//   v5  a lean kernel (no filter code, 64 registers, two blocks per SM)
//       when no row of the launch has a filter on: plain 310 us, Gumbel
//       408 us; filtered 2392 us.
//   v6  the top-k fast path (fastrow.cuh, sample_fast_kernel)
//       for single inverse-CDF draws from rows with 0 < top_k <= 256: one
//       read of the row and exact weights for the top-k set alone; `auto`
//       became the inverse CDF (docs/SEMANTICS.md), since rejection's first
//       round needs every weight. Filtered B=512: 2392 -> 138 us (3.1x the
//       floor); B=1: 452 -> 26.8 us. Predicted ~65 us at B=512: ncu shows
//       the scan at 26-32% of DRAM bandwidth and 43% issue, latency-bound
//       (each block waits on its four loads, then on its barriers).
//   v7  a lean scan (no per-thread argmax, one barrier a tile, appends by
//       the threads that pass theta only), whole rows per block when there
//       are enough rows, and the flagged rows served by
//       sample_flagged_kernel with a grid of resident blocks: filtered
//       B=512 76.3 us (1.69x the floor), B=1 22.7 us.
//   v8  fastrow.cuh's shorter finishing steps (renorm.cu v6) and the
//       draw by one warp for up to 64 kept tokens: B=1 18.1 us, B=512
//       73.0 us (1.64x).
//   v9  at most ~50 rows under SV_ALL_FAST, the fast kernel draws the
//       rows it flags itself (no second kernel), and rows of 8 to 16
//       chunks run as one cluster each (renorm.cu v7, v8): B=1 18.4 ->
//       16.3 -> 15.9 us; B=512 unchanged (73.3 us).
//   v10 the cluster rows' pushed merge (renorm.cu v9): B=1
//       15.9 -> 15.1 us.
//   v11 (this file) the full-row kernels serve 16-bit rows by distinct
//       value (patterns.cuh, renorm.cu v10), the inverse CDF over the
//       4-token groups that may hold kept tokens: top-p alone B=512
//       2196.9 -> 491.9 us, B=1 396.3 -> 104.6; k1000 2404.7 -> 394.2;
//       rejection 2370.9 -> 1242.7; plain 309.5 -> 287.9 (2026-11-23).
//
// What is left (docs/PERF.md): B=1 is a chain of dependent steps in one
// block (~5 us of select, rank, filters and draw); the pattern path is
// bound by one block an SM (its count and its reads of the row); f32
// rows, f16 rows of many distinct values and Gumbel still pay ~40
// instructions per token for the exact exp.
#include "fastrow.cuh"
#include "patterns.cuh"

namespace sv {

int launch_argmax(int dtype, const void *logits, int rows, int vocab, const int *row_idx, int n_idx,
                  int flags, int *tokens);

namespace {

constexpr int kRowBlock = 512;

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
  PatternSmem<BLOCK> *pat;
  RowShared<BLOCK> &sh = full_row_shared<BLOCK, PATTERN>(pat);
  sample_slot<T, BLOCK, FILTERS, PATTERN>(logits, a, blockIdx.x, sh, pat);
}

// sample_flagged_kernel serves the slots sample_fast_kernel flagged in todo
// (flagged_slots). It is a kernel of its own because the loop costs
// sample_kernel's filtered variant a few registers it does not have: folded
// into it, the rejection rounds spilled and ran 5% slower.
template <typename T, int BLOCK, bool PATTERN>
__global__ void __launch_bounds__(BLOCK, 1)
    sample_flagged_kernel(const T *__restrict__ logits, SampleArgs a, const int *__restrict__ todo, int slots) {
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
// has nothing to do cost ~3 us at B = 1 (docs/PERF.md, run 64). That
// path is compiled in only where SERVE (fast_serves): its call costs the
// fast path a stack frame and spills, ~5 us at B = 512. With CLUSTER (only
// with SERVE) a row's chunks are one cluster (fastrow.cuh fast_cluster_row).
template <typename T, bool SERVE, bool CLUSTER>
__global__ void __launch_bounds__(kFastBlock, 4)
    sample_fast_kernel(const T *__restrict__ logits, FastArgs a, int *tokens, SampleArgs sa) {
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

// draws_kernel writes draw d of every listed row: the inverse CDF of the
// sampled rows' written CDFs, the token itself for greedy and invalid rows.
__global__ void draws_kernel(const int *__restrict__ row_idx, int n_greedy, int vocab, int draws,
                             RowParams rp, const int *__restrict__ tokens,
                             const unsigned long long *__restrict__ cdf,
                             const unsigned long long *__restrict__ totals, int *__restrict__ samples) {
  const int slot = blockIdx.y;
  const int row = row_idx[slot];
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d >= draws) return;
  int *out = samples + (size_t)row * draws;
  const int s = slot - n_greedy;
  const unsigned long long total = s >= 0 ? totals[s] : 0ull;
  if (total == 0) {
    out[d] = tokens[row];
    return;
  }
  const Stream rng(rp.seed[row], rp.offset[row], row, d);
  const unsigned long long t = pick(rng.u64(0), total);
  const unsigned long long *c = cdf + (size_t)s * vocab;
  int lo = 0, hi = vocab - 1;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (c[mid] > t)
      hi = mid;
    else
      lo = mid + 1;
  }
  out[d] = lo;
}

size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

}  // namespace

int launch_sample(int dtype, const void *logits, int rows, int vocab, uint64_t params, int flags,
                  const int *row_idx, int n_greedy, int n_sampled, int *tokens, int draws, int *samples) {
  if (rows < 0 || vocab < 1 || n_greedy < 0 || n_sampled < 0 || draws < 0)
    return set_error(SV_ERR_INVALID, "sample: bad shape (%d rows, %d tokens, %d greedy, %d sampled, %d draws)",
                     rows, vocab, n_greedy, n_sampled, draws);
  if (vocab > kMaxExactVocab)
    return set_error(SV_ERR_UNSUPPORTED, "sample: vocabulary %d over %d", vocab, kMaxExactVocab);
  if (draws > 0 && !samples) return set_error(SV_ERR_INVALID, "sample: draws without a samples buffer");
  if (n_greedy + n_sampled > 65535) return set_error(SV_ERR_UNSUPPORTED, "sample: over 65535 rows");
  const RowParams rp = row_params(params, rows);
  int st;
  if (n_greedy > 0) {
    st = launch_argmax(dtype, logits, rows, vocab, row_idx, n_greedy, SV_ARGMAX_INF_INVALID, tokens);
    if (st != SV_OK) return st;
  }
  const size_t wbytes = align256(sizeof(float) * (size_t)n_sampled * wstride(vocab));
  const size_t cbytes = draws > 0 ? align256(sizeof(unsigned long long) * (size_t)n_sampled * vocab) : 0;
  const size_t tbytes = align256(sizeof(unsigned long long) * (size_t)(n_sampled + 1));
  const int method = (flags >> SV_METHOD_SHIFT) & 15;
  const bool lists = (flags & SV_HAS_FILTERS) && method == SV_METHOD_REJECTION;
  const size_t lbytes = lists ? align256(sizeof(int) * (size_t)n_sampled * wstride(vocab)) : 0;
  // The top-k fast path serves single draws by inverse CDF.
  const bool fast = (flags & SV_HAS_FILTERS) && draws == 0 && n_sampled > 0 &&
                    (method == SV_METHOD_AUTO || method == SV_METHOD_INVERSE_CDF);
  int chunks = 1, chunk = vocab;
  if (fast) fast_layout(n_sampled, vocab, chunks, chunk);
  const size_t slow_bytes = wbytes + cbytes + tbytes + 2 * lbytes;
  void *ws = nullptr;
  st = workspace(slow_bytes + (fast ? fast_bytes(n_sampled, chunks) : 0), &ws);
  if (st != SV_OK) return st;
  char *base = static_cast<char *>(ws);
  FastArgs fa{};
  if (fast) {
    st = fast_args(base + slow_bytes, n_sampled, vocab, rp, flags, row_idx + n_greedy, fa);
    if (st != SV_OK) return st;
  }
  SampleArgs a;
  a.vocab = vocab;
  a.rp = rp;
  a.flags = flags;
  a.rows = row_idx + n_greedy;
  a.tokens = tokens;
  a.wbuf = reinterpret_cast<float *>(base);
  a.cdf = draws > 0 ? reinterpret_cast<unsigned long long *>(base + wbytes) : nullptr;
  a.totals = draws > 0 ? reinterpret_cast<unsigned long long *>(base + wbytes + cbytes) : nullptr;
  a.list_idx = lists ? reinterpret_cast<int *>(base + wbytes + cbytes + tbytes) : nullptr;
  a.list_w = lists ? reinterpret_cast<float *>(base + wbytes + cbytes + tbytes + lbytes) : nullptr;
  if (n_sampled > 0) {
    if (flags & SV_HAS_FILTERS) {
      SV_DISPATCH_DTYPE(dtype, T, {
        constexpr bool P16 = sizeof(T) == 2;  // pattern variants exist for 16-bit logits
        if (fast) {
          const bool serve = fast_serves(flags, fa);
          const bool cluster = serve && fast_cluster(sample_fast_kernel<T, true, true>, fa);
          auto fast_kern = cluster ? sample_fast_kernel<T, true, true>
                                   : serve ? sample_fast_kernel<T, true, false> : sample_fast_kernel<T, false, false>;
          st = fast_launch(fast_kern, dim3(fa.chunks, n_sampled), cluster, "sample (top-k fast path)",
                           static_cast<const T *>(logits), fa, tokens, a);
          if (st != SV_OK) return st;
          if (!serve) {  // else the fast kernel drew its flagged rows itself
            const auto full = full_row_variant<kRowBlock>(sample_flagged_kernel<T, kRowBlock, P16>,
                                                          sample_flagged_kernel<T, kRowBlock, false>, P16);
            const dim3 grid(flagged_grid((const void *)full.kern, kRowBlock, n_sampled, full.smem));
            st = launch_after((flags & SV_ALL_FAST) != 0, full.kern, grid, kRowBlock, full.smem, "sample",
                              static_cast<const T *>(logits), a, fa.todo, n_sampled);
            if (st != SV_OK) return st;
          }
        } else {
          const auto full = full_row_variant<kRowBlock>(sample_kernel<T, kRowBlock, true, P16>,
                                                        sample_kernel<T, kRowBlock, true, false>, P16);
          full.kern<<<n_sampled, kRowBlock, full.smem, stream()>>>(static_cast<const T *>(logits), a);
        }
      });
    } else {
      SV_DISPATCH_DTYPE(dtype, T, {
        constexpr bool P16 = sizeof(T) == 2;
        // Gumbel-max without filters reads no weights: the lean kernel, two blocks an SM.
        const auto full = full_row_variant<kRowBlock>(sample_kernel<T, kRowBlock, false, P16>,
                                                      sample_kernel<T, kRowBlock, false, false>,
                                                      P16 && method != SV_METHOD_GUMBEL);
        full.kern<<<n_sampled, kRowBlock, full.smem, stream()>>>(static_cast<const T *>(logits), a);
      });
    }
    st = check_launch("sample");
    if (st != SV_OK) return st;
  }
  if (draws > 0 && n_greedy + n_sampled > 0) {
    dim3 grid((draws + 255) / 256, n_greedy + n_sampled);
    draws_kernel<<<grid, 256, 0, stream()>>>(row_idx, n_greedy, vocab, draws, rp, tokens, a.cdf, a.totals,
                                            samples);
    st = check_launch("sample draws");
    if (st != SV_OK) return st;
  }
  return SV_OK;
}

}  // namespace sv

extern "C" int sv_sample(int dtype, uint64_t logits, int rows, int vocab, uint64_t params, int flags,
                         uint64_t row_idx, int n_greedy, int n_sampled, uint64_t tokens, int draws,
                         uint64_t samples) {
  if (!params || !row_idx) return sv::set_error(SV_ERR_INVALID, "sample: no parameters or row list");
  return sv::launch_sample(dtype, reinterpret_cast<const void *>(logits), rows, vocab, params, flags,
                           reinterpret_cast<const int *>(row_idx), n_greedy, n_sampled,
                           reinterpret_cast<int *>(tokens), draws, reinterpret_cast<int *>(samples));
}
