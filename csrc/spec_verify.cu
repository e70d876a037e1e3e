// spec_verify.cu: chain speculative sampling, many trials per launch, with
// a per-step trace; the same tokens, counters and trace as engine/cpu's
// SpecChain for the same seed and offset.
//
// Two kernels, no probability rows in memory:
//   - prepare, one block per (row, position): the row's max, filters
//     (rowops.cuh thresholds), the exact normaliser (engine/cpu's Sum
//     order) and p_i(x_i); a few dozen bytes per position.
//   - chain, one block per (trial, row): thread 0 runs the acceptance tests
//     (u * q < p, every position counted), then the whole block draws the
//     one residual (or bonus) token from Weight(max(p - q, 0)) at the
//     stopping position with the segment search, recomputing p from the
//     logits on the fly.
// Trials are independent draws of the row's stream (draw index = trial).
//
// History (H100, bf16, B=128, K=8, V=128256, T=1, one-hot drafts, one
// trial; 2026-11-22):
//
//   v1  strided one-load-at-a-time loops, the residual draw a block scan
//       per 4096-token tile: 1066 us (B=1: 215 us).
//   v2  16-byte loads, the Sum's chunks one per thread, the segment search,
//       256-thread blocks: 934 us. ncu: prepare ALU-bound (52% issue, ~75
//       instructions per token), chain at 12.5% occupancy.
//   v3  512-thread blocks, the exact exp without dead tests, the packed row
//       max: 553 us (B=1: 153 us).
//   v4  lean kernels (no filter code: 46-50 registers, two prepare blocks
//       per SM) when no row has a filter on: 454 us (B=1: 140 us); with
//       bf16 draft distributions 554 us.
//   v5  the top-k fast path (fastrow.cuh, spec_fast_kernel) for
//       positions with 0 < top_k <= 256: one read of each target row, exact
//       weights for the top-k set alone, and the kept tokens with their
//       probabilities in a list per position, so the chain draws the
//       residual from the list, not the row. top-k 50, top-p 0.9, T=0.7:
//       B=128 300.5 us (3.0x the floor), B=1 37.8 us.
//   v6  (this file) fastrow.cuh's lean scan (whole rows per block at
//       B=128: 1152 slots), the flagged slots prepared by a grid of
//       resident blocks (the no-op prepare launch was 7 us as one block
//       per slot), the chain's acceptance tests one lane per position:
//       with filters B=128 195.7 us (1.93x), B=1 33.2 us.
//
// What is left (docs/PERF.md): unfiltered positions still compute the exact
// exp for every token of B*(K+1) rows (~147M here), ~1.5-2x the bandwidth
// floor by itself; the chain's residual pass runs one block per row.
#include "fastrow.cuh"

namespace sv {
namespace {

constexpr int kRowBlock = 512;
constexpr int kLeanBlock = 512;

struct PosStat {
  float m;
  float s;
  float temp;
  int arg;
  int valid;
  int onehot;
  int filtered;
  float px;  // p_i(x_i), i < K
  int list;  // >= 0: p is nonzero only at the list's tokens (top-k fast path)
  Filter f;
};

// SpecLists holds the fast path's kept tokens per (row, position): their
// ids by index and their probabilities, kFastList entries per slot.
struct SpecLists {
  int *idx;
  float *p;
};

__device__ __forceinline__ float load_any(const void *p, int dtype, size_t i) {
  switch (dtype) {
    case SV_F16:
      return load_f32(static_cast<const __half *>(p), (int64_t)i);
    case SV_BF16:
      return load_f32(static_cast<const __nv_bfloat16 *>(p), (int64_t)i);
    default:
      return load_f32(static_cast<const float *>(p), (int64_t)i);
  }
}

// target_prob is p(v) at one position, recomputed from the logits (or the
// weight buffer when the position is filtered).
template <typename T, bool FILTERS>
__device__ __forceinline__ float target_prob(const PosStat &ps, const T *x, const float *wrow, int v) {
  if (ps.onehot) return v == ps.arg ? 1.0f : 0.0f;
  const float w = FILTERS && wrow ? wrow[v] : weight_of(load_f32(x, v), ps.m, ps.temp);
  if (FILTERS && ps.filtered && !ps.f.kept(v, w)) return 0.0f;
  return __fdiv_rn(w, ps.s);
}

// FILTERS = false is the lean variant for launches where no row has a
// filter on: without the filter machinery it needs far fewer registers, so
// more blocks share an SM (the exact exp makes this kernel ALU-bound).
template <typename T, int BLOCK, bool FILTERS>
__device__ void prepare_slot(const T *__restrict__ target, int k, int vocab, const RowParams &rp, int flags,
                             const int *__restrict__ drafts, float *__restrict__ wbuf, PosStat *__restrict__ stats,
                             int slot, RowShared<BLOCK> &sh) {  // slot = row * (k + 1) + position
  const int row = slot / (k + 1), pos = slot % (k + 1);
  const T *x = target + (size_t)slot * vocab;
  const RowStat st = row_stat<T, BLOCK>(x, vocab, sh);
  PosStat ps;
  ps.m = st.m;
  ps.s = 1.0f;
  ps.temp = rp.temperature[row];
  ps.arg = st.arg;
  ps.valid = st.valid;
  ps.onehot = 0;
  ps.filtered = 0;
  ps.px = nan_f32();
  ps.list = -1;
  ps.f = Filter{false, false, 0.0f, 0x7fffffff, 0.0f, 0.0f};
  const int xd = pos < k ? drafts[(size_t)row * k + pos] : 0;
  if (st.valid && ps.temp == 0.0f) {
    ps.onehot = 1;
    ps.px = xd == st.arg ? 1.0f : 0.0f;
  } else if (st.valid) {
    const XSource<T> xs{x, st.m, ps.temp};
    const bool filtered = FILTERS && active_filters(rp, row, vocab);
    float *wrow = filtered && wbuf ? wbuf + (size_t)slot * wstride(vocab) : nullptr;
    if (wrow) {
      fill_weights<T, BLOCK>(x, vocab, st.m, ps.temp, wrow);
      const WSource ws{wrow};
      ps.f = make_filter<BLOCK>(ws, vocab, rp, row, flags, sh);
      ps.filtered = 1;
      ps.s = tree_sum<BLOCK>(ws, vocab, &ps.f, sh);
    } else if (filtered) {  // no scratch: recompute every weight (exact, slower)
      ps.f = make_filter<BLOCK>(xs, vocab, rp, row, flags, sh);
      ps.filtered = 1;
      ps.s = tree_sum<BLOCK>(xs, vocab, &ps.f, sh);
    } else {
      ps.s = tree_sum<BLOCK>(xs, vocab, (const Filter *)nullptr, sh);
    }
    if (pos < k) ps.px = target_prob<T, FILTERS>(ps, x, wrow, xd);
  }
  if (threadIdx.x == 0) stats[slot] = ps;
}

// spec_prepare_kernel prepares one slot per block, or with todo only the
// slots spec_fast_kernel flagged (flagged_slots).
template <typename T, int BLOCK, bool FILTERS>
__global__ void __launch_bounds__(BLOCK, FILTERS ? 1 : 2)
    spec_prepare_kernel(const T *__restrict__ target, int k, int vocab, int slots, RowParams rp, int flags,
                        const int *__restrict__ drafts, float *__restrict__ wbuf, PosStat *__restrict__ stats,
                        const int *__restrict__ todo) {
  __shared__ RowShared<BLOCK> sh;
  __shared__ Flagged<BLOCK> fl;
  const int n = todo ? flagged_slots(todo, slots, fl) : 1;
  for (int i = 0; i < n; i++) {  // one call site, so that it is inlined
    const int slot = todo ? fl.slot[i] : (int)blockIdx.x;
    prepare_slot<T, BLOCK, FILTERS>(target, k, vocab, rp, flags, drafts, wbuf, stats, slot, sh);
    __syncthreads();  // sh serves the next slot
  }
}

// spec_fast_kernel prepares the positions that take the top-k fast path
// (fastrow.cuh): block (c, slot) scans chunk c of the slot's target row;
// the row's last block forms the exact normaliser over the kept tokens
// (fastrow.cuh sparse_sum), writes their probabilities to the slot's list
// and p_i(x_i). Positions it cannot serve are flagged in a.todo for
// spec_prepare_kernel.
template <typename T>
__global__ void __launch_bounds__(kFastBlock, 4)
    spec_fast_kernel(const T *__restrict__ target, FastArgs a, int k, const int *__restrict__ drafts,
                     PosStat *__restrict__ stats, SpecLists lists) {
  FastSmem &s = fast_smem();
  const int slot = blockIdx.y, n = a.vocab;
  const int row = slot / (k + 1), pos = slot % (k + 1);
  FastTop top;
  if (!fast_row<T>(target + (size_t)slot * n, a, slot, fast_params(a.rp, row), nullptr, s, top)) return;
  const float sum = sparse_sum(n, top.kept, s);
  const int xd = pos < k ? drafts[(size_t)row * k + pos] : -1;
  int *li = lists.idx + (size_t)slot * kFastList;
  float *lp = lists.p + (size_t)slot * kFastList;
  if (threadIdx.x == 0) s.pick = -1;
  __syncthreads();
  for (int r = threadIdx.x; r < top.kept; r += kFastBlock) {
    li[r] = s.sidx[r];
    lp[r] = __fdiv_rn(s.sw[r], sum);
    if (s.sidx[r] == xd) s.pick = r;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    PosStat ps;
    ps.m = top.m;
    ps.s = sum;
    ps.temp = top.temp;
    ps.arg = top.arg;
    ps.valid = 1;
    ps.onehot = 0;
    ps.filtered = 1;
    ps.px = pos < k ? (s.pick >= 0 ? __fdiv_rn(s.sw[s.pick], sum) : 0.0f) : nan_f32();
    ps.list = top.kept;
    ps.f = Filter{false, false, 0.0f, 0x7fffffff, 0.0f, 0.0f};
    stats[slot] = ps;
  }
}

struct ChainArgs {
  int rows, k, vocab;
  RowParams rp;
  const int *drafts;
  const void *qprobs;  // [rows, k, vocab] or null (one-hot)
  int qdtype;
  const PosStat *stats;
  const float *wbuf;
  SpecLists lists;
  int *tokens;    // [trials, rows, k+1]
  int *emitted;   // [trials, rows]
  int *accepted;  // [trials, rows]
  int trace_trials;
  float *tu, *tp, *tq;
  int *tacc, *tres;
};

// draw_stop draws the token at a chain's stopping position over positions
// [0, len): from the residual weights when residual_first is set and they
// are not all 0, else from the target weights, by the segment search with
// the 64-bit uniform u. It returns the position, or -1 when every weight
// is 0.
template <int BLOCK, typename Residual, typename Target>
__device__ int draw_stop(int len, bool residual_first, uint64_t u, Residual residual, Target target,
                         RowShared<BLOCK> &sh) {
  unsigned long long mine = 0, total = 0;
  bool use_residual = residual_first;
  if (use_residual) {
    total = seg_total<BLOCK>(len, residual, mine, sh);
    use_residual = total > 0;
  }
  if (!use_residual) total = seg_total<BLOCK>(len, target, mine, sh);
  if (total == 0) return -1;
  const unsigned long long t = pick(u, total);
  return use_residual ? seg_find<BLOCK>(len, t, mine, residual, sh) : seg_find<BLOCK>(len, t, mine, target, sh);
}

template <typename T, int BLOCK, bool FILTERS>
__global__ void __launch_bounds__(BLOCK, 1) spec_chain_kernel(const T *__restrict__ target, ChainArgs a) {
  __shared__ RowShared<BLOCK> sh;
  __shared__ int stop_sh;
  const int row = blockIdx.x % a.rows, trial = blockIdx.x / a.rows;
  const int k = a.k, n = a.vocab, steps = k + 1;
  const Stream rng(a.rp.seed[row], a.rp.offset[row], row, trial);
  const size_t tbase = ((size_t)trial * a.rows + row) * steps;
  const bool traced = trial < a.trace_trials;
  // The acceptance tests (u * q < p, every position counted), one lane per
  // position in warp 0, so that their loads are in flight together.
  if (threadIdx.x < 32) {
    const int lane = (int)threadIdx.x;
    int stop = -1, acc = 0;
    for (int i0 = 0; i0 < k; i0 += 32) {
      const int i = i0 + lane;
      bool ok = false;
      if (i < k) {
        const int xd = a.drafts[(size_t)row * k + i];
        const float u = u01(rng.block(2 * (uint64_t)i).x);
        const float p = a.stats[(size_t)row * steps + i].px;
        const float q = a.qprobs ? load_any(a.qprobs, a.qdtype, ((size_t)row * k + i) * n + xd) : 1.0f;
        ok = __fmul_rn(u, q) < p;
        if (traced) {
          a.tu[tbase + i] = u;
          a.tp[tbase + i] = p;
          a.tq[tbase + i] = q;
          a.tacc[tbase + i] = ok;
        }
      }
      const unsigned rejected = __ballot_sync(0xffffffffu, i < k && !ok);
      acc += __popc(__ballot_sync(0xffffffffu, ok));
      if (stop < 0 && rejected) stop = i0 + __ffs(rejected) - 1;
    }
    if (lane == 0) {
      if (traced) {
        a.tu[tbase + k] = 0.0f;
        a.tp[tbase + k] = 0.0f;
        a.tq[tbase + k] = 0.0f;
        a.tacc[tbase + k] = 0;
      }
      if (stop < 0) stop = k;
      stop_sh = stop;
      a.emitted[(size_t)trial * a.rows + row] = stop;
      a.accepted[(size_t)trial * a.rows + row] = acc;
    }
  }
  __syncthreads();
  const int j = stop_sh;
  const PosStat ps = a.stats[(size_t)row * steps + j];
  int token = -1;
  if (ps.valid) {
    const T *x = target + ((size_t)row * steps + j) * n;
    const float *wrow = FILTERS && ps.filtered && a.wbuf ? a.wbuf + ((size_t)row * steps + j) * wstride(n) : nullptr;
    const int xd = j < k ? a.drafts[(size_t)row * k + j] : -1;
    const size_t qbase = ((size_t)row * k + j) * n;
    auto q_of = [&](int v) -> float {
      return a.qprobs ? load_any(a.qprobs, a.qdtype, qbase + v) : (v == xd ? 1.0f : 0.0f);
    };
    const uint64_t u = rng.u64(2 * (uint64_t)j + 1);
    if (FILTERS && ps.list >= 0) {
      // p is zero off the kept list, and so is max(p - q, 0): the draw over
      // the list (by index) is the draw over the row with the zeros left out.
      const size_t lbase = ((size_t)row * steps + j) * kFastList;
      const int *li = a.lists.idx + lbase;
      const float *lp = a.lists.p + lbase;
      auto residual = [&](int r) -> unsigned long long { return weight(__fsub_rn(lp[r], q_of(li[r]))); };
      auto target_weight = [&](int r) -> unsigned long long { return weight(lp[r]); };
      const int r = draw_stop<BLOCK>(ps.list, j < k, u, residual, target_weight, sh);
      token = r >= 0 ? li[r] : -1;
    } else {
      auto residual = [&](int v) -> unsigned long long {
        return weight(__fsub_rn(target_prob<T, FILTERS>(ps, x, wrow, v), q_of(v)));
      };
      auto target_weight = [&](int v) -> unsigned long long { return weight(target_prob<T, FILTERS>(ps, x, wrow, v)); };
      token = draw_stop<BLOCK>(n, j < k, u, residual, target_weight, sh);
    }
  }
  int *out = a.tokens + tbase;
  for (int i = threadIdx.x; i < steps; i += BLOCK) {
    int v = -1;
    if (i < j)
      v = a.drafts[(size_t)row * k + i];
    else if (i == j)
      v = token;
    out[i] = v;
    if (traced) a.tres[tbase + i] = i == j ? token : -1;
  }
}

size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

}  // namespace

int launch_spec_verify(const void *target, int rows, int k, int vocab, uint64_t params, int flags,
                       const int *drafts, const void *qprobs, int trials, int *tokens, int *emitted,
                       int *accepted, int trace_trials, void *trace) {
  if (rows < 0 || k < 0 || vocab < 1 || trials < 1 || trace_trials < 0 || trace_trials > trials)
    return set_error(SV_ERR_INVALID, "spec_verify: bad shape (%d rows, k %d, %d tokens, %d trials)", rows, k,
                     vocab, trials);
  if (vocab > kMaxExactVocab)
    return set_error(SV_ERR_UNSUPPORTED, "spec_verify: vocabulary %d over %d", vocab, kMaxExactVocab);
  if (rows == 0) return SV_OK;
  const size_t slots = (size_t)rows * (k + 1);
  if (slots > 0x7fffffff || (size_t)rows * trials > 0x7fffffff)
    return set_error(SV_ERR_UNSUPPORTED, "spec_verify: too many rows, positions or trials");
  const int tdtype = (flags >> SV_SPEC_TARGET_SHIFT) & 15;
  const int qdtype = (flags >> SV_SPEC_DRAFT_SHIFT) & 15;
  const bool filtered = flags & SV_HAS_FILTERS;
  if (filtered && slots > 65535) return set_error(SV_ERR_UNSUPPORTED, "spec_verify: over 65535 positions");
  const size_t sbytes = align256(sizeof(PosStat) * slots);
  const size_t wbytes = filtered ? align256(sizeof(float) * slots * wstride(vocab)) : 0;
  const size_t lbytes = filtered ? align256(sizeof(int) * slots * kFastList) : 0;
  int chunks = 1, chunk = vocab;
  if (filtered) fast_layout((int)slots, vocab, chunks, chunk);
  void *ws = nullptr;
  int st = workspace(sbytes + wbytes + 2 * lbytes + (filtered ? fast_bytes((int)slots, chunks) : 0), &ws);
  if (st != SV_OK) return st;
  char *base = static_cast<char *>(ws);
  PosStat *stats = reinterpret_cast<PosStat *>(base);
  float *wbuf = filtered ? reinterpret_cast<float *>(base + sbytes) : nullptr;
  SpecLists lists{nullptr, nullptr};
  if (filtered) {
    lists.idx = reinterpret_cast<int *>(base + sbytes + wbytes);
    lists.p = reinterpret_cast<float *>(base + sbytes + wbytes + lbytes);
  }
  const RowParams rp = row_params(params, rows);
  FastArgs fa{};
  if (filtered) {
    st = fast_args(base + sbytes + wbytes + 2 * lbytes, (int)slots, vocab, rp, flags, nullptr, fa);
    if (st != SV_OK) return st;
  }
  ChainArgs a;
  a.rows = rows;
  a.k = k;
  a.vocab = vocab;
  a.rp = rp;
  a.drafts = drafts;
  a.qprobs = qprobs;
  a.qdtype = qdtype;
  a.stats = stats;
  a.wbuf = wbuf;
  a.lists = lists;
  a.tokens = tokens;
  a.emitted = emitted;
  a.accepted = accepted;
  a.trace_trials = trace_trials;
  const size_t tn = (size_t)trace_trials * rows * (k + 1);
  char *tr = static_cast<char *>(trace);
  a.tu = trace ? reinterpret_cast<float *>(tr) : nullptr;
  a.tp = trace ? reinterpret_cast<float *>(tr + 4 * tn) : nullptr;
  a.tq = trace ? reinterpret_cast<float *>(tr + 8 * tn) : nullptr;
  a.tacc = trace ? reinterpret_cast<int *>(tr + 12 * tn) : nullptr;
  a.tres = trace ? reinterpret_cast<int *>(tr + 16 * tn) : nullptr;
  if (!trace) a.trace_trials = 0;
  SV_DISPATCH_DTYPE(tdtype, T, {
    if (filtered) {
      st = fast_launch(spec_fast_kernel<T>, dim3(fa.chunks, (unsigned)slots), "spec_verify (top-k fast path)",
                       static_cast<const T *>(target), fa, k, drafts, stats, lists);
      if (st != SV_OK) return st;
      auto prep = spec_prepare_kernel<T, kRowBlock, true>;
      prep<<<flagged_grid((const void *)prep, kRowBlock, (int)slots), kRowBlock, 0, stream()>>>(
          static_cast<const T *>(target), k, vocab, (int)slots, rp, flags, drafts, wbuf, stats, fa.todo);
      st = check_launch("spec_verify prepare");
      if (st != SV_OK) return st;
      spec_chain_kernel<T, kRowBlock, true><<<(unsigned)((size_t)rows * trials), kRowBlock, 0, stream()>>>(
          static_cast<const T *>(target), a);
    } else {
      spec_prepare_kernel<T, kLeanBlock, false><<<(unsigned)slots, kLeanBlock, 0, stream()>>>(
          static_cast<const T *>(target), k, vocab, (int)slots, rp, flags, drafts, wbuf, stats, nullptr);
      st = check_launch("spec_verify prepare");
      if (st != SV_OK) return st;
      spec_chain_kernel<T, kLeanBlock, false><<<(unsigned)((size_t)rows * trials), kLeanBlock, 0, stream()>>>(
          static_cast<const T *>(target), a);
    }
  });
  return check_launch("spec_verify chain");
}

}  // namespace sv

extern "C" int sv_spec_verify(uint64_t target, int rows, int k, int vocab, uint64_t params, int flags,
                              uint64_t draft_tokens, uint64_t draft_probs, int trials, uint64_t tokens,
                              uint64_t emitted, uint64_t accepted, int trace_trials, uint64_t trace) {
  if (!params) return sv::set_error(SV_ERR_INVALID, "spec_verify: no parameters");
  if (k > 0 && !draft_tokens) return sv::set_error(SV_ERR_INVALID, "spec_verify: no draft tokens");
  return sv::launch_spec_verify(reinterpret_cast<const void *>(target), rows, k, vocab, params, flags,
                                reinterpret_cast<const int *>(draft_tokens),
                                reinterpret_cast<const void *>(draft_probs), trials,
                                reinterpret_cast<int *>(tokens), reinterpret_cast<int *>(emitted),
                                reinterpret_cast<int *>(accepted), trace_trials,
                                reinterpret_cast<void *>(trace));
}
