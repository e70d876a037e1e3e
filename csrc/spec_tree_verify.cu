// spec_tree_verify.cu: tree speculative sampling (docs/SEMANTICS.md
// "spec_tree_verify"): the same paths, tokens, counters and trace as
// engine/cpu's SpecTree for the same seed and offset.
//
// Three launches, no probability rows in memory:
//   - spec_verify's prepare (spec_verify.cuh), one block a node, the node's
//     first child's token standing for the position's draft: the node's
//     maximum, filters and exact normaliser, and p_u(x_1), the first
//     child's threshold. Nodes are positions: row r's node u is slot
//     r * nodes + u, and k = nodes - 1.
//   - tree_node_kernel, one block a node: every child's q(x), and for a
//     node of two or more children the later siblings' thresholds and the
//     cuts that turn R_1 into the residual the node draws from. What it
//     leaves per node is a few scalars (whether R_1 fell back to Weight(p),
//     the applied cuts in sibling order), from which the residual of any
//     token is recomputed: R_1(v) from p(v) and q(v), then each cut.
//   - tree_walk_kernel, one block per (trial, row): warp 0 walks the tree
//     (one lane per child of the current node, the first accepted by a
//     ballot), then the whole block draws the token at the stop node from
//     its residual by the fixed-point inverse CDF.
// Every node takes one block and the walk's tests are O(1) each, so the
// time is the prepare's pass over every node's row plus, per node of two
// or more children, one pass (one-hot drafts) or one per sibling (draft
// distributions), plus the stop node's draw.
//
// Unfiltered bf16 nodes (not greedy) take p and its fixed-point weight
// from a table of the row's patterns (ptable.cuh) in the node kernel and
// the draw, as spec_verify's chain does: the exact exp a token, not the
// bytes, bounded both passes. Under one-hot drafts R_1 is Weight(p) but 0
// at x_1 (p - 1 <= 0) and each cut zeroes one token, so the node's Z_1 is
// the table's sum over the row less Weight(p(x_1)), and the draw's
// segment totals are table sums less the weights of the zeroed tokens.
//
// Where the nodes are few (slots <= SMs), bf16, no filter and one-hot drafts, the prepare
// is tree_split_kernel, a cluster of blocks a node that reads the row once
// from DRAM and leaves, beside the statistics, the totals of R_1 and of
// Weight(p) per span of the row (as spec_split_kernel does for
// spec_verify, with tables of the row's patterns instead of an exact
// weight a token). The node kernel then takes Z_1 from the span totals (no
// pass over the row) and the walk draws from one span (draw_tree_split).
#include "spec_verify.cuh"

namespace sv {
namespace {

// 512 threads a node, three blocks an SM (the kernel's launch bounds: 40
// registers): the passes over draft distributions are bound by the warps
// an SM holds while they wait on their loads.
constexpr int kTreeNodeBlock = 512;
constexpr int kTreeWalkBlock = kSpecBlock;  // draw_stop over RowShared<kSpecBlock>
constexpr int kMaxTreeNodes = SV_MAX_TREE_NODES;
// The walk keeps the stop node's cuts in RowShared::hist_mass and, under
// one-hot drafts, the tokens they zero in RowShared::hist_count, which the
// draw (seg_total, find_segment, scan_find) never touches: the row kernels'
// static shared memory has no room for more arrays of them. Its tables
// take dynamic shared memory (TreeArgs::wide_table).
static_assert(256 * kHistCopies >= kMaxTreeNodes, "a node's cuts and its zeroed tokens fit the histograms");
// kMaxTreeWeightBytes bounds the weight buffer of filtered launches; past
// it the kernels recompute each weight from the logits (exact, slower).
constexpr size_t kMaxTreeWeightBytes = (size_t)4 << 30;

// TreeArgs are the node and walk kernels' arguments. Arrays of [rows,
// nodes] are indexed row * nodes + node; kids holds a row's children from
// row * nodes, kid_start[u] giving where node u's begin.
struct TreeArgs {
  int rows, nodes, vocab, width;
  RowParams rp;
  const int *tokens, *kid_start, *kid_count, *kids;
  const void *qprobs;  // [rows, nodes, vocab] or null (one-hot)
  int qdtype;
  const PosStat *stats;
  const float *wbuf;
  // The node kernel's results, per child node c: its threshold and q(x_c);
  // per node u: whether R_1 fell back to Weight(p) and how many cuts
  // applied; the cuts themselves in u's children's slots of kids.
  float *thr, *qx;
  int *fb, *ncut;
  unsigned long long *cuts;
  bool wide_table;  // the walk has kWideTableBytes of dynamic shared memory
  // tree_split_kernel's span totals (tot null: the lean or filtered
  // prepare ran): set only for one-hot drafts without filters.
  SplitTotals split;
  int *path, *out_tokens, *accepted;  // [trials, rows, width] twice, [trials, rows]
  int trace_trials;
  float *tu, *tp, *tq;
  int *tflags, *tdrawn;
};

template <typename T>
using TreeKernel = void (*)(const T *__restrict__, TreeArgs);

// residual_cut is engine/cpu's residualCut: the fixed-point share
// float64(z) * float64(q), truncated, that a draft probability q removes
// from a residual of total z; 0 for q <= 0 or NaN, z for q >= 1.
__device__ __forceinline__ unsigned long long residual_cut(unsigned long long z, float q) {
  if (!(q > 0.0f)) return 0ull;
  if (q >= 1.0f) return z;
  return __double2ull_rz(__dmul_rn(__ull2double_rn(z), (double)q));
}

// TreeResidual is a node's residual weight of one token after the cuts of
// its first ncut applied siblings: R_1(v) = Weight(float32(p(v) - q_1(v)))
// (Weight(p(v)) where R_1 fell back, fb), then in sibling order each cut:
// a draft distribution removes min(R, cut(Z, q(v))) with Z the total the
// cut was made at, a one-hot draft zeroes its token. q is u's draft
// probability of v (unused for one-hot drafts, whose q_1 is one-hot at x1).
struct TreeResidual {
  const unsigned long long *cuts;  // Z per cut (draft distributions) or the token (one-hot)
  int ncut, x1;
  bool full, fb;
  __device__ __forceinline__ unsigned long long operator()(int v, float p, float q) const {
    unsigned long long r = fb ? weight(p) : weight(__fsub_rn(p, full ? q : (v == x1 ? 1.0f : 0.0f)));
    for (int e = 0; e < ncut; e++) {
      if (full) {
        const unsigned long long c = residual_cut(cuts[e], q);
        r = c < r ? r - c : 0ull;
      } else if ((unsigned long long)v == cuts[e]) {
        r = 0ull;
      }
    }
    return r;
  }
};

// kTableLoads is how many 16-byte loads a thread of the table passes has in
// flight: they are issued together, before the lookups, whose miss branch
// otherwise keeps the compiler from batching them (one load a thread at a
// time). Two, not four: the node kernel runs at 40 registers (three blocks
// an SM), where four vectors and their eight weights spill.
constexpr int kTableLoads = 2;

// table_vector_sum is the sum of tab's values of the eight bf16 patterns of
// q: two patterns a lookup (PatternTable::pair), exact(v) for the tokens of
// a missed word.
template <typename F>
__device__ __forceinline__ unsigned long long table_vector_sum(const PatternTable<unsigned long long> &tab,
                                                               unsigned koff, uint4 q, F &&exact) {
  unsigned long long e[8];
  tab.vector(q, koff, exact, e);
  unsigned long long s = 0;
#pragma unroll
  for (int l = 0; l < 8; l++) s += e[l];
  return s;
}

// table_vectors_sum sums tab's values over the 16-byte vectors v[j] for j =
// j0, j0 + step, ... below nv, kTableLoads loads in flight.
template <typename F>
__device__ __forceinline__ unsigned long long table_vectors_sum(const PatternTable<unsigned long long> &tab,
                                                                const uint4 *v, int j0, int step, int nv,
                                                                F &&exact) {
  const unsigned koff = tab.pair_offset();
  unsigned long long s = 0;
  for (; j0 < nv; j0 += kTableLoads * step) {
    uint4 q[kTableLoads];
#pragma unroll
    for (int k = 0; k < kTableLoads; k++) {
      const int j = j0 + k * step;
      q[k] = j < nv ? __ldg(v + j) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int k = 0; k < kTableLoads; k++)
      if (j0 + k * step < nv) s += table_vector_sum(tab, koff, q[k], exact);
  }
  return s;
}

// table_row_sum returns this thread's part of the sum of tab's values of
// the n tokens of bf16 row x: the block takes 16-byte vectors in turn (a
// warp's loads coalesce), 2-byte loads before the first aligned vector and
// after the last. The caller reduces; the values are integers, so the
// order of the adds is free.
template <int BLOCK, typename F>
__device__ unsigned long long table_row_sum(const PatternTable<unsigned long long> &tab, const __nv_bfloat16 *x,
                                            int n, F &&exact) {
  const unsigned short *xs = reinterpret_cast<const unsigned short *>(x);
  const int head = min(n, (int)((16 - (reinterpret_cast<uintptr_t>(xs) & 15)) & 15) / 2);
  const int nv = (n - head) / 8;
  unsigned long long s = 0;
  for (int i = threadIdx.x; i < head; i += BLOCK) s += tab.value((unsigned)__ldg(xs + i), exact);
  for (int i = head + 8 * nv + threadIdx.x; i < n; i += BLOCK) s += tab.value((unsigned)__ldg(xs + i), exact);
  return s + table_vectors_sum(tab, reinterpret_cast<const uint4 *>(xs + head), (int)threadIdx.x, BLOCK, nv, exact);
}

// table_span_sum is ptable.cuh's table_sum (tokens [lo, hi) of bf16 row x,
// one thread) with its loads batched: 16-byte vectors where x + lo is
// aligned, 2-byte loads elsewhere.
template <typename F>
__device__ unsigned long long table_span_sum(const PatternTable<unsigned long long> &tab, const __nv_bfloat16 *x,
                                             int lo, int hi, F &&exact) {
  const unsigned short *xs = reinterpret_cast<const unsigned short *>(x);
  unsigned long long s = 0;
  int i = lo;
  if ((reinterpret_cast<uintptr_t>(xs + lo) & 15) == 0) {
    const int nv = (hi - lo) / 8;
    s = table_vectors_sum(tab, reinterpret_cast<const uint4 *>(xs + lo), 0, 1, nv, exact);
    i = lo + 8 * nv;
  }
  for (; i < hi; i++) s += tab.value((unsigned)__ldg(xs + i), exact);
  return s;
}

// kPassTokens is how many tokens a thread of the node kernel loads before
// it uses the first in a pass over a draft distribution: one at a time,
// every token waited out a memory latency.
constexpr int kPassTokens = 4;

// row_sum returns the block's sum of f(v, p(v), q(v)) over the n tokens of
// a node's row, q of dtype Q (this node's row of draft_probs), the block
// taking tokens in turn, kPassTokens of them a thread at a time, their
// loads issued before any is used. f's values are integers: any order.
template <int BLOCK, typename Q, typename P, typename F>
__device__ unsigned long long row_sum(int n, const Q *__restrict__ q, P &&p_row, F &&f,
                                      typename Reduce<BLOCK>::Shared &red) {
  unsigned long long s = 0;
  for (int v0 = threadIdx.x; v0 < n; v0 += BLOCK * kPassTokens) {
    float pv[kPassTokens], qv[kPassTokens];
#pragma unroll
    for (int k = 0; k < kPassTokens; k++) {
      const int v = v0 + k * BLOCK;
      qv[k] = v < n ? load_f32(q, v) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kPassTokens; k++) {
      const int v = v0 + k * BLOCK;
      pv[k] = v < n ? p_row(v) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kPassTokens; k++)
      if (v0 + k * BLOCK < n) s += f(v0 + k * BLOCK, pv[k], qv[k]);
  }
  return Reduce<BLOCK>::sum(red, s);
}

// tree_node_kernel, block = node slot: q(x_c) of every child c, and the
// thresholds (NaN where the node has no distribution). The first child's
// threshold is the prepare's p(x_1). With children c_1..c_m, m >= 2, it
// follows engine/cpu's prepare: Z_1 = the total of R_1 (one pass over the
// row; a second for Weight(p) when it is 0, except from a table), then for
// j >= 2 the threshold R_{j-1}(x_j) / Z_{j-1} in float64, and the cut:
// one-hot drafts zero x_j when Z > R(x_j) (no pass), draft distributions
// take one pass for the total after the cut, applied unless it is 0.
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 3) tree_node_kernel(const T *__restrict__ target, TreeArgs a) {
  __shared__ typename Reduce<BLOCK>::Shared red;
  __shared__ unsigned long long cuts[kMaxTreeNodes];
  // The row's table (bf16): fixed-point weights of p under one-hot drafts,
  // p itself under draft distributions.
  __shared__ __align__(16) unsigned long long table[kTableEntries];
  pdl_wait();     // launched behind the prepare: its statistics first
  pdl_trigger();  // the walk may launch now; it waits for this kernel
  const int slot = blockIdx.x;
  const int cnt = a.kid_count[slot];
  if (cnt == 0) return;
  const int n = a.vocab;
  const int rbase = (slot / a.nodes) * a.nodes;
  const int start = a.kid_start[slot];
  const int *kids = a.kids + rbase + start;
  const PosStat ps = a.stats[slot];
  const bool full = a.qprobs != nullptr;
  const size_t qbase = (size_t)slot * n;
  auto q_at = [&](int v) -> float { return full ? load_any(a.qprobs, a.qdtype, qbase + v) : 0.0f; };
  for (int j = threadIdx.x; j < cnt; j += BLOCK) {
    const int c = kids[j];
    a.qx[rbase + c] = full ? q_at(a.tokens[rbase + c]) : 1.0f;
    if (!ps.valid) a.thr[rbase + c] = nan_f32();
  }
  if (threadIdx.x == 0) {
    if (ps.valid) a.thr[rbase + kids[0]] = ps.px;
    a.fb[slot] = 0;
    a.ncut[slot] = 0;
  }
  if (!ps.valid || cnt < 2) return;
  const T *x = target + (size_t)slot * n;
  const float *wrow = ps.filtered && a.wbuf ? a.wbuf + (size_t)slot * wstride(n) : nullptr;
  auto p_at = [&](int v) -> float { return target_prob<T, true>(ps, x, wrow, v); };
  TreeResidual res{cuts, 0, a.tokens[rbase + kids[0]], full, false};
  unsigned long long z = 0;
  // p over the row: from the table where the row has one (tabbed), else
  // recomputed; the same bits either way.
  bool tabbed = false;
  PatternTable<float> ptab{reinterpret_cast<float *>(table), 0};
  const bool split = a.split.tot != nullptr;  // one-hot drafts, no filter
  if (split) {
    // Z_1 is the row's total of R_1, which tree_split_kernel left per span.
    const unsigned long long *tot = a.split.tot + (size_t)slot * 2 * a.split.spans;
    unsigned long long r = 0, t = 0;
    for (int i = threadIdx.x; i < a.split.spans; i += BLOCK) {
      r += tot[i];
      t += tot[a.split.spans + i];
    }
    z = Reduce<BLOCK>::sum(red, r);
    if (z == 0) {  // p - q_1 has no positive weight: R_1 is Weight(p)
      res.fb = true;
      z = Reduce<BLOCK>::sum(red, t);
    }
  }
  if constexpr (tabled<T>()) {
    tabbed = !split && !ps.onehot && !ps.filtered;
    if (tabbed) {
      const __nv_bfloat16 *xb = reinterpret_cast<const __nv_bfloat16 *>(x);
      auto p_of = [&](float v) { return __fdiv_rn(weight_of(v, ps.m, ps.temp), ps.s); };
      if (!full) {
        // R_1 = Weight(p) but 0 at x_1: Z_1 is the row's total less x_1's.
        auto w_of = [&](float v) { return weight(p_of(v)); };
        const PatternTable<unsigned long long> wtab{table, table_window(ps.m, ps.temp)};
        fill_table<BLOCK>(wtab, w_of);
        const unsigned long long total = Reduce<BLOCK>::sum(red, table_row_sum<BLOCK>(wtab, xb, n, w_of));
        z = total - weight(p_at(res.x1));
        if (z == 0) {  // p - q_1 has no positive weight: R_1 is Weight(p)
          res.fb = true;
          z = total;
        }
      } else {
        ptab.lo = table_window(ps.m, ps.temp);
        fill_table<BLOCK>(ptab, p_of);
      }
    }
  }
  auto p_row = [&](int v) -> float {
    if constexpr (tabled<T>()) {
      if (tabbed) {
        auto p_of = [&](float b) { return __fdiv_rn(weight_of(b, ps.m, ps.temp), ps.s); };
        return ptab.value((unsigned)__ldg(reinterpret_cast<const unsigned short *>(x) + v), p_of);
      }
    }
    return p_at(v);
  };
  // A pass over a draft distribution, f(v, p, q) summed over the row.
  auto q_sum = [&](auto &&f) -> unsigned long long {
    switch (a.qdtype) {
      case SV_F16:
        return row_sum<BLOCK>(n, static_cast<const __half *>(a.qprobs) + qbase, p_row, f, red);
      case SV_BF16:
        return row_sum<BLOCK>(n, static_cast<const __nv_bfloat16 *>(a.qprobs) + qbase, p_row, f, red);
      default:
        return row_sum<BLOCK>(n, static_cast<const float *>(a.qprobs) + qbase, p_row, f, red);
    }
  };
  auto r1 = [&](int v, float p, float q) { return res(v, p, q); };
  if (full) {
    z = q_sum(r1);
    if (z == 0) {  // p - q_1 has no positive weight: R_1 is Weight(p)
      res.fb = true;
      z = q_sum(r1);
    }
  } else if (!tabbed && !split) {
    for (int v = threadIdx.x; v < n; v += BLOCK) z += res(v, p_row(v), 0.0f);
    z = Reduce<BLOCK>::sum(red, z);
    if (z == 0) {  // p - q_1 has no positive weight: R_1 is Weight(p)
      res.fb = true;
      for (int v = threadIdx.x; v < n; v += BLOCK) z += res(v, p_row(v), 0.0f);
      z = Reduce<BLOCK>::sum(red, z);
    }
  }
  // z, res.ncut and every decision below are the same in every thread.
  for (int j = 1; j < cnt; j++) {
    const int c = kids[j];
    const int xj = a.tokens[rbase + c];
    const unsigned long long rx = res(xj, p_at(xj), q_at(xj));
    if (threadIdx.x == 0) a.thr[rbase + c] = __double2float_rn(__ddiv_rn(__ull2double_rn(rx), __ull2double_rn(z)));
    if (!full) {
      if (z > rx) {  // the cut is all of x_j's weight and nothing else
        z -= rx;
        if (threadIdx.x == 0) cuts[res.ncut] = (unsigned long long)xj;
        res.ncut++;
      }
    } else {
      const unsigned long long next = q_sum([&](int v, float p, float q) {
        const unsigned long long r = res(v, p, q), cut = residual_cut(z, q);
        return cut < r ? r - cut : 0ull;
      });
      if (next != 0) {  // else the residual stays as it was
        if (threadIdx.x == 0) cuts[res.ncut] = z;
        res.ncut++;
        z = next;
      }
    }
    __syncthreads();  // cuts[] as thread 0 left it, before the next residual
  }
  if (threadIdx.x == 0) {
    a.fb[slot] = res.fb ? 1 : 0;
    a.ncut[slot] = res.ncut;
  }
  for (int e = threadIdx.x; e < res.ncut; e += BLOCK) a.cuts[rbase + start + e] = cuts[e];
}

// kTreeSplitPerSM is how many blocks of tree_split_kernel an SM holds (its
// launch bounds); tree_split_layout sizes the clusters so that the nodes'
// blocks fill about kTreeSplitWaves waves of them.
constexpr int kTreeSplitBlock = 512;
constexpr int kTreeSplitPerSM = 2;
constexpr int kTreeSplitWaves = 1;
constexpr int kTreeSplitWarps = kTreeSplitBlock / 32;  // a span of totals per warp
static_assert(kMaxCluster * kTreeSplitWarps <= kTreeWalkBlock, "draw_tree_split scans one span per walk thread");

// tree_split_smem is tree_split_kernel's dynamic shared memory for a
// vocabulary: the tables of fixed-point weights and of weights, then the
// Sum's complete tree.
inline size_t tree_split_smem(int vocab) {
  int leaves = 1;
  while (leaves < (vocab + 255) / 256) leaves <<= 1;
  return (sizeof(unsigned long long) + sizeof(float)) * kTableEntries + sizeof(float) * 2 * leaves;
}

// tree_split_kernel (sm_90, bf16) prepares the nodes of an unfiltered
// launch with one-hot drafts when they are few: one cluster of C blocks a
// slot (blockIdx.x / C), block rank r owning tokens [r * chunk, (r + 1) *
// chunk), chunk a multiple of the Sum's 256-token leaves. It is
// spec_split_kernel's algorithm, bit for bit, with two changes: each
// token's weight comes from a table of the row's patterns (fill_table:
// 4096 exact weights a block instead of one a token), and the chunk is not
// kept in shared memory but read again (from L2: a cluster's chunks are a
// few hundred KB) by the Sum's leaves and by the span totals, which take
// the fixed-point weight of p from a second table. The totals are those
// of R_1 = Weight(p - onehot(x_1)), which is Weight(p) but 0 at x_1 (p - 1
// <= 0), and of Weight(p), per warp span of chunk / kTreeSplitWarps tokens.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK, kTreeSplitPerSM)
    tree_split_kernel(const __nv_bfloat16 *__restrict__ target, int k, int vocab, int chunk, RowParams rp,
                      const int *__restrict__ drafts, PosStat *__restrict__ stats,
                      unsigned long long *__restrict__ totals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ typename Reduce<BLOCK>::Shared red;
  __shared__ __align__(8) ArgBest peer_best[kMaxCluster];
  extern __shared__ __align__(16) unsigned long long dyn64[];
  pdl_trigger();  // the node kernel may launch now; it waits for this kernel
  const int csize = cluster_blocks();
  const int rank = cluster_rank();
  cluster_arrive();
  const int slot = blockIdx.x / csize;
  const int row = slot / (k + 1), pos = slot % (k + 1);
  const __nv_bfloat16 *x = target + (size_t)slot * vocab;
  const unsigned short *xs = reinterpret_cast<const unsigned short *>(x);
  const int begin = rank * chunk, end = min(vocab, begin + chunk);
  const int leaves_n = (vocab + 255) / 256;
  int depth = 0;
  while ((1 << depth) < leaves_n) depth++;
  const int L = 1 << depth;
  unsigned long long *ptab_v = dyn64;                               // [kTableEntries]: weight(p)
  float *wtab_v = reinterpret_cast<float *>(dyn64 + kTableEntries);  // [kTableEntries]: w
  float *tree = wtab_v + kTableEntries;                              // 2L: leaves at [L, 2L)
  for (int j = threadIdx.x; j < L; j += BLOCK) tree[L + j] = 0.0f;
  ArgBest best{-kInf, 0x7fffffff};
  int nan = 0;
  scan_max<__nv_bfloat16, BLOCK, 4>(x, begin, end, best, nan);
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
  auto w_exact = [&](float v) { return weight_of(v, m, temp); };
  const PatternTable<float> wt{wtab_v, weights ? table_window(m, temp) : 0u};
  if (weights) {
    fill_table<BLOCK>(wt, w_exact);
    // The Sum's leaves of this chunk: thread (leaf, lane) adds the lane's
    // 32 elements in order; the 8 lanes of a leaf are 8 consecutive
    // threads, and the shuffles add them as ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)).
    const int c0 = begin / 256, c1 = (end + 255) / 256;
    for (int t0 = 0; t0 < (c1 - c0) * 8; t0 += BLOCK) {
      const int t = t0 + (int)threadIdx.x;
      const int leaf = c0 + t / 8, lane = t % 8;
      float a = 0.0f;
      if (leaf < c1) {
        const int base = leaf * 256 + lane;
        const int top = min(32, (end - base + 7) / 8);  // elements of this lane
        if (top == 32) {
          // Eight loads in flight, then their eight adds in order.
#pragma unroll
          for (int e0 = 0; e0 < 32; e0 += 8) {
            unsigned b[8];
#pragma unroll
            for (int e = 0; e < 8; e++) b[e] = __ldg(xs + base + 8 * (e0 + e));
#pragma unroll
            for (int e = 0; e < 8; e++) a = __fadd_rn(a, wt.value(b[e], w_exact));
          }
        } else {
          for (int e = 0; e < top; e++) a = __fadd_rn(a, wt.value((unsigned)__ldg(xs + base + 8 * e), w_exact));
        }
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
  // weight(p) of every pattern of the window, from the table of w.
  const PatternTable<unsigned long long> pt{ptab_v, wt.lo};
  auto wp_exact = [&](float v) -> unsigned long long { return weight(__fdiv_rn(weight_of(v, m, temp), s)); };
  if (weights) {
    for (int j = threadIdx.x; j < (int)kTableEntries; j += BLOCK) ptab_v[j] = weight(__fdiv_rn(wtab_v[j], s));
    __syncthreads();
  }
  // weight(p(v)) of token v (onehot: p is 1 at the maximum, else 0).
  auto wp = [&](int v) -> unsigned long long {
    if (onehot) return v == best.i ? weight(1.0f) : 0ull;
    return pt.value((unsigned)__ldg(xs + v), wp_exact);
  };
  const int sub = chunk / kTreeSplitWarps, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int lo = begin + warp * sub, hi = min(end, lo + sub);
  unsigned long long tgt = 0;
  if (onehot) {
    if (lane == 0 && best.i >= lo && best.i < hi) tgt = weight(1.0f);
  } else if (lo < hi) {
    int i = lo;
    if ((reinterpret_cast<uintptr_t>(xs + lo) & 15) == 0) {
      const int nv = (hi - lo) / 8;
      tgt = table_vectors_sum(pt, reinterpret_cast<const uint4 *>(xs + lo), lane, 32, nv, wp_exact);
      i = lo + 8 * nv;
    }
    for (i += lane; i < hi; i += 32) tgt += pt.value((unsigned)__ldg(xs + i), wp_exact);
  }
  for (int off = 16; off > 0; off >>= 1) tgt += __shfl_xor_sync(0xffffffffu, tgt, off);
  if (lane == 0) {
    // R_1's total: the target's less x_1's weight where x_1 is in the span.
    const unsigned long long res = pos < k ? tgt - (xd >= lo && xd < hi ? wp(xd) : 0ull) : 0ull;
    const int spans = csize * kTreeSplitWarps;
    unsigned long long *t = totals + (size_t)slot * 2 * spans;
    t[rank * kTreeSplitWarps + warp] = res;
    t[spans + rank * kTreeSplitWarps + warp] = tgt;
  }
#endif
}

// draw_tree_split is the walk's draw at a stop node from tree_split_kernel's
// span totals: the same token as draw_stop over the row (the first whose
// inclusive prefix of weights exceeds pick(u, total)), from the residual
// when residual_first is set and its total is not 0, else from Weight(p).
// The residual's span totals are R_1's (Weight(p)'s where R_1 fell back,
// fb) less the weights of the nz tokens in zeroed (-1: none) that the cuts
// zero; the span that holds the target is then searched token by token.
template <int BLOCK, typename Residual, typename Target>
__device__ int draw_tree_split(const SplitTotals &sp, int slot, int n, bool residual_first, bool fb,
                               const int *zeroed, int nz, uint64_t u, Residual residual, Target target,
                               RowShared<BLOCK> &sh) {
  const unsigned long long *tot = sp.tot + (size_t)slot * 2 * sp.spans;
  unsigned long long rmine = 0, tmine = 0;  // span threadIdx.x (spans <= BLOCK)
  const int r = (int)threadIdx.x;
  if (r < sp.spans) {
    tmine = tot[sp.spans + r];
    rmine = fb ? tmine : tot[r];
    const int lo = r * sp.span, hi = min(n, lo + sp.span);
    for (int e = 0; e < nz; e++) {
      const int v = zeroed[e];
      if (v >= lo && v < hi) rmine -= target(v);
    }
  }
  const unsigned long long rtotal = Reduce<BLOCK>::sum(sh.red, rmine);
  const bool use_residual = residual_first && rtotal > 0;
  const unsigned long long total = use_residual ? rtotal : Reduce<BLOCK>::sum(sh.red, tmine);
  if (total == 0) return -1;
  unsigned long long rem;
  const int seg = find_segment<BLOCK>(pick(u, total), use_residual ? rmine : tmine, rem, sh);
  if (seg < 0) return -1;
  const int lo = seg * sp.span, hi = min(n, lo + sp.span);
  return use_residual ? scan_find<BLOCK, 4>(lo, hi, rem, residual, sh) : scan_find<BLOCK, 4>(lo, hi, rem, target, sh);
}

// tree_walk_kernel, block = trial * rows + row. Child c is tested with
// u = U01(word 0 of block 2(c-1)) and accepted iff float32(u * q(x_c)) <
// its threshold; the token where the walk stops at node n is drawn with
// U64 of block 2n+1: from the node's residual when it has children (from
// Weight(p) where a single child's R_1 is all 0, as spec_verify), from
// Weight(p) at a leaf, -1 where the node has no distribution.
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 1) tree_walk_kernel(const T *__restrict__ target, TreeArgs a) {
  __shared__ RowShared<BLOCK> sh;
  extern __shared__ __align__(16) unsigned long long wide[];  // a.wide_table: kWideTableBytes
  __shared__ int stop_sh, acc_sh;
  __shared__ uint64_t u_sh;  // the draw's uniform at the stop
  pdl_wait();  // launched behind the node kernel: its results first
  const int row = blockIdx.x % a.rows, trial = blockIdx.x / a.rows;
  const int nodes = a.nodes, width = a.width, n = a.vocab;
  const int rbase = row * nodes;
  const Stream rng(a.rp.seed[row], a.rp.offset[row], row, trial);
  const bool traced = trial < a.trace_trials;
  const size_t tbase = ((size_t)trial * a.rows + row) * nodes;
  const size_t obase = ((size_t)trial * a.rows + row) * width;
  for (int i = threadIdx.x; i < width; i += BLOCK) {
    a.path[obase + i] = -1;
    a.out_tokens[obase + i] = -1;
  }
  if (traced) {
    for (int i = threadIdx.x; i < nodes; i += BLOCK) {
      a.tu[tbase + i] = 0.0f;
      a.tp[tbase + i] = 0.0f;
      a.tq[tbase + i] = 0.0f;
      a.tflags[tbase + i] = 0;
      a.tdrawn[tbase + i] = -1;
    }
  }
  __syncthreads();  // the fills before the walk's writes over them
  if (threadIdx.x < 32) {
    const int lane = (int)threadIdx.x;
    int u = 0, acc = 0;
    if (lane == 0) a.path[obase] = 0;
    // u, cnt, acc and next are the same in every lane. The bound on acc
    // holds for every tree the links describe (width = deepest + 1).
    while (acc + 1 < width) {
      const int cnt = a.kid_count[rbase + u];
      const int *kids = a.kids + rbase + a.kid_start[rbase + u];
      int next = -1;
      for (int j0 = 0; j0 < cnt; j0 += 32) {
        const int j = j0 + lane;
        int c = -1;
        float uu = 0.0f, p = 0.0f, q = 0.0f;
        bool ok = false;
        if (j < cnt) {
          c = kids[j];
          uu = u01(rng.block(2 * (uint64_t)(c - 1)).x);
          p = a.thr[rbase + c];
          q = a.qx[rbase + c];
          ok = __fmul_rn(uu, q) < p;
        }
        const unsigned hits = __ballot_sync(0xffffffffu, ok);
        const int first = hits ? __ffs(hits) - 1 : 32;
        if (traced && j < cnt && lane <= first) {  // tested: up to the first accepted
          a.tu[tbase + c] = uu;
          a.tp[tbase + c] = p;
          a.tq[tbase + c] = q;
          a.tflags[tbase + c] = (ok ? 1 : 0) | 2;
        }
        if (hits) {
          next = __shfl_sync(0xffffffffu, c, first);
          break;
        }
      }
      if (next < 0) break;
      if (lane == 0) {
        a.out_tokens[obase + acc] = a.tokens[rbase + next];
        a.path[obase + acc + 1] = next;
      }
      acc++;
      u = next;
    }
    if (lane == 0) {
      stop_sh = u;
      acc_sh = acc;
      u_sh = rng.u64(2 * (uint64_t)u + 1);
      a.accepted[(size_t)trial * a.rows + row] = acc;
    }
  }
  __syncthreads();
  const int u = stop_sh, acc = acc_sh;
  const int slot = rbase + u;
  const PosStat ps = a.stats[slot];
  int token = -1;
  if (ps.valid) {
    const int cnt = a.kid_count[slot];
    const int start = a.kid_start[slot];
    const bool full = a.qprobs != nullptr;
    const int x1 = cnt > 0 ? a.tokens[rbase + a.kids[rbase + start]] : -1;
    unsigned long long *cut_sh = sh.hist_mass;
    int *zero_sh = reinterpret_cast<int *>(sh.hist_count);  // the tokens the one-hot residual zeroes, each once
    const TreeResidual res{cut_sh, cnt > 1 ? a.ncut[slot] : 0, x1, full, cnt > 1 && a.fb[slot] != 0};
    for (int e = threadIdx.x; e < res.ncut; e += BLOCK) cut_sh[e] = a.cuts[rbase + start + e];
    __syncthreads();
    const T *x = target + (size_t)slot * n;
    const float *wrow = ps.filtered && a.wbuf ? a.wbuf + (size_t)slot * wstride(n) : nullptr;
    const size_t qbase = (size_t)slot * n;
    auto q_of = [&](int v) -> float { return full ? load_any(a.qprobs, a.qdtype, qbase + v) : 0.0f; };
    // With two or more children the residual is never all 0 (a cut
    // applies only when something is left), so the draw's fallback to
    // Weight(p) serves the single child alone, as engine/cpu's R_1.
    const bool residual_first = cnt > 0;
    bool tabbed = false;
    const bool split = a.split.tot != nullptr;  // one-hot drafts, no filter
    if (split) {
      // The residual is R_1 (Weight(p) where it fell back) with the cut
      // tokens zeroed: the span totals less the weights of the cut tokens
      // R_1 does not already zero, each counted once.
      for (int i = threadIdx.x; i < res.ncut; i += BLOCK) {
        int v = (int)cut_sh[i];
        if (!res.fb && v == x1) v = -1;
        for (int e = 0; e < i && v >= 0; e++)
          if ((int)cut_sh[e] == v) v = -1;
        zero_sh[i] = v;
      }
      __syncthreads();
      auto residual = [&](int v) -> unsigned long long { return res(v, target_prob<T, true>(ps, x, wrow, v), 0.0f); };
      auto target_weight = [&](int v) -> unsigned long long { return weight(target_prob<T, true>(ps, x, wrow, v)); };
      token = draw_tree_split<BLOCK>(a.split, slot, n, residual_first, res.fb, zero_sh, res.ncut, u_sh, residual,
                                     target_weight, sh);
    }
    if constexpr (tabled<T>()) {
      tabbed = !split && a.wide_table && !ps.onehot && !ps.filtered;
      if (tabbed) {
        const __nv_bfloat16 *xb = reinterpret_cast<const __nv_bfloat16 *>(x);
        auto p_of = [&](float v) { return __fdiv_rn(weight_of(v, ps.m, ps.temp), ps.s); };
        if (!full) {
          // One-hot drafts: the residual is Weight(p) but 0 at x_1 (unless
          // R_1 fell back) and at each cut token, so one table of
          // fixed-point weights gives both weights of a token, and a
          // segment's residual total is its target total less the weights
          // of the zeroed tokens in it, each counted once.
          const int lead = cnt > 0 && !res.fb ? 1 : 0, nz = lead + res.ncut;
          for (int i = threadIdx.x; i < nz; i += BLOCK) {
            auto zeroed = [&](int k) { return k < lead ? x1 : (int)cut_sh[k - lead]; };
            int v = zeroed(i);
            for (int k = 0; k < i && v >= 0; k++)
              if (zeroed(k) == v) v = -1;
            zero_sh[i] = v;
          }
          __syncthreads();
          auto w_of = [&](float v) { return weight(p_of(v)); };
          const PatternTable<unsigned long long> tab{wide, table_window(ps.m, ps.temp)};
          fill_table<BLOCK>(tab, w_of);
          auto sums = [&](int lo, int hi) -> DrawWeights {
            const unsigned long long t = table_span_sum(tab, xb, lo, hi, w_of);
            unsigned long long r = t;
            for (int k = 0; k < nz; k++) {
              const int v = zero_sh[k];
              if (v >= lo && v < hi) r -= tab.value(__bfloat16_as_ushort(xb[v]), w_of);
            }
            return DrawWeights{residual_first ? r : 0ull, t};
          };
          auto both = [&](int v, unsigned b) -> DrawWeights {
            const unsigned long long w = tab.value(b, w_of);
            bool zero = !residual_first;
            for (int k = 0; k < nz && !zero; k++) zero = zero_sh[k] == v;
            return DrawWeights{zero ? 0ull : w, w};
          };
          token = draw_bits<BLOCK>(xb, n, residual_first, u_sh, sums, both, sh);
        } else {
          // Draft distributions: a table of p (the first half of wide).
          const PatternTable<float> tab{reinterpret_cast<float *>(wide), table_window(ps.m, ps.temp)};
          fill_table<BLOCK>(tab, p_of);
          auto both = [&](int v, unsigned b) -> DrawWeights {
            const float p = tab.value(b, p_of);
            return DrawWeights{residual_first ? res(v, p, q_of(v)) : 0ull, weight(p)};
          };
          token = draw_bits<BLOCK>(xb, n, residual_first, u_sh, both, sh);
        }
      }
    }
    if (!tabbed && !split) {
      auto residual = [&](int v) -> unsigned long long { return res(v, target_prob<T, true>(ps, x, wrow, v), q_of(v)); };
      auto target_weight = [&](int v) -> unsigned long long { return weight(target_prob<T, true>(ps, x, wrow, v)); };
      token = draw_stop<BLOCK>(n, residual_first, u_sh, residual, target_weight, sh);
    }
  }
  if (threadIdx.x == 0) {
    a.out_tokens[obase + acc] = token;
    if (traced) a.tdrawn[tbase + u] = token;
  }
}

size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

// tree_split_layout says whether a launch of slots nodes takes
// tree_split_kernel, and with which cluster size and chunk: only when the
// nodes alone do not fill the GPU (one block each, as the lean prepare
// runs them), on a device that runs clusters; the clusters are sized so
// that the blocks fill about kTreeSplitWaves waves of kTreeSplitPerSM
// blocks an SM.
bool tree_split_layout(int slots, int vocab, int &csize, int &chunk) {
  if (!cluster_path() || slots > device_sms()) return false;
  const int leaves = (vocab + 255) / 256;
  csize = min(min(kMaxCluster, leaves), max(1, kTreeSplitWaves * kTreeSplitPerSM * device_sms() / slots));
  chunk = (leaves + csize - 1) / csize * 256;
  csize = (vocab + chunk - 1) / chunk;
  return (long long)slots * csize <= 0x7fffffff;
}

// tree_split_launch launches tree_split_kernel, or returns -1 (nothing
// launched) when the device cannot hold one of its clusters.
int tree_split_launch(int slots, int csize, int chunk, const __nv_bfloat16 *target, int k, int vocab,
                      const RowParams &rp, const int *first, PosStat *stats, unsigned long long *totals) {
  auto kern = tree_split_kernel<kTreeSplitBlock>;
  const size_t smem = tree_split_smem(vocab);
  if (!cluster_ready((const void *)kern, true) || max_clusters((const void *)kern, csize, kTreeSplitBlock, smem) < 1)
    return -1;
  return launch_cluster(SV_VARIANT_TREE_SPLIT, kern, csize * slots, kTreeSplitBlock, smem, csize,
                        "spec_tree_verify (split prepare)", target, k, vocab, chunk, rp, first, stats, totals);
}

}  // namespace

int launch_spec_tree_verify(const void *target, int rows, int nodes, int vocab, int width, uint64_t params,
                            int flags, const int *tree, const void *qprobs, int trials, int *path, int *tokens,
                            int *accepted, int trace_trials, void *trace) {
  if (rows < 0 || nodes < 1 || vocab < 1 || trials < 1 || trace_trials < 0 || trace_trials > trials ||
      (rows > 0 && (width < 1 || width > nodes)))
    return set_error(SV_ERR_INVALID, "spec_tree_verify: bad shape (%d rows, %d nodes, %d tokens, width %d, %d trials)",
                     rows, nodes, vocab, width, trials);
  if (nodes > kMaxTreeNodes)
    return set_error(SV_ERR_UNSUPPORTED, "spec_tree_verify: %d nodes over %d", nodes, kMaxTreeNodes);
  if (vocab > kMaxExactVocab)
    return set_error(SV_ERR_UNSUPPORTED, "spec_tree_verify: vocabulary %d over %d", vocab, kMaxExactVocab);
  if (rows == 0) return SV_OK;
  const size_t slots = (size_t)rows * nodes;
  if (slots > 0x7fffffff || (size_t)rows * trials > 0x7fffffff)
    return set_error(SV_ERR_UNSUPPORTED, "spec_tree_verify: too many rows, nodes or trials");
  const int tdtype = (flags >> SV_SPEC_TARGET_SHIFT) & 15;
  const int qdtype = (flags >> SV_SPEC_DRAFT_SHIFT) & 15;
  const bool filtered = flags & SV_HAS_FILTERS;
  const size_t sbytes = align256(sizeof(PosStat) * slots);
  size_t wbytes = filtered ? align256(sizeof(float) * slots * wstride(vocab)) : 0;
  if (wbytes > kMaxTreeWeightBytes) wbytes = 0;
  const size_t fbytes = align256(sizeof(float) * slots);
  const size_t ibytes = align256(sizeof(int) * slots);
  const size_t cbytes = align256(sizeof(unsigned long long) * slots);
  int split_c = 0, split_chunk = 0;
  const bool split = tdtype == SV_BF16 && !filtered && !qprobs &&
                     tree_split_layout((int)slots, vocab, split_c, split_chunk);
  const size_t tbytes = split ? align256(sizeof(unsigned long long) * slots * 2 * split_c * kTreeSplitWarps) : 0;
  void *ws = nullptr;
  int st = workspace(sbytes + wbytes + 2 * fbytes + 2 * ibytes + cbytes + tbytes, &ws);
  if (st != SV_OK) return st;
  char *base = static_cast<char *>(ws);
  PosStat *stats = reinterpret_cast<PosStat *>(base);
  float *wbuf = wbytes ? reinterpret_cast<float *>(base + sbytes) : nullptr;
  char *rest = base + sbytes + wbytes;
  const RowParams rp = row_params(params, rows);
  TreeArgs a;
  a.rows = rows;
  a.nodes = nodes;
  a.vocab = vocab;
  a.width = width;
  a.rp = rp;
  a.tokens = tree;
  a.kid_start = tree + slots;
  a.kid_count = tree + 2 * slots;
  a.kids = tree + 3 * slots;
  const int *first = nodes > 1 ? tree + 4 * slots : nullptr;  // [rows, nodes - 1]
  a.qprobs = qprobs;
  a.qdtype = qdtype;
  a.stats = stats;
  a.wbuf = wbuf;
  a.thr = reinterpret_cast<float *>(rest);
  a.qx = reinterpret_cast<float *>(rest + fbytes);
  a.fb = reinterpret_cast<int *>(rest + 2 * fbytes);
  a.ncut = reinterpret_cast<int *>(rest + 2 * fbytes + ibytes);
  a.cuts = reinterpret_cast<unsigned long long *>(rest + 2 * fbytes + 2 * ibytes);
  unsigned long long *totals =
      split ? reinterpret_cast<unsigned long long *>(rest + 2 * fbytes + 2 * ibytes + cbytes) : nullptr;
  a.split = SplitTotals{nullptr, split_c * kTreeSplitWarps, split_chunk / kTreeSplitWarps};
  a.path = path;
  a.out_tokens = tokens;
  a.accepted = accepted;
  a.trace_trials = trace ? trace_trials : 0;
  const size_t tn = (size_t)trace_trials * rows * nodes;
  char *tr = static_cast<char *>(trace);
  a.tu = trace ? reinterpret_cast<float *>(tr) : nullptr;
  a.tp = trace ? reinterpret_cast<float *>(tr + 4 * tn) : nullptr;
  a.tq = trace ? reinterpret_cast<float *>(tr + 8 * tn) : nullptr;
  a.tflags = trace ? reinterpret_cast<int *>(tr + 12 * tn) : nullptr;
  a.tdrawn = trace ? reinterpret_cast<int *>(tr + 16 * tn) : nullptr;
  SV_DISPATCH_DTYPE(tdtype, T, {
    const T *x = static_cast<const T *>(target);
    const SpecFullKernels<T> kk = spec_full_kernels(x);
    const SpecPrepareKernel<T> prepare = filtered ? kk.prepare_filtered : kk.prepare_lean;
    // split holds only for bf16 (tdtype), so the cast names x's own type.
    st = split ? tree_split_launch((int)slots, split_c, split_chunk, reinterpret_cast<const __nv_bfloat16 *>(x),
                                   nodes - 1, vocab, rp, first, stats, totals)
               : -1;
    if (st > 0) return st;
    if (st == SV_OK) {
      a.split.tot = totals;
    } else {
      st = launch_after(filtered ? SV_VARIANT_TREE_PREPARE_FILTERED : SV_VARIANT_TREE_PREPARE_LEAN, false, prepare,
                        dim3((unsigned)slots), kSpecBlock, 0, "spec_tree_verify prepare", x, nodes - 1, vocab,
                        (int)slots, rp, flags, first, wbuf, stats, (const int *)nullptr);
      if (st != SV_OK) return st;
    }
    const TreeKernel<T> node = tree_node_kernel<T, kTreeNodeBlock>;
    st = launch_after(SV_VARIANT_TREE_NODES, true, node, dim3((unsigned)slots), kTreeNodeBlock, 0,
                      "spec_tree_verify nodes", x, a);
    if (st != SV_OK) return st;
    const TreeKernel<T> walk = tree_walk_kernel<T, kTreeWalkBlock>;
    a.wide_table = tabled<T>() && !a.split.tot && smem_ready((const void *)walk, kWideTableBytes);
    return launch_after(SV_VARIANT_TREE_WALK, true, walk, dim3((unsigned)((size_t)rows * trials)), kTreeWalkBlock,
                        a.wide_table ? kWideTableBytes : 0, "spec_tree_verify walk", x, a);
  });
  return SV_OK;
}

}  // namespace sv

extern "C" int sv_spec_tree_verify(uint64_t target, int rows, int nodes, int vocab, int width, uint64_t params,
                                   int flags, uint64_t tree, uint64_t draft_probs, int trials, uint64_t path,
                                   uint64_t tokens, uint64_t accepted, int trace_trials, uint64_t trace) {
  if (!params || !tree) return sv::set_error(SV_ERR_INVALID, "spec_tree_verify: no parameters or tree");
  return sv::launch_spec_tree_verify(reinterpret_cast<const void *>(target), rows, nodes, vocab, width, params, flags,
                                     reinterpret_cast<const int *>(tree), reinterpret_cast<const void *>(draft_probs),
                                     trials, reinterpret_cast<int *>(path), reinterpret_cast<int *>(tokens),
                                     reinterpret_cast<int *>(accepted), trace_trials, reinterpret_cast<void *>(trace));
}
