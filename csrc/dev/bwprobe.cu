// bwprobe.cu: what simple kernels reach on the bench's shapes (bf16,
// V=128256), so that a kernel's time can be read against what is reachable
// and not only against the bandwidth floor: an empty launch, a pure read
// (the max of every row chunk, as argmax reads), a read-2-write-4
// conversion (softmax's traffic in one read), and a two-read conversion
// (statistics, then the chunk again from L2 and written, as softmax v5).
// Rows are split into C chunks of one block each, C = 1..32, with 256,
// 512 and 1024 threads. Same timing method as `sampviz bench`: a spin
// kernel first, events around each launch, the median of 100 after 10
// warm-ups, inputs rotated past 4x the L2. `bwprobe split` times softmax
// as two kernels a slice of rows instead (split_probe); `bwprobe tma`
// with the chunk in shared memory by a bulk load and the outputs written
// by the threads or by bulk stores (tma_probe, softmax v6's shape);
// `bwprobe tma2` v5's two reads with bulk stores (tma2_probe); `bwprobe
// queue` a grid of resident blocks taking statistics and write tasks from
// a global counter (queue_probe). Not part of the library: `make
// gpu-probe [PROBE=split|tma|tma2|queue]` builds and runs it on the GPU
// machine (docs/perf-log.md, runs 24, 92, 99-100, 102 and 106).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <cub/block/block_reduce.cuh>
#include <vector>

#include "../bulk.cuh"     // the library's bulk-copy helpers
#include "../cluster.cuh"  // cluster_config: the library's cluster launch shape

namespace cg = cooperative_groups;

// check exits with the failing call's text: a probe has no one to report to.
#define check(call)                                                \
  do {                                                             \
    const cudaError_t err_ = (call);                               \
    if (err_ != cudaSuccess) {                                     \
      printf("%s: %s\n", #call, cudaGetErrorString(err_));         \
      exit(1);                                                     \
    }                                                              \
  } while (0)

constexpr long long kVocab = 128256;
constexpr long long kVectors = kVocab / 8;  // 16-byte vectors of bf16 a row
constexpr unsigned kNegInf2 = 0xff80ff80u;  // two bf16 -Inf

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__global__ void spin(long long ns) {
  const long long t0 = clock64();
  while (clock64() - t0 < ns * 2) {
  }
}

__global__ void empty_kernel(int *out) {
  if (out && threadIdx.x == 1234567) out[0] = 1;  // never: keeps the kernel
}

__device__ __forceinline__ float vec_max(const uint4 &u) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
  const __nv_bfloat162 a = __hmax2_nan(__hmax2_nan(h[0], h[1]), __hmax2_nan(h[2], h[3]));
  return __bfloat162float(__hmax_nan(__low2bfloat16(a), __high2bfloat16(a)));
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// load_vectors loads this thread's U vectors j, j + BLOCK, ... of a chunk
// of chunk vectors, all in flight at once; those past the chunk are -Inf.
template <int BLOCK, int U>
__device__ __forceinline__ void load_vectors(const uint4 *p, long long j, long long chunk, uint4 (&u)[U]) {
#pragma unroll
  for (int k = 0; k < U; k++)
    u[k] = j + k * BLOCK < chunk ? __ldg(p + j + k * BLOCK) : make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
}

// chunk_max is this thread's max over its vectors of a chunk of chunk
// vectors, U loads in flight.
template <int BLOCK, int U>
__device__ __forceinline__ float chunk_max(const uint4 *p, long long chunk) {
  float m = -1e30f;
  for (long long j = threadIdx.x; j < chunk; j += (long long)BLOCK * U) {
    uint4 u[U];
    load_vectors<BLOCK, U>(p, j, chunk, u);
#pragma unroll
    for (int k = 0; k < U; k++) m = fmaxf(m, vec_max(u[k]));
  }
  return m;
}

// write_chunk writes ex2(x - m) * inv as f32 for a chunk of chunk vectors.
template <int BLOCK, int U>
__device__ __forceinline__ void write_chunk(const uint4 *p, float4 *q, long long chunk, float m, float inv) {
  for (long long j = threadIdx.x; j < chunk; j += (long long)BLOCK * U) {
    uint4 u[U];  // loaded only within the chunk (not load_vectors: its fill measured differently)
#pragma unroll
    for (int k = 0; k < U; k++)
      if (j + k * BLOCK < chunk) u[k] = __ldg(p + j + k * BLOCK);
#pragma unroll
    for (int k = 0; k < U; k++) {
      const long long v = j + k * BLOCK;
      if (v >= chunk) break;
      const __nv_bfloat16 *e = reinterpret_cast<const __nv_bfloat16 *>(&u[k]);
      float o[8];
#pragma unroll
      for (int r = 0; r < 8; r++) o[r] = ex2(__bfloat162float(e[r]) - m) * inv;
      q[2 * v] = make_float4(o[0], o[1], o[2], o[3]);
      q[2 * v + 1] = make_float4(o[4], o[5], o[6], o[7]);
    }
  }
}

// read_max: block b reduces the max of vectors [b * chunk, (b + 1) * chunk).
template <int BLOCK, int U>
__global__ void __launch_bounds__(BLOCK) read_max(const uint4 *x, long long chunk, float *out) {
  using Reduce = cub::BlockReduce<float, BLOCK>;
  __shared__ typename Reduce::TempStorage tmp;
  const float m = Reduce(tmp).Reduce(chunk_max<BLOCK, U>(x + blockIdx.x * chunk, chunk), MaxOp());
  if (threadIdx.x == 0) out[blockIdx.x] = m;
}

// read_max_cluster is read_max with the cluster's maxima combined in rank
// 0 over DSMEM, as argmax's cluster kernel does.
template <int BLOCK, int U>
__global__ void __launch_bounds__(BLOCK) read_max_cluster(const uint4 *x, long long chunk, float *out) {
  using Reduce = cub::BlockReduce<float, BLOCK>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ float slot[16];
  cg::cluster_group cluster = cg::this_cluster();
  const float m = Reduce(tmp).Reduce(chunk_max<BLOCK, U>(x + blockIdx.x * chunk, chunk), MaxOp());
  cluster.sync();
  if (threadIdx.x == 0) cluster.map_shared_rank(slot, 0)[cluster.block_rank()] = m;
  cluster.sync();
  if (cluster.block_rank() == 0 && threadIdx.x == 0) {
    float a = slot[0];
    for (int i = 1; i < (int)cluster.num_blocks(); i++) a = fmaxf(a, slot[i]);
    out[blockIdx.x] = a;
  }
}

// convert: bf16 -> f32 ex2(x - 1), one read and one write.
template <int BLOCK, int U>
__global__ void __launch_bounds__(BLOCK) convert(const uint4 *x, long long chunk, float4 *y) {
  write_chunk<BLOCK, U>(x + blockIdx.x * chunk, y + 2 * blockIdx.x * chunk, chunk, 1.0f, 1.0f);
}

// online_add folds a vector of 8 bf16 into a running (max m, sum of
// 2^(x - m) s): one rescale when the max grows.
__device__ __forceinline__ void online_add(const uint4 &u, float &m, float &s) {
  const float vm = vec_max(u);
  if (vm > m) {
    s *= ex2(m - vm);
    m = vm;
  }
  const __nv_bfloat16 *e = reinterpret_cast<const __nv_bfloat16 *>(&u);
  float a = 0.0f;
#pragma unroll
  for (int r = 0; r < 8; r++) a += ex2(__bfloat162float(e[r]) - m);
  s += a;
}

// block_online combines the threads' running (max, sum): the block's max
// (every thread) and sum (thread 0), as (x, y).
template <int BLOCK>
__device__ __forceinline__ float2 block_online(typename cub::BlockReduce<float, BLOCK>::TempStorage &tmp, float m,
                                               float s) {
  using Reduce = cub::BlockReduce<float, BLOCK>;
  __shared__ float block_max;
  const float bm = Reduce(tmp).Reduce(m, MaxOp());
  if (threadIdx.x == 0) block_max = bm;
  __syncthreads();
  return make_float2(block_max, Reduce(tmp).Sum(s * ex2(m - block_max)));
}

// chunk_online is this thread's running (max, sum of 2^(x - max)) over
// its vectors of a chunk of chunk vectors, U loads in flight (past the
// chunk, -Inf).
template <int BLOCK, int U>
__device__ __forceinline__ float2 chunk_online(const uint4 *p, long long chunk) {
  float m = -1e30f, s = 0.0f;
  for (long long j = threadIdx.x; j < chunk; j += (long long)BLOCK * U) {
    uint4 u[U];
    load_vectors<BLOCK, U>(p, j, chunk, u);
#pragma unroll
    for (int k = 0; k < U; k++) online_add(u[k], m, s);
  }
  return make_float2(m, s);
}

// read2: the chunk's online max and sum (first read), then the chunk again
// (from L2) written as ex2(x - max) / sum: softmax v5 without the cluster.
template <int BLOCK, int U>
__global__ void __launch_bounds__(BLOCK) read2(const uint4 *x, long long chunk, float4 *y) {
  using Reduce = cub::BlockReduce<float, BLOCK>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ float block_inv;
  const uint4 *p = x + blockIdx.x * chunk;
  const float2 t = chunk_online<BLOCK, U>(p, chunk);
  const float2 b = block_online<BLOCK>(tmp, t.x, t.y);
  if (threadIdx.x == 0) block_inv = 1.0f / b.y;
  __syncthreads();
  write_chunk<BLOCK, U>(p, y + 2 * blockIdx.x * chunk, chunk, b.x, block_inv);
}

// warp_combine folds C chunk statistics part[0..C) (max, sum of 2^(x -
// max)) in one warp and returns the row's (max, 1 / sum) to every lane.
__device__ __forceinline__ float2 warp_combine(const float2 *part, int C) {
  float m = -1e30f, s = 0.0f;
  for (int k = threadIdx.x % 32; k < C; k += 32) {
    const float2 q = __ldcg(part + k);
    if (q.x > m) {
      s *= ex2(m - q.x);
      m = q.x;
    }
    s += q.y * ex2(q.x - m);
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, m, off), os = __shfl_xor_sync(0xffffffffu, s, off);
    const float nm = fmaxf(m, om);
    s = s * ex2(m - nm) + os * ex2(om - nm);
    m = nm;
  }
  return make_float2(m, 1.0f / s);
}

// --- The split shape (`bwprobe split`): softmax as two kernels per slice
// of rows. The statistics kernel reads each chunk once (online max and
// sum per chunk, into part[]); the write kernel combines its row's chunk
// statistics, reads its chunk again and writes it. When a slice's input
// fits the L2, the second read finds it there, so DRAM sees one read and
// one write; the phases are pure reads and pure writes. HINT 1: the first
// read asks the L2 to keep the lines (evict_last), the second read and the
// stores to evict them first; HINT 2: evict_last reads, streaming stores.

template <int HINT>
__device__ __forceinline__ uint4 load_hint(const uint4 *p, unsigned long long pol) {
  if (HINT == 0) return __ldg(p);
  uint4 u;
  asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
               : "l"(p), "l"(pol));
  return u;
}

__device__ __forceinline__ unsigned long long policy_last() {
  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

__device__ __forceinline__ unsigned long long policy_first() {
  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

template <int HINT>
__device__ __forceinline__ void store_hint(float4 *q, float4 v, unsigned long long pol) {
  if (HINT == 0) {
    *q = v;
  } else if (HINT == 1) {
    asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(q), "f"(v.x), "f"(v.y), "f"(v.z),
                 "f"(v.w), "l"(pol)
                 : "memory");
  } else {
    __stcs(q, v);
  }
}

// split_stats: block b takes chunk b % C of row b / C of its slice, and
// leaves the chunk's (max, sum of 2^(x - max)) in part[b].
template <int BLOCK, int U, int HINT, bool PDL>
__global__ void __launch_bounds__(BLOCK) split_stats(const uint4 *x, int C, long long chunk, float2 *part) {
  using Reduce = cub::BlockReduce<float, BLOCK>;
  __shared__ typename Reduce::TempStorage tmp;
  if (PDL) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const unsigned long long pol = HINT ? policy_last() : 0ull;
  const int row = blockIdx.x / C, c = blockIdx.x % C;
  const long long begin = c * chunk, end = min(kVectors, begin + chunk);
  const uint4 *p = x + row * kVectors;
  float m = -1e30f, s = 0.0f;
  for (long long j = begin + threadIdx.x; j < end; j += (long long)BLOCK * U) {
    uint4 u[U];
#pragma unroll
    for (int k = 0; k < U; k++)
      u[k] = j + k * BLOCK < end ? load_hint<HINT>(p + j + k * BLOCK, pol)
                                 : make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
#pragma unroll
    for (int k = 0; k < U; k++) online_add(u[k], m, s);
  }
  const float2 b = block_online<BLOCK>(tmp, m, s);
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");  // the write kernel before has finished
  if (threadIdx.x == 0) part[blockIdx.x] = b;
}

// split_write: block b combines its row's C chunk statistics (warp 0) and
// writes chunk b % C of row b / C.
template <int BLOCK, int U, int HINT, bool PDL>
__global__ void __launch_bounds__(BLOCK) split_write(const uint4 *x, int C, long long chunk, const float2 *part,
                                                     float4 *y) {
  __shared__ float row_max, row_inv;
  if (PDL) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  const int row = blockIdx.x / C, c = blockIdx.x % C;
  if (threadIdx.x < 32) {
    const float2 t = warp_combine(part + row * C, C);
    if (threadIdx.x == 0) {
      row_max = t.x;
      row_inv = t.y;
    }
  }
  __syncthreads();
  const float m = row_max, inv = row_inv;
  const unsigned long long pol = HINT == 1 ? policy_first() : 0ull;
  const long long begin = c * chunk, end = min(kVectors, begin + chunk);
  const uint4 *p = x + row * kVectors;
  float4 *q = y + 2 * row * kVectors;
  for (long long j = begin + threadIdx.x; j < end; j += (long long)BLOCK * U) {
    uint4 u[U];
#pragma unroll
    for (int k = 0; k < U; k++)
      if (j + k * BLOCK < end) u[k] = load_hint<HINT == 1 ? 1 : 0>(p + j + k * BLOCK, pol);
#pragma unroll
    for (int k = 0; k < U; k++) {
      const long long v = j + k * BLOCK;
      if (v >= end) break;
      const __nv_bfloat16 *e = reinterpret_cast<const __nv_bfloat16 *>(&u[k]);
      float o[8];
#pragma unroll
      for (int r = 0; r < 8; r++) o[r] = ex2(__bfloat162float(e[r]) - m) * inv;
      store_hint<HINT>(q + 2 * v, make_float4(o[0], o[1], o[2], o[3]), pol);
      store_hint<HINT>(q + 2 * v + 1, make_float4(o[4], o[5], o[6], o[7]), pol);
    }
  }
}

// launch_pdl launches kernel with the programmatic serialization attribute
// when pdl is set.
template <typename... P, typename... A>
void launch_pdl(bool pdl, void (*kernel)(P...), int blocks, int threads, A... args) {
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.attrs = &attr;
  cfg.numAttrs = pdl ? 1 : 0;
  check(cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...));
}

cudaEvent_t events[202];

// median_us times launch(set) 100 times after 10 warm-ups, each between two
// events and all queued behind a spinning kernel, and returns the median.
template <typename Launch>
float median_us(Launch launch, int sets) {
  for (int i = 0; i < 10; i++) launch(i % sets);
  spin<<<1, 1>>>(3000000);
  for (int i = 0; i < 100; i++) {
    check(cudaEventRecord(events[2 * i]));
    launch(i % sets);
    check(cudaEventRecord(events[2 * i + 1]));
  }
  check(cudaDeviceSynchronize());
  check(cudaGetLastError());
  std::vector<float> t;
  for (int i = 0; i < 100; i++) {
    float ms;
    check(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]));
    t.push_back(ms * 1000);
  }
  std::sort(t.begin(), t.end());
  return t[50];
}

// copy_bandwidth is the device-to-device copy bandwidth (bytes read plus
// written per second), the median of 10 copies of 512 MiB.
double copy_bandwidth() {
  const size_t bytes = 512ull << 20;
  void *a, *b;
  check(cudaMalloc(&a, bytes));
  check(cudaMalloc(&b, bytes));
  std::vector<float> t;
  for (int i = 0; i < 12; i++) {
    float ms;
    check(cudaEventRecord(events[0]));
    check(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    check(cudaEventRecord(events[1]));
    check(cudaEventSynchronize(events[1]));
    check(cudaEventElapsedTime(&ms, events[0], events[1]));
    if (i >= 2) t.push_back(ms);
  }
  check(cudaFree(a));
  check(cudaFree(b));
  std::sort(t.begin(), t.end());
  return 2.0 * bytes / (t[5] * 1e-3);
}

// split_probe times the split shape: for B in {128, 512}, chunks C, block
// sizes, hints and slices of S rows (stats then write per slice), with and
// without PDL, beside read2 (the same traffic with no agreement at all).
template <int BLOCK, int U, int HINT, bool PDL>
float split_time(int rows, int slice, int C, uint4 *in, float4 *out, float2 *part, int sets_r, int sets_w) {
  const long long chunk = (kVectors + C - 1) / C;
  const int sets = std::min(sets_r, sets_w);
  return median_us(
      [&](int s) {
        const uint4 *x = in + (size_t)s * rows * kVectors;
        float4 *y = out + (size_t)s * rows * kVectors * 2;
        for (int r0 = 0; r0 < rows; r0 += slice) {
          const int n = std::min(slice, rows - r0);
          float2 *pp = part + (size_t)r0 * C;
          launch_pdl(PDL && r0 > 0, split_stats<BLOCK, U, HINT, PDL>, n * C, BLOCK, x + (size_t)r0 * kVectors, C,
                     chunk, pp);
          launch_pdl(PDL, split_write<BLOCK, U, HINT, PDL>, n * C, BLOCK, x + (size_t)r0 * kVectors, C, chunk,
                     (const float2 *)pp, y + (size_t)r0 * kVectors * 2);
        }
      },
      sets);
}

int split_probe(uint4 *in, float4 *out, size_t pool_in, size_t pool_out, size_t rotate, double bw) {
  float2 *part;
  check(cudaMalloc(&part, 1 << 20));
  for (int rows : {128, 512}) {
    const size_t in_bytes = (size_t)rows * kVocab * 2, out_bytes = (size_t)rows * kVocab * 4;
    const int sets_r = std::max(1, std::min((int)(pool_in / in_bytes), (int)(rotate / in_bytes) + 1));
    const int sets_w = std::max(1, std::min((int)(pool_out / out_bytes), (int)(rotate / out_bytes) + 1));
    const float floor_us = (in_bytes + out_bytes) / bw * 1e6;
    for (int c : {16, 32}) {
      const long long chunk = (kVectors + c - 1) / c;
      const float two = median_us(
          [&](int s) {
            read2<256, 4><<<rows * c, 256>>>(in + (size_t)s * rows * kVectors, chunk, out + (size_t)s * rows * kVectors * 2);
          },
          std::min(sets_r, sets_w));
      printf("B=%d C=%d read2 256: %.2f us (%.2fx)\n", rows, c, two, two / floor_us);
    }
    for (int slice : {32, 64, 96, 128, 192, 256, 512}) {
      if (slice > rows) continue;
      for (int c : {8, 16, 32}) {
        const float a = split_time<256, 4, 0, false>(rows, slice, c, in, out, part, sets_r, sets_w);
        const float b = split_time<256, 4, 1, false>(rows, slice, c, in, out, part, sets_r, sets_w);
        const float d = split_time<256, 4, 2, false>(rows, slice, c, in, out, part, sets_r, sets_w);
        const float e = split_time<256, 4, 1, true>(rows, slice, c, in, out, part, sets_r, sets_w);
        const float f = split_time<512, 4, 1, true>(rows, slice, c, in, out, part, sets_r, sets_w);
        const float g = split_time<256, 8, 1, true>(rows, slice, c, in, out, part, sets_r, sets_w);
        printf("B=%d slice=%3d C=%2d | 256x4 hint0 %7.2f hint1 %7.2f hint2 %7.2f | pdl: hint1 %7.2f 512x4 %7.2f 256x8 "
               "%7.2f | best %.2fx\n",
               rows, slice, c, a, b, d, e, f, g, std::min({a, b, d, e, f, g}) / floor_us);
      }
    }
  }
  return 0;
}

// --- The bulk-copy shape (`bwprobe tma`): softmax with each block's chunk
// brought into shared memory by the copy engine (cp.async.bulk, one
// instruction per piece, completion on an mbarrier), the statistics taken
// from shared memory, the cluster's (max, sum) exchanged over DSMEM, and
// the chunk written from shared memory: one DRAM read, no L2 re-read, and
// no registers holding loads in flight. STORE 0: float4 stores; 1:
// streaming stores; 2: staged in shared memory and written by bulk stores.
// CLUSTER false: no exchange (each chunk its own row), the bound.

// row_scale combines the threads' running (max m, sum s) into the row's
// (max, 1 / sum), in every thread: with CLUSTER over the cluster's blocks
// (a DSMEM exchange between two cluster barriers), else the block's alone.
template <int BLOCK, bool CLUSTER>
__device__ float2 row_scale(typename cub::BlockReduce<float, BLOCK>::TempStorage &tmp, float m, float s) {
  __shared__ float2 peer[16];
  __shared__ float2 row;
  const float2 st = block_online<BLOCK>(tmp, m, s);
  if (CLUSTER) {
    cg::cluster_group cluster = cg::this_cluster();
    const int n = (int)cluster.num_blocks();
    cluster.sync();  // every block started
    if (threadIdx.x < 32) {
      const float2 mine = make_float2(st.x, __shfl_sync(0xffffffffu, st.y, 0));  // the sum is thread 0's
      if ((int)threadIdx.x < n) cluster.map_shared_rank(peer, threadIdx.x)[cluster.block_rank()] = mine;
    }
    cluster.sync();
    if (threadIdx.x == 0) {
      float gm = -1e30f;
      for (int r = 0; r < n; r++) gm = fmaxf(gm, peer[r].x);
      float gs = 0.0f;
      for (int r = 0; r < n; r++) gs += peer[r].y * ex2(peer[r].x - gm);
      row = make_float2(gm, 1.0f / gs);
    }
  } else if (threadIdx.x == 0) {
    row = make_float2(st.x, 1.0f / st.y);
  }
  __syncthreads();
  return row;
}

// convert8 writes the 8 bf16 of u as ex2(x - gm) * inv to dst[0..1].
__device__ __forceinline__ void convert8(const uint4 &u, float gm, float inv, float4 *dst) {
  const __nv_bfloat16 *h = reinterpret_cast<const __nv_bfloat16 *>(&u);
  float o[8];
#pragma unroll
  for (int r = 0; r < 8; r++) o[r] = ex2(__bfloat162float(h[r]) - gm) * inv;
  dst[0] = make_float4(o[0], o[1], o[2], o[3]);
  dst[1] = make_float4(o[4], o[5], o[6], o[7]);
}

// ring_slot is slot used % RING of a warp's ring of staged tiles (SLOT
// float4 each: 64 is 256 tokens), once the bulk store that last read it
// is done reading.
template <int RING, int SLOT = 64>
__device__ __forceinline__ float4 *ring_slot(float4 *ring, int used) {
  if (used >= RING) {
    if (threadIdx.x % 32 == 0) sv::bulk_wait_read<RING - 1>();
    __syncwarp();
  }
  return ring + (used % RING) * SLOT;
}

// tile_store writes a warp's staged tile (filled by its lanes) to dst by
// one bulk store of bytes, in lane 0's bulk group.
__device__ __forceinline__ void tile_store(float4 *dst, const float4 *tile, long long bytes) {
  sv::bulk_fence();
  __syncwarp();
  if (threadIdx.x % 32 == 0) {
    sv::bulk_store(dst, tile, (unsigned)bytes);
    sv::bulk_commit();
  }
}

// tma_softmax: block b takes vectors [b * chunk, (b + 1) * chunk) (a row is
// C chunks). STORE 2 stages STAGE tokens of f32 at a time for the whole
// block (two stages, a block barrier each); STORE 3 gives each warp two
// stages of STAGE tokens of its own (a warp barrier each, no block
// barrier), STORE 4 one (less shared memory, more blocks an SM).
template <int BLOCK, int PIECES, int STORE, bool CLUSTER, int STAGE>
__global__ void __launch_bounds__(BLOCK) tma_softmax(const uint4 *x, long long chunk, float4 *y) {
  using Reduce = cub::BlockReduce<float, BLOCK>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ unsigned long long bar[PIECES];
  extern __shared__ __align__(128) uint4 buf[];  // the chunk, then the stages of f32
  const long long piece = (chunk + PIECES - 1) / PIECES;
  if (threadIdx.x == 0) {
    for (int k = 0; k < PIECES; k++) sv::bulk_barrier_init(&bar[k]);
    for (int k = 0; k < PIECES; k++) {
      const long long b = k * piece, e = min(chunk, b + piece);
      if (e > b) sv::bulk_load(buf + b, x + blockIdx.x * chunk + b, (unsigned)((e - b) * 16), &bar[k]);
    }
  }
  __syncthreads();
  float m = -1e30f, s = 0.0f;
  for (int k = 0; k < PIECES; k++) {
    const long long b = k * piece, e = min(chunk, b + piece);
    if (e <= b) break;
    sv::bulk_barrier_wait(&bar[k]);
    for (long long j = b + threadIdx.x; j < e; j += BLOCK) online_add(buf[j], m, s);
  }
  const float2 row = row_scale<BLOCK, CLUSTER>(tmp, m, s);
  const float gm = row.x, inv = row.y;
  float4 *q = y + 2 * blockIdx.x * chunk;
  if (STORE < 2) {
    for (long long j = threadIdx.x; j < chunk; j += BLOCK) {
      if (STORE == 0) {
        convert8(buf[j], gm, inv, q + 2 * j);
      } else {
        float4 t[2];
        convert8(buf[j], gm, inv, t);
        __stcs(q + 2 * j, t[0]);
        __stcs(q + 2 * j + 1, t[1]);
      }
    }
  } else if (STORE == 2) {
    float4 *stage = reinterpret_cast<float4 *>(buf + chunk);  // two stages of STAGE floats
    const long long per = STAGE / 8;                           // vectors a stage
    int it = 0;
    for (long long b = 0; b < chunk; b += per, it++) {
      const long long e = min(chunk, b + per);
      float4 *sg = stage + (it & 1) * (STAGE / 4);
      if (it >= 2) {
        if (threadIdx.x == 0) sv::bulk_wait_read<1>();
        __syncthreads();
      }
      for (long long j = b + threadIdx.x; j < e; j += BLOCK) convert8(buf[j], gm, inv, sg + 2 * (j - b));
      sv::bulk_fence();
      __syncthreads();
      if (threadIdx.x == 0) {
        sv::bulk_store(q + 2 * b, sg, (unsigned)((e - b) * 32));
        sv::bulk_commit();
      }
    }
    if (threadIdx.x == 0) sv::bulk_wait_read<0>();
  } else {
    constexpr int WARPS = BLOCK / 32, VPL = STAGE / 256;  // vectors a lane per tile
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int SLOTS = STORE == 3 ? 2 : 1;  // STORE 4: one tile a warp, waited for before each reuse
    float4 *ring = reinterpret_cast<float4 *>(buf + chunk) + warp * SLOTS * (STAGE / 4);
    const long long per = STAGE / 8;  // vectors a tile
    int used = 0;
    for (long long b = warp * per; b < chunk; b += WARPS * per, used++) {
      const long long e = min(chunk, b + per);
      float4 *sg = ring_slot<SLOTS, STAGE / 4>(ring, used);
#pragma unroll
      for (int v = 0; v < VPL; v++) {
        const long long j = b + v * 32 + lane;
        if (j < e) convert8(buf[j], gm, inv, sg + 2 * (j - b));
      }
      tile_store(q + 2 * b, sg, (e - b) * 32);
    }
    if (lane == 0) sv::bulk_wait_read<0>();
  }
}

// read2_bulk: v5's shape (the chunk's online statistics from a first
// read, the cluster's exchange, the chunk again from L2) with the outputs
// written as tma_softmax's STORE 3 does: each warp converts tiles of 256
// tokens into a ring of RING 1 KB slots of its own and writes each by one
// bulk store. U tiles' loads in flight per warp.
template <int BLOCK, int U, int RING, bool CLUSTER>
__global__ void __launch_bounds__(BLOCK) read2_bulk(const uint4 *x, long long chunk, float4 *y) {
  using Reduce = cub::BlockReduce<float, BLOCK>;
  __shared__ typename Reduce::TempStorage tmp;
  extern __shared__ __align__(128) uint4 ring_raw[];
  const uint4 *p = x + blockIdx.x * chunk;
  const float2 t = chunk_online<BLOCK, 4>(p, chunk);
  const float2 row = row_scale<BLOCK, CLUSTER>(tmp, t.x, t.y);
  const float gm = row.x, inv = row.y;
  float4 *q = y + 2 * blockIdx.x * chunk;
  constexpr int WARPS = BLOCK / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float4 *ring = reinterpret_cast<float4 *>(ring_raw) + warp * RING * 64;  // RING slots of 64 float4
  const long long tiles = (chunk + 31) / 32;
  int used = 0;
  for (long long t = warp; t < tiles; t += (long long)WARPS * U) {
    uint4 u[U];
#pragma unroll
    for (int k = 0; k < U; k++) {
      const long long j = (t + k * WARPS) * 32 + lane;
      if (j < chunk) u[k] = __ldg(p + j);
    }
#pragma unroll
    for (int k = 0; k < U; k++, used++) {
      const long long tk = t + k * WARPS;
      if (tk >= tiles) break;
      float4 *slot = ring_slot<RING>(ring, used);
      const long long j = tk * 32 + lane, e = min(chunk, tk * 32 + 32);
      if (j < chunk) convert8(u[k], gm, inv, slot + 2 * lane);
      tile_store(q + 2 * tk * 32, slot, (e - tk * 32) * 32);
    }
  }
  if (lane == 0) sv::bulk_wait_read<0>();
}

// chunked_time times kern(x, chunk, y) (tma_softmax or read2_bulk: block
// b takes vectors [b * chunk, (b + 1) * chunk)) on rows of C chunks of a
// vocabulary of vocab (C divides its vectors), in clusters of C when
// cluster, with smem bytes of dynamic shared memory, and checks one
// output against 1/V (the pool's logits are all equal).
template <int BLOCK>
float chunked_time(void (*kern)(const uint4 *, long long, float4 *), size_t smem, bool cluster, int rows,
                   long long vocab, int c, uint4 *in, float4 *out, int sets) {
  const long long vectors = vocab / 8, chunk = vectors / c;
  check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  if (cluster) check(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = sv::cluster_config(rows * c, BLOCK, smem, cluster ? c : 1, attr);
  auto launch = [&](int s) {
    check(cudaLaunchKernelEx(&cfg, kern, (const uint4 *)(in + (size_t)s * rows * vectors), chunk,
                             out + (size_t)s * rows * vectors * 2));
  };
  const float t = median_us(launch, sets);
  check(cudaMemset(out, 0, 4 * vocab * rows));
  launch(0);
  float got;
  check(cudaMemcpy(&got, out + (size_t)(rows - 1) * vectors * 2, 4, cudaMemcpyDeviceToHost));
  const float want = cluster ? 1.0f / vocab : 1.0f / (vocab / c);
  if (fabsf(got - want) > 1e-3f * want) printf("  (check: got %g, want %g)\n", got, want);
  return t;
}

template <int BLOCK, int U, int RING, bool CLUSTER>
float read2_bulk_time(int rows, long long vocab, int c, uint4 *in, float4 *out, int sets) {
  return chunked_time<BLOCK>(read2_bulk<BLOCK, U, RING, CLUSTER>, (size_t)(BLOCK / 32) * RING * 1024, CLUSTER, rows,
                             vocab, c, in, out, sets);
}

template <int BLOCK, int PIECES, int STORE, bool CLUSTER, int STAGE>
float tma_time(int rows, long long vocab, int c, uint4 *in, float4 *out, int sets) {
  const size_t chunk_bytes = (size_t)(vocab / 8 / c) * 16;
  const size_t stages = STORE == 2   ? 2 * STAGE * 4
                        : STORE == 3 ? (BLOCK / 32) * 2 * STAGE * 4
                        : STORE == 4 ? (BLOCK / 32) * STAGE * 4
                                     : 0;
  return chunked_time<BLOCK>(tma_softmax<BLOCK, PIECES, STORE, CLUSTER, STAGE>, chunk_bytes + stages, CLUSTER, rows,
                             vocab, c, in, out, sets);
}

// for_each_softmax_shape calls f(rows, vocab, sets, floor_us) for the bench's
// softmax shapes of the bulk-copy probes (V=128256 at B=128 and 512,
// V=151936 at B=128), with the input sets the rotation past the L2 needs and
// the floor (bf16 read, f32 written) at copy bandwidth bw.
template <typename F>
void for_each_softmax_shape(size_t pool_in, size_t pool_out, size_t rotate, double bw, F f) {
  for (long long vocab : {128256LL, 151936LL}) {
    for (int rows : {128, 512}) {
      if (vocab != kVocab && rows != 128) continue;
      const size_t in_bytes = (size_t)rows * vocab * 2, out_bytes = (size_t)rows * vocab * 4;
      const int sets = std::max(1, std::min({(int)(pool_in / in_bytes), (int)(pool_out / out_bytes),
                                             (int)(rotate / in_bytes) + 1}));
      const float floor_us = (in_bytes + out_bytes) / bw * 1e6;
      printf("V=%lld B=%d floor %.2f us\n", vocab, rows, floor_us);
      f(rows, vocab, sets, floor_us);
    }
  }
}

int tma_probe(uint4 *in, float4 *out, size_t pool_in, size_t pool_out, size_t rotate, double bw) {
  for_each_softmax_shape(pool_in, pool_out, rotate, bw, [&](int rows, long long vocab, int sets, float floor_us) {
    for (int c : {4, 8, 16}) {
      const float t[] = {
          tma_time<256, 4, 2, true, 2048>(rows, vocab, c, in, out, sets),
          tma_time<256, 4, 2, true, 1024>(rows, vocab, c, in, out, sets),
          tma_time<256, 4, 2, true, 4096>(rows, vocab, c, in, out, sets),
          tma_time<256, 1, 2, true, 2048>(rows, vocab, c, in, out, sets),
          tma_time<256, 8, 2, true, 2048>(rows, vocab, c, in, out, sets),
          tma_time<512, 4, 2, true, 2048>(rows, vocab, c, in, out, sets),
          tma_time<128, 4, 2, true, 2048>(rows, vocab, c, in, out, sets),
          tma_time<256, 4, 3, true, 256>(rows, vocab, c, in, out, sets),
          tma_time<256, 4, 3, true, 512>(rows, vocab, c, in, out, sets),
          tma_time<128, 4, 3, true, 512>(rows, vocab, c, in, out, sets),
          tma_time<512, 4, 3, true, 256>(rows, vocab, c, in, out, sets),
          tma_time<256, 4, 3, false, 512>(rows, vocab, c, in, out, sets),
          tma_time<256, 4, 0, true, 0>(rows, vocab, c, in, out, sets),
          tma_time<256, 4, 1, true, 0>(rows, vocab, c, in, out, sets),
          tma_time<256, 1, 4, true, 256>(rows, vocab, c, in, out, sets),
          tma_time<256, 1, 4, true, 512>(rows, vocab, c, in, out, sets),
      };
      printf("  C=%2d | block stages: 256x4 s2048 %6.2f s1024 %6.2f s4096 %6.2f p1 %6.2f p8 %6.2f 512 %6.2f 128 %6.2f"
             " | warp stages: 256 s256 %6.2f s512 %6.2f 128 s512 %6.2f 512 s256 %6.2f | indep 256 s512 %6.2f"
             " | threads' stores: float4 %6.2f streaming %6.2f | one tile a warp: s256 %6.2f s512 %6.2f"
             " | best bulk cluster %.3fx\n",
             c, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[12], t[13], t[14],
             t[15], std::min({*std::min_element(t, t + 11), t[14], t[15]}) / floor_us);
    }
  });
  return 0;
}

// --- The queue shape (`bwprobe queue`): softmax with no cluster and no
// block that waits for its row: a grid of resident blocks takes tasks in
// order from a global counter. Task group i holds the statistics tasks of
// row i's C chunks (read the chunk, publish its (max, sum), count the
// row in), then the write tasks of row i - D (combine the row's C
// statistics, read the chunk again from L2, write it by bulk-stored warp
// tiles). A write task finds its row's statistics done, or nearly so,
// since they were handed out D groups before; statistics tasks never
// wait, so the spin of a write task cannot deadlock. The last block to
// leave zeroes the counters for the next launch.
template <int BLOCK, int RING>
__global__ void __launch_bounds__(BLOCK) queue_softmax(const uint4 *x, float4 *y, int rows, int C, long long chunk,
                                                      int D, float2 *part, unsigned *ready, unsigned *ctr) {
  using Reduce = cub::BlockReduce<float, BLOCK>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ int task;
  __shared__ float row_max, row_inv;
  extern __shared__ __align__(128) uint4 ring_raw[];
  constexpr int WARPS = BLOCK / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float4 *ring = reinterpret_cast<float4 *>(ring_raw) + warp * RING * 64;
  const long long vectors = chunk * C;
  const int total = 2 * C * (rows + D);
  int used = 0;
  for (;;) {
    if (threadIdx.x == 0) task = (int)atomicAdd(&ctr[0], 1u);
    __syncthreads();
    const int t = task;
    __syncthreads();
    if (t >= total) break;
    const int i = t / (2 * C), k = t % (2 * C);
    if (k < C) {  // statistics of chunk k of row i
      if (i >= rows) continue;
      const uint4 *p = x + i * vectors + k * chunk;
      const float2 ts = chunk_online<BLOCK, 4>(p, chunk);
      const float2 st = block_online<BLOCK>(tmp, ts.x, ts.y);
      if (threadIdx.x == 0) {
        part[i * C + k] = st;
        __threadfence();
        atomicAdd(&ready[i], 1u);
      }
      continue;
    }
    const int r = i - D, c = k - C;  // write chunk c of row r
    if (r < 0) continue;
    if (threadIdx.x < 32) {
      if (lane == 0) {
        unsigned n;
        do {
          asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(n) : "l"(&ready[r]) : "memory");
        } while (n < (unsigned)C);
      }
      __syncwarp();
      const float2 t = warp_combine(part + r * C, C);
      if (lane == 0) {
        row_max = t.x;
        row_inv = t.y;
      }
    }
    __syncthreads();
    const float gm = row_max, inv = row_inv;
    const uint4 *p = x + r * vectors + c * chunk;
    float4 *q = y + 2 * (r * vectors + c * chunk);
    const long long tiles = (chunk + 31) / 32;
    for (long long tt = warp; tt < tiles; tt += WARPS, used++) {
      const long long j = tt * 32 + lane, e = min(chunk, tt * 32 + 32);
      uint4 u;
      if (j < chunk) u = __ldg(p + j);
      float4 *slot = ring_slot<RING>(ring, used);
      if (j < chunk) convert8(u, gm, inv, slot + 2 * lane);
      tile_store(q + 2 * tt * 32, slot, (e - tt * 32) * 32);
    }
  }
  if (lane == 0) sv::bulk_wait_read<0>();
  if (threadIdx.x == 0 && atomicAdd(&ctr[1], 1u) == gridDim.x - 1) {  // the last block out
    ctr[0] = 0;
    ctr[1] = 0;
    for (int r = 0; r < rows; r++) ready[r] = 0;
    __threadfence();
  }
}

template <int BLOCK, int RING>
float queue_time(int rows, long long vocab, int c, int D, int per_sm, uint4 *in, float4 *out, int sets,
                 float2 *part, unsigned *ready, unsigned *ctr) {
  const long long vectors = vocab / 8, chunk = vectors / c;
  const size_t smem = (size_t)(BLOCK / 32) * RING * 1024;
  auto kern = queue_softmax<BLOCK, RING>;
  check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int fit = 0, sms = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kern, BLOCK, smem));
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = sms * std::min(fit, per_sm);
  auto launch = [&](int s) {
    kern<<<grid, BLOCK, smem>>>(in + (size_t)s * rows * vectors, out + (size_t)s * rows * vectors * 2, rows, c, chunk,
                                D, part, ready, ctr);
  };
  const float t = median_us(launch, sets);
  check(cudaMemset(out, 0, 4 * vocab * rows));
  launch(0);
  float got;
  check(cudaMemcpy(&got, out + (size_t)(rows - 1) * vectors * 2, 4, cudaMemcpyDeviceToHost));
  if (fabsf(got - 1.0f / vocab) > 1e-3f / vocab) printf("  (queue check: got %g, want %g)\n", got, 1.0f / vocab);
  return t;
}

int queue_probe(uint4 *in, float4 *out, size_t pool_in, size_t pool_out, size_t rotate, double bw) {
  float2 *part;
  unsigned *ready, *ctr;
  check(cudaMalloc(&part, 1 << 20));
  check(cudaMalloc(&ready, 1 << 16));
  check(cudaMalloc(&ctr, 64));
  check(cudaMemset(ready, 0, 1 << 16));
  check(cudaMemset(ctr, 0, 64));
  for_each_softmax_shape(pool_in, pool_out, rotate, bw, [&](int rows, long long vocab, int sets, float floor_us) {
    for (int c : {8, 16}) {
      for (int D : {2, 8, 24}) {
        const float t[] = {
            queue_time<256, 2>(rows, vocab, c, D, 8, in, out, sets, part, ready, ctr),
            queue_time<256, 4>(rows, vocab, c, D, 8, in, out, sets, part, ready, ctr),
            queue_time<256, 2>(rows, vocab, c, D, 4, in, out, sets, part, ready, ctr),
            queue_time<512, 2>(rows, vocab, c, D, 4, in, out, sets, part, ready, ctr),
        };
        printf("  C=%2d D=%2d | 256 R2 %6.2f R4 %6.2f 256 R2 4/SM %6.2f 512 R2 %6.2f | best %.3fx\n", c, D, t[0],
               t[1], t[2], t[3], *std::min_element(t, t + 4) / floor_us);
      }
    }
  });
  return 0;
}

int tma2_probe(uint4 *in, float4 *out, size_t pool_in, size_t pool_out, size_t rotate, double bw) {
  for_each_softmax_shape(pool_in, pool_out, rotate, bw, [&](int rows, long long vocab, int sets, float floor_us) {
    for (int c : {8, 16}) {
      const float t[] = {
          tma_time<256, 1, 3, true, 256>(rows, vocab, c, in, out, sets),
          read2_bulk_time<256, 2, 4, true>(rows, vocab, c, in, out, sets),
          read2_bulk_time<256, 4, 4, true>(rows, vocab, c, in, out, sets),
          read2_bulk_time<256, 4, 8, true>(rows, vocab, c, in, out, sets),
          read2_bulk_time<256, 2, 2, true>(rows, vocab, c, in, out, sets),
          read2_bulk_time<512, 2, 4, true>(rows, vocab, c, in, out, sets),
          read2_bulk_time<128, 4, 4, true>(rows, vocab, c, in, out, sets),
          read2_bulk_time<256, 4, 4, false>(rows, vocab, c, in, out, sets),
      };
      printf("  C=%2d | tma 256 s256 %6.2f | read2_bulk: 256 U2 R4 %6.2f U4 R4 %6.2f U4 R8 %6.2f U2 R2 %6.2f"
             " 512 U2 R4 %6.2f 128 U4 R4 %6.2f | indep 256 U4 R4 %6.2f | best cluster %.3fx\n",
             c, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], *std::min_element(t, t + 7) / floor_us);
    }
  });
  return 0;
}

int main(int argc, char **argv) {
  for (cudaEvent_t &e : events) check(cudaEventCreate(&e));
  const size_t pool_in = 1200ull << 20, pool_out = 2400ull << 20, rotate = 200ull << 20;  // 4x the L2
  uint4 *in;
  float4 *out;
  float *maxima;
  check(cudaMalloc(&in, pool_in));
  check(cudaMalloc(&out, pool_out));
  check(cudaMalloc(&maxima, 1 << 20));
  check(cudaMemset(in, 0x3f, pool_in));
  check(cudaMemset(out, 0, pool_out));
  const double bw = copy_bandwidth();
  printf("copy bandwidth %.3f TB/s\n", bw / 1e12);
  if (argc > 1 && std::string(argv[1]) == "split") return split_probe(in, out, pool_in, pool_out, rotate, bw);
  if (argc > 1 && std::string(argv[1]) == "tma") return tma_probe(in, out, pool_in, pool_out, rotate, bw);
  if (argc > 1 && std::string(argv[1]) == "tma2") return tma2_probe(in, out, pool_in, pool_out, rotate, bw);
  if (argc > 1 && std::string(argv[1]) == "queue") return queue_probe(in, out, pool_in, pool_out, rotate, bw);
  printf("empty launch 1x32: %.2f us\n", median_us([](int) { empty_kernel<<<1, 32>>>(nullptr); }, 1));
  printf("empty launch 528x256: %.2f us\n", median_us([](int) { empty_kernel<<<528, 256>>>(nullptr); }, 1));
  check(cudaFuncSetAttribute(read_max_cluster<256, 8>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (int rows : {1, 128, 512}) {
    const size_t in_bytes = (size_t)rows * kVocab * 2, out_bytes = (size_t)rows * kVocab * 4;
    // Enough input (and output) sets that the rotation exceeds the L2.
    const int sets_r = std::max(1, std::min((int)(pool_in / in_bytes), (int)(rotate / in_bytes) + 1));
    const int sets_w = std::max(1, std::min((int)(pool_out / out_bytes), (int)(rotate / out_bytes) + 1));
    auto src = [&](int s) { return in + (size_t)s * rows * kVectors; };
    auto dst = [&](int s) { return out + (size_t)s * rows * kVectors * 2; };
    for (int c : {1, 2, 4, 8, 16, 32}) {
      if ((long long)rows * c < 128 && rows > 1) continue;
      const long long chunk = (kVectors + c - 1) / c;  // vectors a block (the rows' ends approximate)
      const int blocks = rows * c;
      const float read256 = median_us([&](int s) { read_max<256, 8><<<blocks, 256>>>(src(s), chunk, maxima); }, sets_r);
      const float read512 = median_us([&](int s) { read_max<512, 4><<<blocks, 512>>>(src(s), chunk, maxima); }, sets_r);
      const float read1024 =
          median_us([&](int s) { read_max<1024, 4><<<blocks, 1024>>>(src(s), chunk, maxima); }, sets_r);
      float cluster256 = -1;  // clusters of 2..16 blocks only
      if (c > 1 && c <= 16) {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = sv::cluster_config(blocks, 256, 0, c, attr);
        cluster256 = median_us(
            [&](int s) {
              check(cudaLaunchKernelEx(&cfg, read_max_cluster<256, 8>, (const uint4 *)src(s), chunk, maxima));
            },
            sets_r);
      }
      const float conv256 = median_us([&](int s) { convert<256, 4><<<blocks, 256>>>(src(s), chunk, dst(s)); }, sets_w);
      const float conv512 = median_us([&](int s) { convert<512, 4><<<blocks, 512>>>(src(s), chunk, dst(s)); }, sets_w);
      const float two512 = median_us([&](int s) { read2<512, 4><<<blocks, 512>>>(src(s), chunk, dst(s)); }, sets_w);
      const float two256 = median_us([&](int s) { read2<256, 4><<<blocks, 256>>>(src(s), chunk, dst(s)); }, sets_w);
      printf("B=%4d C=%2d blocks=%5d | read 256x8 %7.2f 512x4 %7.2f 1024x4 %7.2f cluster256x8 %7.2f"
             " | convert 256 %7.2f 512 %7.2f | read2 512 %7.2f 256 %7.2f  (floors read %.2f conv %.2f)\n",
             rows, c, blocks, read256, read512, read1024, cluster256, conv256, conv512, two512, two256,
             in_bytes / bw * 1e6, (in_bytes + out_bytes) / bw * 1e6);
    }
  }
  return 0;
}
