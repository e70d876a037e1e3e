// spec_verify.cuh: spec_verify's kernels: chain speculative sampling,
// many trials per launch, with a per-step trace; the same tokens, counters
// and trace as engine/cpu's SpecChain for the same seed and offset.
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
// Unfiltered launches without draft distributions and with few trials run
// both in one kernel (spec_lean_fused_kernel): a row's last prepare block
// runs the row's chains.
// Unfiltered launches with few positions prepare them with a cluster of
// blocks per position instead (spec_split_kernel), and the chain draws from
// one span of the row (draw_split).
// Trials are independent draws of the row's stream (draw index = trial).
// Positions whose filters are decided inside their top-k set take the
// top-k fast path (fastrow.cuh), which leaves the kept tokens and their
// probabilities in a list per position, so the chain draws the residual
// from the list, not the row. Unfiltered bf16 rows take their exact
// weights from a table of patterns (ptable.cuh), and the lean prepare
// reads such a row the second time (for the Sum) through a staging tile
// a warp, in 512-byte runs (staged_sum).
//
// The kernels are compiled in csrc/instances/ (spec_fast_*.cu,
// spec_full_*.cu), so that the build runs them side by side;
// spec_verify.cu, the launcher, takes them by pointer.
#pragma once

#include "cluster.cuh"
#include "fastrow.cuh"
#include "ptable.cuh"

namespace sv {

constexpr int kSpecBlock = 512;  // prepare and chain, with filters or lean

// PosStat is what the prepare leaves the chain about one (row, position).
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

// SplitTotals is what spec_split_kernel leaves for the chain: per slot and
// span of consecutive tokens, the fixed-point totals of the residual weights
// weight(max(p - q, 0)) and of the target weights weight(p), so that the
// chain draws from one span instead of the whole row.
struct SplitTotals {
  const unsigned long long *tot;  // [slots][2][spans]: residual, then target
  int spans, span;
};

// ChainArgs are the chain kernel's arguments.
struct ChainArgs {
  int rows, k, vocab;
  RowParams rp;
  const int *drafts;
  const void *qprobs;  // [rows, k, vocab] or null (one-hot)
  int qdtype;
  const PosStat *stats;
  const float *wbuf;
  SpecLists lists;
  SplitTotals split;  // tot null: no split totals
  bool wide_table;    // the chain has kWideTableBytes of dynamic shared memory
  int *tokens;    // [trials, rows, k+1]
  int *emitted;   // [trials, rows]
  int *accepted;  // [trials, rows]
  int trace_trials;
  float *tu, *tp, *tq;
  int *tacc, *tres;
};

// kWideTableBytes is the lean chain's dynamic shared memory for bf16 rows
// under one-hot drafts: its table of fixed-point weights (without it, where
// the device refuses, the chain draws from its table of p).
constexpr size_t kWideTableBytes = sizeof(unsigned long long) * kTableEntries;

// kSplitBlock is spec_split_kernel's block; kSplitMaxChunk bounds its chunk
// (the chunk's weights live in shared memory).
constexpr int kSplitBlock = 512;
static_assert(kMaxCluster * (kSplitBlock / 32) <= kSpecBlock, "draw_split scans one span per chain thread");
constexpr int kSplitMaxChunk = 16384;

// The kernels' types for target logits of T, and one dtype's kernels: the
// fast kernels (plain, and a position's chunks one cluster), and the
// prepare and chain kernels with filters and lean, and the split prepare.
template <typename T>
using SpecFastKernel = void (*)(const T *__restrict__, FastArgs, int, const int *__restrict__, PosStat *__restrict__,
                                SpecLists);
template <typename T>
using SpecPrepareKernel = void (*)(const T *__restrict__, int, int, int, RowParams, int, const int *__restrict__,
                                   float *__restrict__, PosStat *__restrict__, const int *__restrict__);
template <typename T>
using SpecSplitKernel = void (*)(const T *__restrict__, int, int, int, RowParams, const int *__restrict__,
                                 const void *, int, PosStat *__restrict__, unsigned long long *__restrict__);
template <typename T>
using SpecChainKernel = void (*)(const T *__restrict__, ChainArgs);
template <typename T>
struct SpecFastKernels {
  SpecFastKernel<T> plain, cluster;
};
template <typename T>
struct SpecFullKernels {
  SpecPrepareKernel<T> prepare_filtered, prepare_lean;
  SpecSplitKernel<T> split;
  SpecChainKernel<T> chain_filtered, chain_lean;
};

// One dtype's kernels, each family defined in its own translation unit
// (csrc/instances/).
SpecFastKernels<float> spec_fast_kernels(const float *);
SpecFastKernels<__half> spec_fast_kernels(const __half *);
SpecFastKernels<__nv_bfloat16> spec_fast_kernels(const __nv_bfloat16 *);
SpecFullKernels<float> spec_full_kernels(const float *);
SpecFullKernels<__half> spec_full_kernels(const __half *);
SpecFullKernels<__nv_bfloat16> spec_full_kernels(const __nv_bfloat16 *);

// kFusedTrials is the most trials a launch may run in spec_lean_fused_kernel
// (a row's last block runs them one after another); more take the chain
// kernel, one block a chain.
constexpr int kFusedTrials = 2;

// SpecFusedKernel is spec_lean_fused_kernel's type, and spec_fused_kernel a
// dtype's instance (csrc/instances/spec_full_*.cu), apart from
// SpecFullKernels so that units built before it still link with it.
template <typename T>
using SpecFusedKernel = void (*)(const T *__restrict__, int, int, RowParams, int, const int *__restrict__, PosStat *,
                                 unsigned *, ChainArgs, int);
SpecFusedKernel<float> spec_fused_kernel(const float *);
SpecFusedKernel<__half> spec_fused_kernel(const __half *);
SpecFusedKernel<__nv_bfloat16> spec_fused_kernel(const __nv_bfloat16 *);

namespace {


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

// kStageChunks is how many of the Sum's 256-token chunks a warp of the
// lean prepare reads at once into its staging tile (staged_sum); a chunk
// takes 128 words of the tile and 4 of padding, so that the 32 lanes'
// reads of a step (8 chunks, 4 lanes a chunk) fall in 32 distinct banks.
constexpr int kStageChunks = 8;
constexpr int kStageStride = 128 + 4;
constexpr int kStageWords = kStageChunks * kStageStride;
// kStageBytes is the lean prepare's dynamic shared memory: one staging
// tile per warp. Launched without it, the prepare sums as tree_sum does.
constexpr size_t kStageBytes = sizeof(unsigned) * kStageWords * (kSpecBlock / 32);

// dynamic_smem_bytes is the dynamic shared memory this launch was given.
__device__ __forceinline__ unsigned dynamic_smem_bytes() {
  unsigned r;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}

// copy16_async copies 16 bytes from global to shared memory without a
// register on the way (cp.async, L1 bypassed); copy_async_wait waits for
// this thread's copies.
__device__ __forceinline__ void copy16_async(void *dst, const void *src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void copy_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// staged_sum is tree_sum over the weights of a bf16 row x (16-byte
// aligned) from tab (fill_table with weight_of), the same bits, with the
// row's second read coalesced: a warp copies kStageChunks whole chunks at a
// time, a 512-byte run per copy, into its tile in shared memory, then 4
// lanes a chunk add its 8 lane sums, lane r of a chunk the pairs of
// elements (8j + 2r, 8j + 2r + 1) in order j, two patterns a lookup
// (PatternTable::pair), and two shuffles combine them as
// ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)). tree_sum's one chunk a thread reads
// 16 bytes at 512-byte strides, which the L1 does not hold for a block's
// whole row. The warps walk the row from its end, where the first pass
// (row_stat) ended, so the second read starts on what the L2 still holds.
// A partial last chunk is one thread's, as in tree_sum.
template <int BLOCK>
__device__ float staged_sum(const __nv_bfloat16 *x, int n, float m, float t, const PatternTable<float> &tab,
                            unsigned *stage, RowShared<BLOCK> &sh) {
  constexpr int kWarps = BLOCK / 32;
  const int chunks = (n + 255) / 256, full = n / 256;
  int depth = 0;
  while ((1 << depth) < chunks) depth++;
  const int leaves = 1 << depth;
  for (int j = threadIdx.x; j < leaves; j += BLOCK) sh.tree[leaves + j] = 0.0f;
  __syncthreads();
  auto exact = [&](float v) { return weight_of(v, m, t); };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int mine = lane / 4, r = lane % 4;  // this lane's chunk of the tile, and its pairs
  unsigned *tile = stage + warp * kStageWords;
  const uint4 *v = reinterpret_cast<const uint4 *>(x);
  const unsigned koff = tab.pair_offset();
  const int groups = (full + kStageChunks - 1) / kStageChunks;
  for (int g = groups - 1 - warp; g >= 0; g -= kWarps) {
    const int c0 = g * kStageChunks;
    __syncwarp();  // the last group's reads of the tile are done
#pragma unroll
    for (int i = 0; i < kStageChunks; i++)
      if (c0 + i < full) copy16_async(tile + i * kStageStride + 4 * lane, v + (size_t)(c0 + i) * 32 + lane);
    copy_async_wait();
    __syncwarp();
    const int c = c0 + mine;
    float s = 0.0f;
    if (c < full) {
      const unsigned *w = tile + mine * kStageStride + r;
      float a0 = 0.0f, a1 = 0.0f;
#pragma unroll 8
      for (int j = 0; j < 32; j++) {
        const unsigned word = w[4 * j];
        float e0, e1;
        unsigned miss = 0;
        tab.pair(word, koff, e0, e1, miss);
        if (PatternTable<float>::missed(miss)) {  // rare: tiny or huge magnitudes, -Inf
          e0 = tab.value(word & 0xffffu, exact);
          e1 = tab.value(word >> 16, exact);
        }
        a0 = __fadd_rn(a0, e0);
        a1 = __fadd_rn(a1, e1);
      }
      s = __fadd_rn(a0, a1);
    }
    // A chunk's 4 lanes are all in or all out of the row.
    s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, 1));
    s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, 2));
    if (c < full && r == 0) sh.tree[leaves + tree_leaf(c, chunks, depth)] = s;
  }
  if (full < chunks && threadIdx.x == BLOCK - 1) {
    float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const XSource<__nv_bfloat16, TableWeight> src{x, m, t, TableWeight{tab}};
    src.chunk_sum8(full * 256, n - full * 256, nullptr, a);
    sh.tree[leaves + tree_leaf(full, chunks, depth)] =
        __fadd_rn(__fadd_rn(__fadd_rn(a[0], a[1]), __fadd_rn(a[2], a[3])),
                  __fadd_rn(__fadd_rn(a[4], a[5]), __fadd_rn(a[6], a[7])));
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

// unfiltered_sum is the exact normaliser of a row without filters: for
// bf16 rows from a table of the weights (ptable.cuh), read through the
// staging tiles where the launch gave them (STAGED: the lean prepare;
// staged_sum), else from the logits.
template <typename T, int BLOCK, bool STAGED>
__device__ float unfiltered_sum(const T *x, int n, float m, float t, RowShared<BLOCK> &sh) {
  if constexpr (tabled<T>()) {
    extern __shared__ __align__(16) unsigned stage[];  // kStageBytes, or none
    const PatternTable<float> tab{table_room(sh), table_window(m, t)};
    fill_table<BLOCK>(tab, [&](float v) { return weight_of(v, m, t); });
    const bool aligned = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
    if (STAGED && BLOCK == kSpecBlock && aligned && dynamic_smem_bytes() >= kStageBytes)
      return staged_sum<BLOCK>(x, n, m, t, tab, stage, sh);
    return tree_sum<BLOCK>(XSource<T, TableWeight>{x, m, t, TableWeight{tab}}, n, nullptr, sh);
  } else {
    return tree_sum<BLOCK>(XSource<T>{x, m, t}, n, nullptr, sh);
  }
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
      ps.s = unfiltered_sum<T, BLOCK, !FILTERS>(x, vocab, st.m, ps.temp, sh);
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
  pdl_wait();     // launched behind spec_fast_kernel (with todo): its flags first
  pdl_trigger();  // the chain may launch now; it waits for this kernel
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
// (fast_kept.cuh sparse_sum), writes their probabilities to the slot's list
// and p_i(x_i). Positions it cannot serve are flagged in a.todo for
// spec_prepare_kernel. With CLUSTER a position's chunks are one cluster
// (fast_row.cuh fast_cluster_row).
template <typename T, bool CLUSTER>
__global__ void __launch_bounds__(kFastBlock, 4)
    spec_fast_kernel(const T *__restrict__ target, FastArgs a, int k, const int *__restrict__ drafts,
                     PosStat *__restrict__ stats, SpecLists lists) {
  if constexpr (CLUSTER && !kSm90Pass) {
    return;  // sm_80 pass: an sm_80 binary never runs clusters
  } else {
    pdl_trigger();  // spec_prepare_kernel may launch now; it waits for this kernel
    FastSmem &s = fast_smem();
    const int slot = blockIdx.y, n = a.vocab;
    const int row = slot / (k + 1), pos = slot % (k + 1);
    FastTop top;
    if (fast_row<T, CLUSTER>(target + (size_t)slot * n, a, slot, fast_params(a.rp, row), nullptr, s, top) !=
        kFastServed)
      return;
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
}


// spec_split_kernel (sm_90) prepares unfiltered positions when they are too
// few to fill the GPU one block each (the B=1 case): one cluster of C blocks
// per slot (blockIdx.x / C), block rank r owning tokens [r * chunk, (r + 1)
// * chunk), chunk a multiple of the Sum's 256-token leaves. The blocks
// exchange their (max, first maximum) over DSMEM; each computes the exact
// weights of its chunk into shared memory and the Sum's leaves of its
// chunk (one thread per leaf lane: lane l adds elements l, l+8, ... in
// order, as engine/cpu's chunkSum), which it stores into every block's
// tree; every block then folds the same tree, so all hold the same S. Each
// block then sums, in fixed point, the residual and target weights of its
// chunk for the chain (SplitTotals). PosStat is rank 0's.
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 1)
    spec_split_kernel(const T *__restrict__ target, int k, int vocab, int chunk, RowParams rp,
                      const int *__restrict__ drafts, const void *qprobs, int qdtype, PosStat *__restrict__ stats,
                      unsigned long long *__restrict__ totals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ typename Reduce<BLOCK>::Shared red;
  __shared__ __align__(8) ArgBest peer_best[kMaxCluster];
  extern __shared__ __align__(16) float dyn[];
  pdl_trigger();  // the chain may launch now; it waits for this kernel
  const int csize = cluster_blocks();
  const int rank = cluster_rank();
  cluster_arrive();
  const int slot = blockIdx.x / csize;
  const int row = slot / (k + 1), pos = slot % (k + 1);
  const T *x = target + (size_t)slot * vocab;
  const int begin = rank * chunk, end = min(vocab, begin + chunk);
  const int leaves_n = (vocab + 255) / 256;
  int depth = 0;
  while ((1 << depth) < leaves_n) depth++;
  const int L = 1 << depth;
  float *w = dyn;               // the chunk's weights: w[i - begin]
  float *tree = dyn + chunk;    // 2L: the Sum's complete tree, leaves at [L, 2L)
  for (int j = threadIdx.x; j < L; j += BLOCK) tree[L + j] = 0.0f;
  ArgBest best{-kInf, 0x7fffffff};
  int nan = 0;
  scan_max<T, BLOCK, 4>(x, begin, end, best, nan);
  if (nan) best = ArgBest{kInf, -1};  // NaN beats every key: the row is invalid
  best = Reduce<BLOCK>::argbest(red, best);
  cluster_wait();  // every block has started, and zeroed its tree
  if ((int)threadIdx.x < csize) store_peer(&peer_best[rank], threadIdx.x, pack(best));
  cluster_sync();
  best = peer_best[0];
  for (int r = 1; r < csize; r++)
    if (better(peer_best[r].v, peer_best[r].i, best)) best = peer_best[r];
  const bool valid = best.i >= 0 && best.v > -kInf && best.v != kInf;
  const float m = best.v, temp = rp.temperature[row];
  const bool onehot = valid && temp == 0.0f;
  const bool weights = valid && !onehot;
  // The chunk's weights, then the Sum's leaves of this chunk from them:
  // thread (leaf, lane) adds the lane's 32 elements in order; the 8 lanes of
  // a leaf are 8 consecutive threads, and the shuffles add them as
  // ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)).
  if (weights) {
    for_each_vec<T, BLOCK, 4>(x, begin, end, [&](int i, float v) { w[i - begin] = weight_of(v, m, temp); });
    __syncthreads();
    const int c0 = begin / 256, c1 = (end + 255) / 256;
    for (int t0 = 0; t0 < (c1 - c0) * 8; t0 += BLOCK) {
      const int t = t0 + (int)threadIdx.x;
      const int leaf = c0 + t / 8, lane = t % 8;
      float a = 0.0f;
      if (leaf < c1) {
        const int base = leaf * 256 + lane;
        const int top = min(32, (end - base + 7) / 8);  // elements of this lane
        for (int e = 0; e < top; e++) a = __fadd_rn(a, w[base + 8 * e - begin]);
      }
      a = __fadd_rn(a, __shfl_xor_sync(0xffffffffu, a, 1));
      a = __fadd_rn(a, __shfl_xor_sync(0xffffffffu, a, 2));
      a = __fadd_rn(a, __shfl_xor_sync(0xffffffffu, a, 4));
      if (leaf < c1 && lane == 0) {
        float *dst = &tree[L + tree_leaf(leaf, leaves_n, depth)];
        for (int r = 0; r < csize; r++) store_peer_f32(dst, r, a);
      }
    }
  }
  // After this barrier nothing touches another block's shared memory.
  cluster_sync();
  float s = 1.0f;
  if (weights) {
    for (int len = L >> 1; len >= 1; len >>= 1) {
      for (int j = len + threadIdx.x; j < 2 * len; j += BLOCK) tree[j] = __fadd_rn(tree[2 * j], tree[2 * j + 1]);
      __syncthreads();
    }
    s = tree[1];
  }
  const int xd = pos < k ? drafts[(size_t)row * k + pos] : -1;
  if (rank == 0 && threadIdx.x == 0) {
    PosStat ps;
    ps.m = m;
    ps.s = s;
    ps.temp = temp;
    ps.arg = best.i;
    ps.valid = valid;
    ps.onehot = onehot;
    ps.filtered = 0;
    ps.px = nan_f32();
    if (valid && pos < k)
      ps.px = onehot ? (xd == best.i ? 1.0f : 0.0f) : __fdiv_rn(weight_of(load_f32(x, xd), m, temp), s);
    ps.list = -1;
    ps.f = Filter{false, false, 0.0f, 0x7fffffff, 0.0f, 0.0f};
    stats[slot] = ps;
  }
  if (!valid) return;
  // The chain's totals over this chunk, one pair per warp span of sub =
  // chunk / warps tokens: residual weight(p - q) (positions before the
  // bonus) and target weight(p), exactly the chain's values.
  constexpr int kWarps = BLOCK / 32;
  const int sub = chunk / kWarps, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t qbase = ((size_t)row * k + pos) * vocab;
  const int lo = begin + warp * sub, hi = min(end, lo + sub);
  unsigned long long res = 0, tgt = 0;
  for (int i = lo + lane; i < hi; i += 32) {
    const float p = onehot ? (i == best.i ? 1.0f : 0.0f) : __fdiv_rn(w[i - begin], s);
    tgt += weight(p);
    if (pos < k) {
      const float q = qprobs ? load_any(qprobs, qdtype, qbase + i) : (i == xd ? 1.0f : 0.0f);
      res += weight(__fsub_rn(p, q));
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    res += __shfl_xor_sync(0xffffffffu, res, off);
    tgt += __shfl_xor_sync(0xffffffffu, tgt, off);
  }
  if (lane == 0) {
    const int spans = csize * kWarps;
    unsigned long long *t = totals + (size_t)slot * 2 * spans;
    t[rank * kWarps + warp] = res;
    t[spans + rank * kWarps + warp] = tgt;
  }
#endif
}


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

// draw_split is draw_stop over the span totals spec_split_kernel left for
// slot: the same token (the first whose inclusive prefix of weights
// exceeds the target), found by a block scan of the span totals and a
// search of the one span that holds the target.
template <int BLOCK, typename Residual, typename Target>
__device__ int draw_split(const SplitTotals &sp, int slot, int n, bool residual_first, uint64_t u, Residual residual,
                          Target target, RowShared<BLOCK> &sh) {
  const unsigned long long *tot = sp.tot + (size_t)slot * 2 * sp.spans;
  unsigned long long rmine = 0, tmine = 0;  // spans t, t + BLOCK, ... (at most kMaxCluster * BLOCK / 32)
  for (int r = threadIdx.x; r < sp.spans; r += BLOCK) {
    rmine += tot[r];
    tmine += tot[sp.spans + r];
  }
  const unsigned long long rtotal = Reduce<BLOCK>::sum(sh.red, rmine);
  const bool use_residual = residual_first && rtotal > 0;
  const unsigned long long total = use_residual ? rtotal : Reduce<BLOCK>::sum(sh.red, tmine);
  if (total == 0) return -1;
  const unsigned long long t = pick(u, total);
  const unsigned long long *ct = use_residual ? tot : tot + sp.spans;
  // spans <= BLOCK: one span per thread, one scan.
  unsigned long long rem;
  const int r = find_segment<BLOCK>(t, (int)threadIdx.x < sp.spans ? ct[threadIdx.x] : 0, rem, sh);
  if (r < 0) return -1;
  const int lo = r * sp.span, hi = min(n, lo + sp.span);
  return use_residual ? scan_find<BLOCK, 4>(lo, hi, rem, residual, sh) : scan_find<BLOCK, 4>(lo, hi, rem, target, sh);
}

// ChainShared is a chain's shared memory besides RowShared: the stop, the
// draw's uniform at it, and (k < 32) every position's statistics, so that
// the stop's are on chip when it is known.
struct ChainShared {
  int stop;
  uint64_t u;
  PosStat stat[32];
};

// load_stat loads one position's statistics through the L2 (ld.global.cg),
// never a stale L1 line: in spec_lean_fused_kernel other blocks of the
// same launch wrote them.
__device__ __forceinline__ PosStat load_stat(const PosStat *p) {
  static_assert(sizeof(PosStat) % 4 == 0, "PosStat is whole words");
  PosStat ps;
  unsigned *d = reinterpret_cast<unsigned *>(&ps);
  const unsigned *s = reinterpret_cast<const unsigned *>(p);
#pragma unroll
  for (int i = 0; i < (int)(sizeof(PosStat) / 4); i++) d[i] = __ldcg(s + i);
  return ps;
}

// chain_trial is one chain, trial trial of row row: the acceptance tests,
// then the draw at the stop (see spec_chain_kernel). The whole block calls
// it; it reads the statistics the prepare left and the target rows, and
// writes the tokens, counters and trace of this (trial, row) only.
template <typename T, int BLOCK, bool FILTERS>
__device__ void chain_trial(const T *__restrict__ target, const ChainArgs &a, int row, int trial, RowShared<BLOCK> &sh,
                            ChainShared &cs) {
  extern __shared__ __align__(16) unsigned long long wtab[];  // a.wide_table: kWideTableBytes
  int &stop_sh = cs.stop;
  uint64_t &u_sh = cs.u;
  PosStat *stat_sh = cs.stat;
  const int k = a.k, n = a.vocab, steps = k + 1;
  const Stream rng(a.rp.seed[row], a.rp.offset[row], row, trial);
  const size_t tbase = ((size_t)trial * a.rows + row) * steps;
  const bool traced = trial < a.trace_trials;
  // The acceptance tests (u * q < p, every position counted), one lane per
  // position in warp 0, so that their loads are in flight together.
  if (threadIdx.x < 32) {
    const int lane = (int)threadIdx.x;
    int stop = -1, acc = 0;
    // The draw's uniform at every possible stop, computed beside the
    // tests instead of after them (k < 32: one lane per position).
    const uint64_t du = k < 32 && lane <= k ? rng.u64(2 * (uint64_t)lane + 1) : 0;
    // Likewise every position's statistics (k < 32), loaded beside the
    // tests, so that the draw does not wait for one more load.
    PosStat mine = {};
    if (k < 32 && lane <= k) mine = load_stat(a.stats + (size_t)row * steps + lane);
    for (int i0 = 0; i0 < k; i0 += 32) {
      const int i = i0 + lane;
      bool ok = false;
      if (i < k) {
        const int xd = a.drafts[(size_t)row * k + i];
        const float u = u01(rng.block(2 * (uint64_t)i).x);
        const float p = k < 32 ? mine.px : load_stat(a.stats + (size_t)row * steps + i).px;
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
    if (stop < 0) stop = k;
    const uint64_t du_stop = __shfl_sync(0xffffffffu, du, k < 32 ? stop : 0);
    if (k < 32 && lane <= k) stat_sh[lane] = mine;
    if (lane == 0) {
      if (traced) {
        a.tu[tbase + k] = 0.0f;
        a.tp[tbase + k] = 0.0f;
        a.tq[tbase + k] = 0.0f;
        a.tacc[tbase + k] = 0;
      }
      stop_sh = stop;
      u_sh = k < 32 ? du_stop : rng.u64(2 * (uint64_t)stop + 1);
      a.emitted[(size_t)trial * a.rows + row] = stop;
      a.accepted[(size_t)trial * a.rows + row] = acc;
    }
  }
  __syncthreads();
  const int j = stop_sh;
  const PosStat ps = k < 32 ? stat_sh[j] : load_stat(a.stats + (size_t)row * steps + j);
  int token = -1;
  if (ps.valid) {
    const T *x = target + ((size_t)row * steps + j) * n;
    const float *wrow = FILTERS && ps.filtered && a.wbuf ? a.wbuf + ((size_t)row * steps + j) * wstride(n) : nullptr;
    const int xd = j < k ? a.drafts[(size_t)row * k + j] : -1;
    const size_t qbase = ((size_t)row * k + j) * n;
    auto q_of = [&](int v) -> float {
      return a.qprobs ? load_any(a.qprobs, a.qdtype, qbase + v) : (v == xd ? 1.0f : 0.0f);
    };
    const uint64_t u = u_sh;
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
    } else if (tabled<T>() && !a.split.tot && !ps.onehot && !(FILTERS && ps.filtered)) {
      // A whole unfiltered bf16 row: p = w / S from a table (ptable.cuh).
      const __nv_bfloat16 *xb = reinterpret_cast<const __nv_bfloat16 *>(x);
      auto p_of = [&](float v) { return __fdiv_rn(weight_of(v, ps.m, ps.temp), ps.s); };
      if (!FILTERS && !a.qprobs && a.wide_table) {
        // One-hot drafts: the residual weight(p - q) is weight(p) off the
        // draft token and 0 at it (p <= 1), so one table of fixed-point
        // weights gives both, and a segment's residual total is its target
        // total less the draft token's weight.
        auto w_of = [&](float v) { return weight(p_of(v)); };
        const PatternTable<unsigned long long> tab{wtab, table_window(ps.m, ps.temp)};
        fill_table<BLOCK>(tab, w_of);
        auto sums = [&](int lo, int hi) -> DrawWeights {
          const unsigned long long t = table_sum(tab, xb, lo, hi, w_of);
          if (j >= k) return DrawWeights{0ull, t};
          const bool own = xd >= lo && xd < hi;
          return DrawWeights{t - (own ? tab.value(__bfloat16_as_ushort(xb[xd]), w_of) : 0ull), t};
        };
        auto both = [&](int v, unsigned b) -> DrawWeights {
          const unsigned long long w = tab.value(b, w_of);
          return DrawWeights{j < k && v != xd ? w : 0ull, w};
        };
        token = draw_bits<BLOCK>(xb, n, j < k, u, sums, both, sh);
      } else {
        const PatternTable<float> tab{table_room(sh), table_window(ps.m, ps.temp)};
        fill_table<BLOCK>(tab, p_of);
        auto both = [&](int v, unsigned b) -> DrawWeights {
          const float p = tab.value(b, p_of);
          return DrawWeights{j < k ? weight(__fsub_rn(p, q_of(v))) : 0ull, weight(p)};
        };
        token = draw_bits<BLOCK>(xb, n, j < k, u, both, sh);
      }
    } else {
      auto residual = [&](int v) -> unsigned long long {
        return weight(__fsub_rn(target_prob<T, FILTERS>(ps, x, wrow, v), q_of(v)));
      };
      auto target_weight = [&](int v) -> unsigned long long { return weight(target_prob<T, FILTERS>(ps, x, wrow, v)); };
      if (a.split.tot)
        token = draw_split<BLOCK>(a.split, row * steps + j, n, j < k, u, residual, target_weight, sh);
      else
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

// spec_chain_kernel runs one chain a block, block (trial, row), behind the
// prepare kernel (chain_trial).
template <typename T, int BLOCK, bool FILTERS>
__global__ void __launch_bounds__(BLOCK, 1) spec_chain_kernel(const T *__restrict__ target, ChainArgs a) {
  __shared__ RowShared<BLOCK> sh;
  __shared__ ChainShared cs;
  pdl_wait();  // launched behind the prepare kernel: its statistics first
  chain_trial<T, BLOCK, FILTERS>(target, a, blockIdx.x % a.rows, blockIdx.x / a.rows, sh, cs);
}

// row_chains runs row's chains, trials 0 to trials - 1 in turn, in a call
// of its own, so that their registers do not crowd the prepare's (the
// fused kernel runs two blocks an SM, as the lean prepare).
template <typename T, int BLOCK>
__device__ __noinline__ void row_chains(const T *__restrict__ target, const ChainArgs &a, int row, int trials,
                                        RowShared<BLOCK> &sh, ChainShared &cs) {
  for (int trial = 0; trial < trials; trial++) {
    chain_trial<T, BLOCK, false>(target, a, row, trial, sh, cs);
    __syncthreads();  // sh and cs serve the next trial
  }
}

// spec_lean_fused_kernel is the lean prepare (spec_prepare_kernel without
// filters, one block a slot) and the chains in one launch, for launches
// without draft distributions and with at most kFusedTrials trials: each
// block prepares its slot, then counts itself in on its row's counter
// (arrived, zeroed, left zeroed), and the row's last block runs the row's
// chains, every trial in turn (chain_trial). So the chains of rows whose
// positions are done run beside the prepares of later rows, instead of
// all after the last prepare, and the stop's target row is read again
// while the L2 still holds it. The counter is released after the slot's
// statistics and acquired before the chain reads the row's (fences, as
// fast_row's last block). It never reads q: draft distributions keep the
// two kernels.
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2)
    spec_lean_fused_kernel(const T *__restrict__ target, int k, int vocab, RowParams rp, int flags,
                           const int *__restrict__ drafts, PosStat *stats, unsigned *arrived, ChainArgs a,
                           int trials) {
  __shared__ RowShared<BLOCK> sh;
  __shared__ ChainShared cs;
  __shared__ int last_sh;
  const int slot = blockIdx.x, row = slot / (k + 1);
  prepare_slot<T, BLOCK, false>(target, k, vocab, rp, flags, drafts, nullptr, stats, slot, sh);
  if (threadIdx.x == 0) {  // the thread that wrote stats[slot]
    __threadfence();
    const bool last = atomicAdd(&arrived[row], 1u) == (unsigned)k;
    if (last) arrived[row] = 0;
    last_sh = last;
  }
  __syncthreads();
  if (!last_sh) return;
  __threadfence();
  row_chains<T, BLOCK>(target, a, row, trials, sh, cs);
}


// spec_fast_instances and spec_full_instances take the addresses of a
// dtype's kernels, which compiles them in the translation unit that calls
// them (one of csrc/instances/).
template <typename T>
SpecFastKernels<T> spec_fast_instances() {
  return {spec_fast_kernel<T, false>, spec_fast_kernel<T, true>};
}
template <typename T>
SpecFullKernels<T> spec_full_instances() {
  return {spec_prepare_kernel<T, kSpecBlock, true>, spec_prepare_kernel<T, kSpecBlock, false>,
          spec_split_kernel<T, kSplitBlock>, spec_chain_kernel<T, kSpecBlock, true>,
          spec_chain_kernel<T, kSpecBlock, false>};
}
template <typename T>
SpecFusedKernel<T> spec_fused_instance() {
  return spec_lean_fused_kernel<T, kSpecBlock>;
}

}  // namespace
}  // namespace sv
