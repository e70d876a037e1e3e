// argmax.cu: the first index of each row's maximum.
//
// Bound by one read of the logits. One comparison per 16-byte vector: the
// largest element of 8 bf16 (or f16) comes from packed __hmax2_nan, which
// also carry any NaN (a NaN makes the row -1 anyway), and only a vector
// that beats the thread's best is searched for its first index (scan_max).
// A row is split over blocks so that every SM streams whatever B is:
//   - sm_90, more rows than SMs / 16: a thread block cluster per row, each
//     block reducing its chunk and writing its (value, index) into rank 0's
//     shared memory over DSMEM; rank 0 folds them in rank order. No
//     counter, no partials in global memory. The largest cluster (<= 16)
//     that keeps every block of the launch resident at once, so no block
//     waits for a second wave.
//   - otherwise: chunks of a row, the partials combined by the block that
//     finishes last (a counter per row, reset by that block); clusters
//     measured slower for so few rows.
// Measurements are in docs/perf-log.md.
//
// Ties go to the lowest index everywhere: in a thread, in the block
// reduction and across chunks. Padded lanes start at (-Inf, INT_MAX) and
// never win; an all -Inf row stays at -Inf and gives -1. +Inf is an ordinary
// maximum unless the caller (sample's greedy rows) asks for it to be invalid.
#include "cluster.cuh"
#include "common.cuh"

namespace sv {
namespace {

struct ArgPartial {
  float v;
  int i;
  int nan;
  int pad;
};

template <typename T, int BLOCK, int UNROLL>
__global__ void __launch_bounds__(BLOCK)
    argmax_kernel(const T *__restrict__ logits, int vocab, int chunk, const int *__restrict__ row_idx,
                  ArgPartial *__restrict__ part, unsigned *__restrict__ count, int inf_invalid,
                  int *__restrict__ tokens) {
  __shared__ typename Reduce<BLOCK>::Shared sh;
  __shared__ int last;
  const int slot = blockIdx.y;
  const int row = row_idx ? row_idx[slot] : slot;
  const T *x = logits + (size_t)row * vocab;
  const int begin = blockIdx.x * chunk;
  const int end = min(vocab, begin + chunk);
  ArgBest best{-kInf, 0x7fffffff};
  int nan = 0;
  scan_max<T, BLOCK, UNROLL>(x, begin, end, best, nan);
  nan = Reduce<BLOCK>::any(sh, nan);
  best = Reduce<BLOCK>::argbest(sh, best);
  if (threadIdx.x == 0) {
    part[(size_t)slot * gridDim.x + blockIdx.x] = ArgPartial{best.v, best.i, nan, 0};
    __threadfence();  // the partial is visible before the count says so
    last = atomicAdd(&count[slot], 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  // The last block of the row combines its chunks with one warp.
  __threadfence();
  const int lane = threadIdx.x;
  best = ArgBest{-kInf, 0x7fffffff};
  nan = 0;
  for (int c = lane; c < (int)gridDim.x; c += 32) {
    const ArgPartial *p = part + (size_t)slot * gridDim.x + c;
    const float v = __ldcg(&p->v);
    const int i = __ldcg(&p->i);
    nan |= __ldcg(&p->nan);
    if (better(v, i, best)) best = ArgBest{v, i};
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float v = __shfl_down_sync(0xffffffffu, best.v, off);
    const int i = __shfl_down_sync(0xffffffffu, best.i, off);
    nan |= __shfl_down_sync(0xffffffffu, nan, off);
    if (better(v, i, best)) best = ArgBest{v, i};
  }
  if (lane == 0) {
    const bool bad = nan || !(best.v > -kInf) || (inf_invalid && best.v == kInf);
    tokens[row] = bad ? -1 : best.i;
    count[slot] = 0;
  }
}

constexpr int kArgmaxBlock = 256;

// argmax_cluster_kernel (sm_90): one cluster of C blocks per row slot
// (blockIdx.x / C); block rank r scans tokens [r * chunk, (r + 1) * chunk).
// Rank 0 combines the blocks' results in rank order and writes the token.
// MINB is __launch_bounds__' blocks per SM: without it nvcc 11.8's ptxas
// caps the 256-thread kernel at 48 registers and spills.
template <typename T, int BLOCK, int UNROLL, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB)
    argmax_cluster_kernel(const T *__restrict__ logits, int vocab, int chunk, const int *__restrict__ row_idx,
                          int inf_invalid, int *__restrict__ tokens) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ typename cub::BlockReduce<ArgBest, BLOCK>::TempStorage tmp;
  __shared__ __align__(8) ArgBest part[kMaxCluster];  // rank 0's: one slot per block of the cluster
  const int csize = cluster_blocks();
  const int rank = cluster_rank();
  // Arrive now, wait before writing into rank 0: by then every block of the
  // cluster has started, which DSMEM access requires, at no cost.
  cluster_arrive();
  const int slot = blockIdx.x / csize;
  const int row = row_idx ? row_idx[slot] : slot;
  const T *x = logits + (size_t)row * vocab;
  const int begin = rank * chunk;
  const int end = min(vocab, begin + chunk);
  ArgBest best{-kInf, 0x7fffffff};
  int nan = 0;
  scan_max<T, BLOCK, UNROLL>(x, begin, end, best, nan);
  // A NaN makes the row -1 anyway: (+Inf, -1) beats every other key.
  if (nan) best = ArgBest{kInf, -1};
  best = cub::BlockReduce<ArgBest, BLOCK>(tmp).Reduce(best, ArgBestOp());  // thread 0's
  cluster_wait();
  if (threadIdx.x == 0) store_peer(&part[rank], 0, pack(best));
  // After this barrier nothing touches another block's shared memory, so
  // blocks may exit: no barrier before exit is needed.
  cluster_sync();
  if (rank == 0 && threadIdx.x == 0) {
    best = part[0];
    for (int r = 1; r < csize; r++)
      if (better(part[r].v, part[r].i, best)) best = part[r];
    const bool bad = best.i < 0 || !(best.v > -kInf) || (inf_invalid && best.v == kInf);
    tokens[row] = bad ? -1 : best.i;
  }
#endif
}

// Cluster shape: small blocks with many loads in flight; MIN is the blocks
// per SM for __launch_bounds__.
constexpr int kNarrowBlock = 256, kNarrowUnroll = 8, kNarrowMin = 1;

// argmax_occupancy sets a cluster kernel's attributes (cluster sizes above
// 8) once and returns how many of its blocks an SM holds, 0 when unusable
// (no sm_90 binary, or an attribute the device refuses).
template <typename T, int BLOCK, int UNROLL, int MINB>
int argmax_occupancy() {
  static const int occ = [] {
    auto kern = argmax_cluster_kernel<T, BLOCK, UNROLL, MINB>;
    int n = 0;
    if (!sm90_binary((const void *)kern)) return 0;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kern, BLOCK, 0) != cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    return n;
  }();
  return occ;
}

// argmax_cluster launches the cluster kernel, or returns -1 (nothing
// launched) when no cluster shape fits the device.
template <typename T>
int argmax_cluster(const T *logits, int slots, int vocab, const int *row_idx, int inf_invalid, int *tokens) {
  constexpr int N = 16 / sizeof(T);
  const int sms = device_sms();
  // Few rows (B <= SMs / 16) keep the chunks: clusters of 16 blocks of 1024
  // threads measured slower there.
  if ((long long)slots * kMaxCluster <= sms) return -1;
  // Many rows: the largest cluster with which every block of the launch is
  // resident at once (one wave), and at least one vector per thread per
  // block.
  auto kern = argmax_cluster_kernel<T, kNarrowBlock, kNarrowUnroll, kNarrowMin>;
  const int occ = argmax_occupancy<T, kNarrowBlock, kNarrowUnroll, kNarrowMin>();
  if (occ <= 0) return -1;
  int csize = (int)max(1LL, min((long long)kMaxCluster, (long long)occ * sms / slots));
  csize = min(csize, max(1, vocab / (kNarrowBlock * N)));
  for (;;) {
    int c = csize;
    const int chunk = split_row(vocab, c);
    const int fit = max_clusters((const void *)kern, c, kNarrowBlock, 0);
    if (fit >= 1 && (fit >= slots || c == 1)) {
      if ((long long)c * slots > 0x7fffffff) return -1;
      return launch_cluster(SV_VARIANT_ARGMAX_CLUSTER, kern, c * slots, kNarrowBlock, 0, c, "argmax", logits, vocab,
                            chunk, row_idx, inf_invalid, tokens);
    }
    if (csize == 1) return -1;
    csize--;
  }
}

}  // namespace

// launch_argmax is sv_argmax for callers inside the library (sample's greedy rows).
int launch_argmax(int dtype, const void *logits, int rows, int vocab, const int *row_idx, int n_idx, int flags,
                  int *tokens) {
  if (rows < 0 || vocab < 1) return set_error(SV_ERR_INVALID, "argmax: %d rows of %d tokens", rows, vocab);
  const int slots = row_idx ? n_idx : rows;
  if (slots <= 0) return SV_OK;
  const int inf_invalid = (flags & SV_ARGMAX_INF_INVALID) != 0;
  if (cluster_path()) {
    int st = -1;
    SV_DISPATCH_DTYPE(dtype, T,
                      st = argmax_cluster<T>(static_cast<const T *>(logits), slots, vocab, row_idx, inf_invalid,
                                             tokens));
    if (st >= 0) return st;
  }
  // sm_80 (and any shape no cluster fits): chunks combined by the last block.
  if (slots > 65535) return set_error(SV_ERR_UNSUPPORTED, "argmax: %d rows in one launch", slots);
  // Enough chunks for about eight blocks per SM, none under 2048 tokens.
  const int want = (8 * device_sms() + slots - 1) / slots;
  int chunks = max(1, min(want, (vocab + 2047) / 2048));
  const int chunk = split_row(vocab, chunks);
  void *ws = nullptr;
  int st = workspace(sizeof(ArgPartial) * (size_t)slots * chunks, &ws);
  if (st != SV_OK) return st;
  unsigned *count = nullptr;
  st = counters(slots, &count);
  if (st != SV_OK) return st;
  dim3 grid(chunks, slots);
  if (skip_launch(SV_VARIANT_ARGMAX_CHUNKS)) return SV_OK;
  SV_DISPATCH_DTYPE(dtype, T,
                    argmax_kernel<T, kArgmaxBlock, 4><<<grid, kArgmaxBlock, 0, stream()>>>(
                        static_cast<const T *>(logits), vocab, chunk, row_idx, static_cast<ArgPartial *>(ws), count,
                        inf_invalid, tokens));
  return check_launch("argmax");
}

}  // namespace sv

extern "C" int sv_argmax(int dtype, uint64_t logits, int rows, int vocab, uint64_t row_idx, int n_idx, int flags,
                         uint64_t tokens) {
  return sv::launch_argmax(dtype, reinterpret_cast<const void *>(logits), rows, vocab,
                           reinterpret_cast<const int *>(row_idx), n_idx, flags, reinterpret_cast<int *>(tokens));
}
