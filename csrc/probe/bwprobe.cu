// bwprobe.cu: what simple kernels reach on the bench's shapes (bf16,
// V=128256), so that a kernel's time can be read against what is reachable
// and not only against the bandwidth floor: an empty launch, a pure read
// (the max of every row chunk, as argmax reads), a read-2-write-4
// conversion (softmax's traffic in one read), and a two-read conversion
// (statistics, then the chunk again from L2 and written, as softmax v5).
// Rows are split into C chunks of one block each, C = 1..32, with 256,
// 512 and 1024 threads. Same timing method as `sampviz bench`: a spin
// kernel first, events around each launch, the median of 100 after 10
// warm-ups, inputs rotated past 4x the L2. Not part of the library:
// `make gpu-probe` builds and runs it on the GPU machine (docs/PERF.md).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include <algorithm>
namespace cg = cooperative_groups;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1);} } while (0)

struct FMax { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
__global__ void spin(long long ns) { long long t0 = clock64(); while (clock64() - t0 < ns * 2) {} }
__global__ void empty_k(int *o) { if (o && threadIdx.x == 1234567) o[0] = 1; }

__device__ __forceinline__ float vmax(const uint4 &u) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
  const __nv_bfloat162 a = __hmax2_nan(__hmax2_nan(h[0], h[1]), __hmax2_nan(h[2], h[3]));
  return __bfloat162float(__hmax_nan(__low2bfloat16(a), __high2bfloat16(a)));
}
__device__ __forceinline__ float ex2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }

// chunk_max is this thread's max over its vectors of a chunk of chunk vectors.
template <int BLOCK, int U>
__device__ __forceinline__ float chunk_max(const uint4 *p, long long chunk) {
  float m = -1e30f;
  for (long long j = threadIdx.x; j < chunk; j += (long long)BLOCK * U) {
    uint4 u[U];
#pragma unroll
    for (int k = 0; k < U; k++) if (j + k * BLOCK < chunk) u[k] = __ldg(p + j + k * BLOCK); else u[k] = make_uint4(0xff80ff80u,0xff80ff80u,0xff80ff80u,0xff80ff80u);
#pragma unroll
    for (int k = 0; k < U; k++) m = fmaxf(m, vmax(u[k]));
  }
  return m;
}

// chunk: vectors (8 bf16) per block; block b reads vectors [b*chunk, (b+1)*chunk).
template <int BLOCK, int U>
__global__ void __launch_bounds__(BLOCK) read_max(const uint4 *x, long long chunk, float *out) {
  float m = chunk_max<BLOCK, U>(x + blockIdx.x * chunk, chunk);
  typedef cub::BlockReduce<float, BLOCK> R;
  __shared__ typename R::TempStorage t;
  m = R(t).Reduce(m, FMax());
  if (threadIdx.x == 0) out[blockIdx.x] = m;
}
template <int BLOCK, int U>
__global__ void __launch_bounds__(BLOCK) read_max_cluster(const uint4 *x, long long chunk, float *out) {
  cg::cluster_group cl = cg::this_cluster();
  float m = chunk_max<BLOCK, U>(x + blockIdx.x * chunk, chunk);
  typedef cub::BlockReduce<float, BLOCK> R;
  __shared__ typename R::TempStorage t;
  __shared__ float slot[16];
  m = R(t).Reduce(m, FMax());
  cl.sync();
  if (threadIdx.x == 0) { float *r = cl.map_shared_rank(slot, 0); r[cl.block_rank()] = m; }
  cl.sync();
  if (cl.block_rank() == 0 && threadIdx.x == 0) { float a = slot[0]; for (int i = 1; i < (int)cl.num_blocks(); i++) a = fmaxf(a, slot[i]); out[blockIdx.x] = a; }
}
// write_chunk writes ex2(x - m) * inv as f32 for a chunk of chunk vectors.
template <int BLOCK, int U>
__device__ __forceinline__ void write_chunk(const uint4 *p, float4 *q, long long chunk, float m, float inv) {
  for (long long j = threadIdx.x; j < chunk; j += (long long)BLOCK * U) {
    uint4 u[U];
#pragma unroll
    for (int k = 0; k < U; k++) if (j + k * BLOCK < chunk) u[k] = __ldg(p + j + k * BLOCK);
#pragma unroll
    for (int k = 0; k < U; k++) if (j + k * BLOCK < chunk) {
      const __nv_bfloat16 *e = reinterpret_cast<const __nv_bfloat16 *>(&u[k]);
      float o[8];
#pragma unroll
      for (int r = 0; r < 8; r++) o[r] = ex2(__bfloat162float(e[r]) - m) * inv;
      q[2 * (j + k * BLOCK)] = make_float4(o[0], o[1], o[2], o[3]);
      q[2 * (j + k * BLOCK) + 1] = make_float4(o[4], o[5], o[6], o[7]);
    }
  }
}
// convert: bf16 -> f32 ex2(x - 1), one read one write.
template <int BLOCK, int U>
__global__ void __launch_bounds__(BLOCK) convert(const uint4 *x, long long chunk, float4 *y) {
  write_chunk<BLOCK, U>(x + blockIdx.x * chunk, y + 2 * blockIdx.x * chunk, chunk, 1.0f, 1.0f);
}
// read2: pass 1 max+sum over the chunk, block reduce, pass 2 re-read (L2) and write.
template <int BLOCK, int U>
__global__ void __launch_bounds__(BLOCK) read2(const uint4 *x, long long chunk, float4 *y) {
  const uint4 *p = x + blockIdx.x * chunk;
  float4 *q = y + 2 * blockIdx.x * chunk;
  float m = -1e30f, s = 0.f;
  for (long long j = threadIdx.x; j < chunk; j += (long long)BLOCK * U) {
    uint4 u[U];
#pragma unroll
    for (int k = 0; k < U; k++) if (j + k * BLOCK < chunk) u[k] = __ldg(p + j + k * BLOCK); else u[k] = make_uint4(0xff80ff80u,0xff80ff80u,0xff80ff80u,0xff80ff80u);
#pragma unroll
    for (int k = 0; k < U; k++) {
      const float vm = vmax(u[k]);
      if (vm > m) { s *= ex2(m - vm); m = vm; }
      const __nv_bfloat16 *e = reinterpret_cast<const __nv_bfloat16 *>(&u[k]);
      float a = 0.f;
#pragma unroll
      for (int r = 0; r < 8; r++) a += ex2(__bfloat162float(e[r]) - m);
      s += a;
    }
  }
  typedef cub::BlockReduce<float, BLOCK> R;
  __shared__ typename R::TempStorage t;
  __shared__ float ms, ss;
  float bm = R(t).Reduce(m, FMax());
  if (threadIdx.x == 0) ms = bm;
  __syncthreads();
  bm = ms;
  float bs = R(t).Sum(s * ex2(m - bm));
  if (threadIdx.x == 0) ss = 1.0f / bs;
  __syncthreads();
  write_chunk<BLOCK, U>(p, q, chunk, bm, ss);
}

static cudaEvent_t ev[202];
template <typename F>
float timeit(F launch, int sets) {
  std::vector<float> t;
  for (int i = 0; i < 10; i++) launch(i % sets);
  spin<<<1, 1>>>(3000000);
  for (int i = 0; i < 100; i++) { CK(cudaEventRecord(ev[2 * i])); launch(i % sets); CK(cudaEventRecord(ev[2 * i + 1])); }
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  for (int i = 0; i < 100; i++) { float ms; CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1])); t.push_back(ms * 1000); }
  std::sort(t.begin(), t.end());
  return t[50];
}

int main() {
  for (int i = 0; i < 202; i++) CK(cudaEventCreate(&ev[i]));
  const long long V = 128256, NV = V / 8;
  const size_t pool_in = 1200ull << 20, pool_out = 2400ull << 20;
  uint4 *in; float4 *outp; float *red;
  CK(cudaMalloc(&in, pool_in)); CK(cudaMalloc(&outp, pool_out)); CK(cudaMalloc(&red, 1 << 20));
  CK(cudaMemset(in, 0x3f, pool_in)); CK(cudaMemset(outp, 0, pool_out));
  double bw = 0;  // copy bandwidth, bytes read + written per second
  {
    float ms; void *a, *b; CK(cudaMalloc(&a, 512 << 20)); CK(cudaMalloc(&b, 512 << 20));
    std::vector<float> t;
    for (int i = 0; i < 12; i++) { CK(cudaEventRecord(ev[0])); CK(cudaMemcpyAsync(b, a, 512 << 20, cudaMemcpyDeviceToDevice)); CK(cudaEventRecord(ev[1])); CK(cudaEventSynchronize(ev[1])); CK(cudaEventElapsedTime(&ms, ev[0], ev[1])); if (i >= 2) t.push_back(ms); }
    std::sort(t.begin(), t.end());
    bw = 2.0 * (512 << 20) / (t[5] * 1e-3);
    printf("copy bandwidth %.3f TB/s\n", bw / 1e12);
    cudaFree(a); cudaFree(b);
  }
  float te = timeit([&](int) { empty_k<<<1, 32>>>(nullptr); }, 1);
  printf("empty launch 1x32: %.2f us\n", te);
  te = timeit([&](int) { empty_k<<<528, 256>>>(nullptr); }, 1);
  printf("empty launch 528x256: %.2f us\n", te);
  for (int B : {1, 128, 512}) {
    const size_t in_bytes = (size_t)B * V * 2, out_bytes = (size_t)B * V * 4;
    const int sets_r = std::max(1, std::min((int)(pool_in / in_bytes), (int)((200ull << 20) / in_bytes) + 1));
    const int sets_w = std::max(1, std::min((int)(pool_out / out_bytes), (int)((200ull << 20) / out_bytes) + 1));
    for (int C : {1, 2, 4, 8, 16, 32}) {
      if ((long long)B * C < 128 && B > 1) continue;
      const long long chunk = (NV + C - 1) / C;  // vectors per block (rows padded: approximate)
      const int blocks = B * C;
      auto rin = [&](int s) { return in + (size_t)s * B * NV; };
      float t1 = timeit([&](int s) { read_max<256, 8><<<blocks, 256>>>(rin(s % sets_r), chunk, red); }, sets_r);
      float t2 = timeit([&](int s) { read_max<512, 4><<<blocks, 512>>>(rin(s % sets_r), chunk, red); }, sets_r);
      float t3 = timeit([&](int s) { read_max<1024, 4><<<blocks, 1024>>>(rin(s % sets_r), chunk, red); }, sets_r);
      float t4 = -1;
      if (C <= 16 && C > 1) {
        cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute at; at.id = cudaLaunchAttributeClusterDimension; at.val.clusterDim.x = C; at.val.clusterDim.y = 1; at.val.clusterDim.z = 1;
        cfg.gridDim = dim3(blocks); cfg.blockDim = dim3(256); cfg.attrs = &at; cfg.numAttrs = 1;
        CK(cudaFuncSetAttribute(read_max_cluster<256, 8>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        t4 = timeit([&](int s) { CK(cudaLaunchKernelEx(&cfg, read_max_cluster<256, 8>, (const uint4 *)rin(s % sets_r), chunk, red)); }, sets_r);
      }
      auto wout = [&](int s) { return outp + (size_t)s * B * NV * 2; };
      float c1 = timeit([&](int s) { convert<256, 4><<<blocks, 256>>>(rin(s % sets_w), chunk, wout(s % sets_w)); }, sets_w);
      float c2 = timeit([&](int s) { convert<512, 4><<<blocks, 512>>>(rin(s % sets_w), chunk, wout(s % sets_w)); }, sets_w);
      float r1 = timeit([&](int s) { read2<512, 4><<<blocks, 512>>>(rin(s % sets_w), chunk, wout(s % sets_w)); }, sets_w);
      float r2 = timeit([&](int s) { read2<256, 4><<<blocks, 256>>>(rin(s % sets_w), chunk, wout(s % sets_w)); }, sets_w);
      printf("B=%4d C=%2d blocks=%5d | read 256x8 %7.2f 512x4 %7.2f 1024x4 %7.2f cluster256x8 %7.2f | convert 256 %7.2f 512 %7.2f | read2 512 %7.2f 256 %7.2f  (floors read %.2f conv %.2f)\n",
             B, C, blocks, t1, t2, t3, t4, c1, c2, r1, r2, in_bytes / bw * 1e6, (in_bytes + out_bytes) / bw * 1e6);
    }
  }
  return 0;
}
