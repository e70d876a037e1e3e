// fast_layout.cuh: the top-k fast path's shapes and plumbing (fastrow.cuh):
// its constants, the arguments and shared memory of a fast kernel, and the
// host side of a launch: how a row is split into chunks, the workspace,
// the kernel attributes, and whether a launch runs clusters or serves its
// flagged rows itself.
#pragma once

#include <type_traits>

#include "cluster.cuh"
#include "rowops.cuh"

namespace sv {

constexpr int kFastBlock = 256;
constexpr int kFastUnroll = 4;        // 16-byte loads in flight per thread (8: spills, slower)
constexpr int kFastCap = 4096;        // candidates one block holds in shared memory
constexpr int kFastMaxK = 256;        // largest top_k the fast path serves
constexpr int kFastList = 512;        // largest top-k set (ties included) it ranks
constexpr int kFastChunkOut = 2048;   // candidates one chunk hands on
constexpr int kFastMaxChunks = 32;    // chunks per row (one per lane in fast_top)
constexpr int kFastMinChunk = 8192;   // tokens: one tile of 16-bit logits (a block's loads in flight)
constexpr int kFastItems = kFastList / kFastBlock;
constexpr int kSmallSet = 64;         // top-k sets ranked four threads an entry, filtered by one warp
constexpr int kFastWarps = kFastBlock / 32;

// FastChunk is what one chunk's scan hands to its row's finishing block.
struct FastChunk {
  int nan;         // a NaN was seen
  int count;       // candidates written; < 0: the buffer overflowed
  unsigned theta;  // order key of the chunk's final theta (<= its k-th largest)
};

// FastArgs locate one launch's rows, parameters and scratch for the fast path.
struct FastArgs {
  int vocab;
  int chunks;            // C
  int chunk;             // tokens per chunk (a multiple of 8)
  RowParams rp;
  int flags;
  const int *map;        // slot -> logits row (sample's sampled rows)
  FastChunk *stats;      // [slots, C]
  unsigned *keys;        // [slots, C, kFastChunkOut] (C > 1)
  int *idx;
  unsigned *arrived;     // [slots] zeroed counters
  int *todo;             // [slots]: 1 = the full-row kernel must serve it
};

// FastSmem is the fast path's shared memory (dynamic, ~46 KB: four blocks
// share an SM). The Sum tree reuses the candidate keys once they are done.
struct FastSmem {
  union {
    unsigned keys[kFastCap];
    float tree[2 * kMaxLeaves];
  };
  int idx[kFastCap];
  unsigned long long rank_key[kFastList];
  int lidx[kFastList];   // the top-k set ranked by (w desc, index)
  float lw[kFastList];
  int sidx[kFastList];   // the kept tokens ranked by index
  float sw[kFastList];
  unsigned hist[256];
  union {
    typename cub::BlockScan<int, kFastBlock>::TempStorage si;
    typename cub::BlockScan<unsigned long long, kFastBlock>::TempStorage su;
    typename cub::BlockReduce<unsigned long long, kFastBlock>::TempStorage ru;
    typename cub::BlockReduce<int, kFastBlock>::TempStorage ri;
    typename cub::BlockReduce<ArgBest, kFastBlock>::TempStorage ra;
  } tmp;
  int count, overflow, pick, need, last;
  int undecided;  // the top-k set is not decided by the logits (fast_top)
  float theta;
  unsigned long long u;
  unsigned long long top;  // the merge's largest (order key, ~index); at C = 1 unset, its value unused
  ArgBest best;  // the row's max and its first index, in the finishing block
  FastChunk told[kMaxCluster];  // a cluster row's chunk results, in each of its blocks (fast_cluster_row)
};

// FastParams are one row's parameters, read once.
struct FastParams {
  int k;
  float temp, top_p, min_p;
};

__device__ __forceinline__ FastParams fast_params(const RowParams &rp, int r) {
  return FastParams{rp.top_k[r], rp.temperature[r], rp.top_p[r], rp.min_p[r]};
}

// fast_eligible says whether a row of n tokens can take the fast path as
// far as its parameters tell.
__device__ __forceinline__ bool fast_eligible(const FastParams &fp, int n, int flags) {
  if (!(fp.temp > 0.0f) || fp.k <= 0 || fp.k >= n || fp.k > kFastMaxK) return false;
  return fp.top_p >= 1.0f || !(flags & SV_ORDER_JOINT);
}

// KeyPasses is how many byte-wide radix passes order a dtype's keys: a
// bf16 value widened to float32 has 16 low bits that the sign alone fixes,

// fast_smem is a fast kernel's dynamic shared memory.
__device__ __forceinline__ FastSmem &fast_smem() {
  extern __shared__ __align__(16) unsigned char smem[];
  return *reinterpret_cast<FastSmem *>(smem);
}

// What fast_row leaves to its block (the same in every thread).
enum FastOutcome {
  kFastDone = 0,     // nothing: not the row's last block, or the row is served
  kFastServed = 1,   // the row's last block: top holds the kept tokens
  kFastFlagged = -1  // the row is flagged in a.todo, and this block is its
                     // last (or, for a row the fast path never takes, block 0)
};

// fast_serves says whether a fast kernel serves the rows it flags itself,
// with no full-row kernel after it: under SV_ALL_FAST (rows the fast path
// does not take are rare) and for rows split into at least 8 chunks (at
// most ~50 rows), where the second kernel's launch is a large part of the
// whole and the full path's call in the fast kernel costs less than that.
inline bool fast_serves(int flags, const FastArgs &a) { return (flags & SV_ALL_FAST) && a.chunks >= 8; }

// fast_full_shared is a fast kernel's dynamic shared memory as the
// full-row path's RowShared, for a block that serves a flagged row itself
// (fast_serves). It begins with a barrier: every thread is done with
// FastSmem.
__device__ inline RowShared<kFastBlock> &fast_full_shared() {
  static_assert(sizeof(RowShared<kFastBlock>) <= sizeof(FastSmem), "the full-row path fits the fast path's memory");
  __syncthreads();
  return *reinterpret_cast<RowShared<kFastBlock> *>(&fast_smem());
}

// fast_attributes raises a fast kernel's dynamic shared memory limit above
// the 48 KB default and, on devices with clusters, allows clusters of up to
// kMaxCluster (16) blocks: once per kernel (fast_cluster and fast_launch
// both need them).
inline cudaError_t fast_attributes(const void *kernel) {
  static KernelMemo<bool> set;
  bool done;
  if (set.find(kernel, done)) return cudaSuccess;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sizeof(FastSmem));
  if (err == cudaSuccess && cluster_path())
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (err == cudaSuccess) set.put(kernel, true);
  return err;
}

// fast_cluster says whether kernel, a fast kernel's CLUSTER variant, runs a
// launch of a's layout: rows of 8 to 16 chunks (at most ~50 rows, where the
// hand-over through global memory is a large part of a launch), on a
// device and from a binary with clusters, where such a cluster fits.
template <typename K>
bool fast_cluster(K kernel, const FastArgs &a) {
  if (a.chunks < 8 || a.chunks > kMaxCluster || !cluster_path() || !sm90_binary((const void *)kernel))
    return false;
  if (fast_attributes((const void *)kernel) != cudaSuccess) {
    cudaGetLastError();  // not sticky: the plain launch follows
    return false;
  }
  return max_clusters((const void *)kernel, a.chunks, kFastBlock, sizeof(FastSmem)) > 0;
}

// FastKernels are a fast kernel's three shapes for one dtype: plain (a
// full-row kernel follows for the rows it flags), serving its flagged rows
// itself (fast_serves), and that with each row's chunks one cluster
// (fast_cluster). spec_verify's has no serving shape (serve is null).
template <typename K>
struct FastKernels {
  K plain, serve, cluster;
};

// fast_launch launches a fast kernel, variant (SV_VARIANT_*) of its op,
// with its dynamic shared memory, each row's chunks (grid.x) as one cluster
// where cluster (fast_cluster).
template <typename... Args>
int fast_launch(int variant, void (*kernel)(Args...), dim3 grid, bool cluster, const char *what, Args... args) {
  if (skip_launch(variant)) return SV_OK;
  const cudaError_t err = fast_attributes((const void *)kernel);
  if (err != cudaSuccess) return cuda_status(err, what);
  if (cluster) return launch_cluster(variant, kernel, grid, kFastBlock, sizeof(FastSmem), (int)grid.x, what, args...);
  kernel<<<grid, kFastBlock, sizeof(FastSmem), stream()>>>(args...);
  return check_launch(what);
}

// fast_layout picks the chunks per row for a launch of slots rows of vocab
// tokens: the fewest that give about three blocks per SM (chunks of at least
// kFastMinChunk tokens, at most kFastMaxChunks). Every chunk but the row's
// last pays a hand-over (its candidates through memory, the merge), and a
// block that scans a whole row needs none, so rows are split only to fill
// the GPU: B = 512 takes whole rows, B = 128 four chunks, B = 1 sixteen.
inline void fast_layout(int slots, int vocab, int &chunks, int &chunk) {
  int c = (3 * device_sms() + slots - 1) / slots;
  chunks = max(1, min(c, min(kFastMaxChunks, (vocab + kFastMinChunk - 1) / kFastMinChunk)));
  chunk = split_row(vocab, chunks);
}

// fast_bytes is the workspace the fast path needs for slots rows.
inline size_t fast_bytes(int slots, int chunks) {
  size_t b = ((sizeof(FastChunk) * (size_t)slots * chunks + 255) & ~(size_t)255) + 256 * (((size_t)slots * 4 + 255) / 256);
  if (chunks > 1) b += 2 * 4 * (size_t)slots * chunks * kFastChunkOut;
  return b;
}

// fast_args carves the workspace at base for the fast path.
inline int fast_args(char *base, int slots, int vocab, RowParams rp, int flags, const int *map, FastArgs &a) {
  fast_layout(slots, vocab, a.chunks, a.chunk);
  a.vocab = vocab;
  a.rp = rp;
  a.flags = flags;
  a.map = map;
  a.stats = reinterpret_cast<FastChunk *>(base);
  base += (sizeof(FastChunk) * (size_t)slots * a.chunks + 255) & ~(size_t)255;
  a.todo = reinterpret_cast<int *>(base);
  base += 256 * (((size_t)slots * 4 + 255) / 256);
  a.keys = nullptr;
  a.idx = nullptr;
  if (a.chunks > 1) {
    a.keys = reinterpret_cast<unsigned *>(base);
    a.idx = reinterpret_cast<int *>(base + 4 * (size_t)slots * a.chunks * kFastChunkOut);
  }
  return counters(slots, &a.arrived);
}

}  // namespace sv
