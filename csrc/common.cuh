// common.cuh: what every kernel file shares: the error state behind
// sv_last_error, the library's stream, dtype loads, 16-byte vector loops,
// block reductions and the one-hot/NaN row writers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "sampviz.h"

namespace sv {

// ---------------------------------------------------------------------------
// Host side: status, errors, stream, workspace.

// set_error records msg for sv_last_error and returns status.
int set_error(int status, const char *fmt, ...);

// cuda_status maps a CUDA error to a status (sticky or not) and records it
// with the name of what failed.
int cuda_status(cudaError_t err, const char *what);

// stream is the library's one stream (created by sv_init).
cudaStream_t stream();

// device_sms is the multiprocessor count of the current device.
int device_sms();

// workspace returns a device scratch buffer of at least bytes, growing it
// when needed; launchers use it for partial results between kernels. The
// buffer is shared: launchers run one after another on one stream.
int workspace(size_t bytes, void **out);

// counters returns a device array of at least n zeroed 32-bit counters.
// Kernels that use them (the last block of a row counts the others in)
// leave them at zero again, so launches share them one after another.
int counters(int n, unsigned **out);

// split_row splits a row of vocab tokens into at most chunks chunks whose
// length is a multiple of 8 tokens (whole 16-byte vectors of 16-bit
// logits, so chunks after the first keep the row's alignment) and returns
// that length; chunks becomes the number of non-empty chunks.
inline int split_row(int vocab, int &chunks) {
  const int chunk = ((vocab + chunks - 1) / chunks + 7) / 8 * 8;
  chunks = (vocab + chunk - 1) / chunk;
  return chunk;
}

// flagged_grid is the grid of a full-row kernel (block threads, smem bytes
// of dynamic shared memory) that serves only the slots a fast kernel
// flagged (see flagged_slots): at most the blocks that are resident at
// once, and enough that each block has at most block slots.
inline int flagged_grid(const void *kernel, int block, int slots, size_t smem = 0) {
  int resident = 1;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, block, smem) != cudaSuccess || resident < 1)
    resident = 1;
  return max(min(slots, device_sms() * resident), (slots + block - 1) / block);
}

// skip_launch is asked by a launcher before it launches kernel variant
// (SV_VARIANT_*): in a dry run (sv_dry_run, for the GPU suite's coverage
// of the variants) it records the variant and says to skip the launch.
bool skip_launch(int variant);

// check_launch returns the status of the last launch.
inline int check_launch(const char *what) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_status(err, what);
  return SV_OK;
}

// Programmatic dependent launch (sm_90): a kernel launched with
// launch_after may start while the kernel before it on the stream is still
// running, once every block of that kernel has called pdl_trigger; it must
// call pdl_wait before it touches anything the earlier kernel writes (or
// reads), and pdl_wait returns once that kernel has finished and its
// writes are visible. Both are no-ops where there is no such dependency
// (and on sm_80). Used where a follow-up kernel has little to do (the
// full-row kernels after a fast kernel that served every row, the
// spec_verify chain), so that its launch hides behind the kernel before it.
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// pdl_supported says whether the current device takes launch_after's
// early start (compute capability 9.0 or newer), asked once.
bool pdl_supported();

// launch_after launches kernel, variant (SV_VARIANT_*) of its op (grid,
// block threads, smem bytes of dynamic shared memory) on the library's
// stream; with early, as a programmatic dependent of the kernel before it
// where the device supports it, which pays off when the kernel has little
// to do (its blocks sit resident, so a kernel with real work may start
// unevenly spread: the full-row kernels after a fast kernel take early
// only under SV_ALL_FAST). Without early it is the plain launch.
template <typename... Params, typename... Args>
int launch_after(int variant, bool early, void (*kernel)(Params...), dim3 grid, int block, size_t smem,
                 const char *what, Args... args) {
  if (skip_launch(variant)) return SV_OK;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream();
  cfg.attrs = &attr;
  cfg.numAttrs = early && pdl_supported() ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
  if (err != cudaSuccess) return cuda_status(err, what);
  return check_launch(what);
}

// params_* locate the six per-row arrays of the parameter buffer.
struct RowParams {
  const float *temperature;
  const int32_t *top_k;
  const float *top_p;
  const float *min_p;
  const uint64_t *seed;
  const uint64_t *offset;
};

inline RowParams row_params(uint64_t base, int rows) {
  const char *p = reinterpret_cast<const char *>(base);
  RowParams rp;
  rp.temperature = reinterpret_cast<const float *>(p);
  rp.top_k = reinterpret_cast<const int32_t *>(p + 4 * (size_t)rows);
  rp.top_p = reinterpret_cast<const float *>(p + 8 * (size_t)rows);
  rp.min_p = reinterpret_cast<const float *>(p + 12 * (size_t)rows);
  rp.seed = reinterpret_cast<const uint64_t *>(p + 16 * (size_t)rows);
  rp.offset = reinterpret_cast<const uint64_t *>(p + 24 * (size_t)rows);
  return rp;
}

// Dispatch turns the runtime dtype into the template type T for the body.
#define SV_DISPATCH_DTYPE(dtype, T, ...)                                     \
  switch (dtype) {                                                          \
    case SV_F32: {                                                          \
      using T = float;                                                      \
      __VA_ARGS__;                                                          \
    } break;                                                                \
    case SV_F16: {                                                          \
      using T = __half;                                                     \
      __VA_ARGS__;                                                          \
    } break;                                                                \
    case SV_BF16: {                                                         \
      using T = __nv_bfloat16;                                              \
      __VA_ARGS__;                                                          \
    } break;                                                                \
    default:                                                                \
      return ::sv::set_error(SV_ERR_INVALID, "unknown dtype %d", (int)dtype); \
  }

// ---------------------------------------------------------------------------
// Device side.

constexpr float kInf = __builtin_huge_valf();

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

// load_f32 reads element i of p through the read-only path.
template <typename T>
__device__ __forceinline__ float load_f32(const T *p, int64_t i) {
  return to_f32(__ldg(p + i));
}

// nan_f32 is the NaN kernels write for rows without a distribution; it is
// never the poison pattern 0x7fc00001 that the worker fills outputs with.
__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fffffff); }

// for_each_uint4 walks the elements [begin, end) of row (E: 2 or 4 bytes)
// in 16-byte loads where the row is aligned, UNROLL of them in flight per
// thread: vector(i0, u) for the 16 / sizeof(E) elements from i0 in u,
// scalar(i) for each element of the unaligned head and of the tail. It is
// the one walk under for_each_vector and patterns.cuh's for_each_bits.
template <typename E, int BLOCK, int UNROLL, typename Scalar, typename Vector>
__device__ __forceinline__ void for_each_uint4(const E *row, int begin, int end, Scalar &&scalar, Vector &&vector) {
  constexpr int N = 16 / sizeof(E);
  if (end <= begin) return;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(row + begin);
  const int head = min(end - begin, (int)(((16 - (addr & 15)) & 15) / sizeof(E)));
  for (int i = begin + threadIdx.x; i < begin + head; i += BLOCK) scalar(i);
  const int start = begin + head;
  const int nvec = (end - start) / N;
  const uint4 *vec = reinterpret_cast<const uint4 *>(row + start);
  for (int j0 = threadIdx.x; j0 < nvec; j0 += BLOCK * UNROLL) {
    uint4 u[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; k++)
      if (j0 + k * BLOCK < nvec) u[k] = __ldg(vec + j0 + k * BLOCK);
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      const int j = j0 + k * BLOCK;
      if (j < nvec) vector(start + j * N, u[k]);
    }
  }
  for (int i = start + nvec * N + threadIdx.x; i < end; i += BLOCK) scalar(i);
}

// for_each_vector calls f(i0, v, n) for the elements [begin, end) of row:
// n = 1 for the scalar head and tail, n = N (16 bytes) in between, with
// UNROLL vector loads in flight per thread.
template <typename T, int BLOCK, int UNROLL, typename F>
__device__ __forceinline__ void for_each_vector(const T *row, int begin, int end, F &&f) {
  constexpr int N = 16 / sizeof(T);
  for_each_uint4<T, BLOCK, UNROLL>(
      row, begin, end,
      [&](int i) {
        const float v[N] = {load_f32(row, i)};
        f(i, v, 1);
      },
      [&](int i0, const uint4 &u) {
        const T *e = reinterpret_cast<const T *>(&u);
        float v[N];
#pragma unroll
        for (int q = 0; q < N; q++) v[q] = to_f32(e[q]);
        f(i0, v, N);
      });
}

// for_each_vec calls f(i, x) for every element i in [begin, end) of row
// (x widened to float), through for_each_vector. Elements are visited in
// no particular order.
template <typename T, int BLOCK, int UNROLL, typename F>
__device__ __forceinline__ void for_each_vec(const T *row, int begin, int end, F &&f) {
  constexpr int N = 16 / sizeof(T);
  for_each_vector<T, BLOCK, UNROLL>(row, begin, end, [&](int i0, const float(&v)[N], int n) {
#pragma unroll
    for (int q = 0; q < N; q++)
      if (q < n) f(i0 + q, v[q]);
  });
}

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const {
    return fmaxf(a, b);
  }
};
struct OrOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a | b; }
};

// ArgBest is a (value, index) pair; better() orders by value, then by the
// lower index, so padded lanes (index INT32_MAX) never win a tie.
struct ArgBest {
  float v;
  int i;
};
__device__ __forceinline__ bool better(float v, int i, const ArgBest &b) {
  return v > b.v || (v == b.v && i < b.i);
}
struct ArgBestOp {
  __device__ __forceinline__ ArgBest operator()(const ArgBest &a,
                                                const ArgBest &b) const {
    return better(b.v, b.i, a) ? b : a;
  }
};

// vec_max returns the largest element of a 16-byte vector, or NaN when one
// of them is NaN (packed __hmax2_nan for 16-bit types).
__device__ __forceinline__ float vec_max(const uint4 &u, const float *) {
  const float4 f = *reinterpret_cast<const float4 *>(&u);
  const bool nan = (f.x != f.x) | (f.y != f.y) | (f.z != f.z) | (f.w != f.w);
  return nan ? nan_f32() : fmaxf(fmaxf(f.x, f.y), fmaxf(f.z, f.w));
}
__device__ __forceinline__ float vec_max(const uint4 &u, const __nv_bfloat16 *) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
  const __nv_bfloat162 a = __hmax2_nan(__hmax2_nan(h[0], h[1]), __hmax2_nan(h[2], h[3]));
  return __bfloat162float(__hmax_nan(__low2bfloat16(a), __high2bfloat16(a)));
}
__device__ __forceinline__ float vec_max(const uint4 &u, const __half *) {
  const __half2 *h = reinterpret_cast<const __half2 *>(&u);
  const __half2 a = __hmax2_nan(__hmax2_nan(h[0], h[1]), __hmax2_nan(h[2], h[3]));
  return __half2float(__hmax_nan(__low2half(a), __high2half(a)));
}

// scan_max folds this thread's share of elements [begin, end) of row x (a
// block of BLOCK threads splits them) into best, the first index of the
// maximum, and sets nan when one of them is NaN. One comparison per 16-byte
// vector (its max), UNROLL vectors in flight, and a search for the first
// index only in vectors that beat the thread's best: a thread visits its
// vectors in increasing index order, so strict > keeps the first index.
// argmax (over a chunk of a row) and row_stat (over a whole row) share it;
// the block reduction of best and nan is theirs.
template <typename T, int BLOCK, int UNROLL>
__device__ __forceinline__ void scan_max(const T *x, int begin, int end, ArgBest &best, int &nan) {
  constexpr int N = 16 / sizeof(T);
  auto scalar = [&](int i) {
    const float v = load_f32(x, i);
    if (v != v)
      nan = 1;
    else if (better(v, i, best))
      best = ArgBest{v, i};
  };
  if (end <= begin) return;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(x + begin);
  const int head = min(end - begin, (int)(((16 - (addr & 15)) & 15) / sizeof(T)));
  for (int i = begin + threadIdx.x; i < begin + head; i += BLOCK) scalar(i);
  const int start = begin + head;
  const int nvec = (end - start) / N;
  const uint4 *vec = reinterpret_cast<const uint4 *>(x + start);
  for (int j0 = threadIdx.x; j0 < nvec; j0 += BLOCK * UNROLL) {
    uint4 u[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; k++)
      if (j0 + k * BLOCK < nvec) u[k] = __ldg(vec + j0 + k * BLOCK);
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
      const int j = j0 + k * BLOCK;
      if (j >= nvec) break;
      const float m = vec_max(u[k], (const T *)nullptr);
      if (m != m) {
        nan = 1;
      } else if (m > best.v) {
        const T *e = reinterpret_cast<const T *>(&u[k]);
        int q = N - 1;
#pragma unroll
        for (int r = N - 1; r >= 0; r--)
          if (to_f32(e[r]) == m) q = r;
        best = ArgBest{m, start + j * N + q};
      }
    }
  }
  for (int i = start + nvec * N + threadIdx.x; i < end; i += BLOCK) scalar(i);
}

// Reduce is the shared storage and helpers for block-wide reductions whose
// result every thread receives. Each helper synchronises before returning,
// so the storage can be reused by the next call.
template <int BLOCK>
struct Reduce {
  union Storage {
    typename cub::BlockReduce<float, BLOCK>::TempStorage f;
    typename cub::BlockReduce<double, BLOCK>::TempStorage d;
    typename cub::BlockReduce<int, BLOCK>::TempStorage i;
    typename cub::BlockReduce<unsigned long long, BLOCK>::TempStorage u;
    typename cub::BlockReduce<ArgBest, BLOCK>::TempStorage a;
    typename cub::BlockScan<unsigned long long, BLOCK>::TempStorage scan;
  };
  struct Shared {
    Storage s;
    float f;
    int i;
    unsigned long long u;
    double d;
    ArgBest a;
  };

  // broadcast hands thread 0's r to every thread of the block through slot.
  template <typename V>
  static __device__ __forceinline__ V broadcast(V &slot, V r) {
    if (threadIdx.x == 0) slot = r;
    __syncthreads();
    r = slot;
    __syncthreads();
    return r;
  }

  static __device__ __forceinline__ float max(Shared &sh, float v) {
    return broadcast(sh.f, cub::BlockReduce<float, BLOCK>(sh.s.f).Reduce(v, MaxOp()));
  }
  static __device__ __forceinline__ int any(Shared &sh, int v) {
    return broadcast(sh.i, cub::BlockReduce<int, BLOCK>(sh.s.i).Reduce(v, OrOp()));
  }
  static __device__ __forceinline__ int sum(Shared &sh, int v) {
    return broadcast(sh.i, cub::BlockReduce<int, BLOCK>(sh.s.i).Sum(v));
  }
  static __device__ __forceinline__ unsigned long long sum(Shared &sh, unsigned long long v) {
    return broadcast(sh.u, cub::BlockReduce<unsigned long long, BLOCK>(sh.s.u).Sum(v));
  }
  static __device__ __forceinline__ double sum(Shared &sh, double v) {
    return broadcast(sh.d, cub::BlockReduce<double, BLOCK>(sh.s.d).Sum(v));
  }
  static __device__ __forceinline__ ArgBest argbest(Shared &sh, ArgBest v) {
    return broadcast(sh.a, cub::BlockReduce<ArgBest, BLOCK>(sh.s.a).Reduce(v, ArgBestOp()));
  }
};

}  // namespace sv
