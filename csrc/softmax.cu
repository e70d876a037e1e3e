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
//   v3  (this file) per-vector online statistics: the max of a 16-byte
//       vector first (no branches), one rescale per vector when it grows,
//       then 8 independent exp2 (MUFU.EX2, ~5 instructions per token in
//       all), and the same in the write pass. T = 0 rows take a separate
//       argmax pass, so the fast pass tracks no index. B=128: 57.5 us
//       (1.72x), B=512: 222 us (1.67x), B=1: 10.5 us.
//       Tried and reverted: 1024-thread blocks (B=128 64.5 us) and the split
//       path for 66 <= B < 264 (B=128 71.8 us). ncu at B=128: one block per
//       SM, 48% occupancy, DRAM at 50-56%: the row kernel cannot keep enough
//       loads in flight with one row per SM.
//
// Numerics: softmax is not bit for bit (docs/SEMANTICS.md): the outputs are
// exp2((x - m) * log2(e)/T) / S with the hardware exp2 (relative error
// ~2^-22), far inside the float32 tolerance (the judge checks every row).
// The scale comes after the max (x - m <= 0), so T = 1e-4 cannot overflow.
// T = 0 writes one-hot at the first maximum; rows with NaN or +Inf, or all
// -Inf, write NaN. In-place (f32) works because each thread reads its
// elements before it writes them.
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

// for_each_vector calls f(i0, v, n) for the elements [begin, end) of row:
// n = 1 for the scalar head and tail, n = N (16 bytes) in between, with
// UNROLL vector loads in flight per thread.
template <typename T, int BLOCK, int UNROLL, typename F>
__device__ __forceinline__ void for_each_vector(const T *row, int begin, int end, F &&f) {
  constexpr int N = 16 / sizeof(T);
  if (end <= begin) return;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(row + begin);
  const int head = min(end - begin, (int)(((16 - (addr & 15)) & 15) / sizeof(T)));
  for (int i = begin + threadIdx.x; i < begin + head; i += BLOCK) {
    const float v[N] = {load_f32(row, i)};
    f(i, v, 1);
  }
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
      if (j < nvec) {
        const T *e = reinterpret_cast<const T *>(&u[k]);
        float v[N];
#pragma unroll
        for (int q = 0; q < N; q++) v[q] = to_f32(e[q]);
        f(start + j * N, v, N);
      }
    }
  }
  for (int i = start + nvec * N + threadIdx.x; i < end; i += BLOCK) {
    const float v[N] = {load_f32(row, i)};
    f(i, v, 1);
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

constexpr int kSoftmaxBlock = 512;  // split kernels
constexpr int kRowBlock = 512;      // one block per row (1024 measured slower: 64.5 vs 58 us)
constexpr int kCacheVocab = 16384;  // rows up to this many tokens stay in shared memory

}  // namespace

int launch_softmax(int dtype, const void *logits, int rows, int vocab, const float *temperature, float *probs) {
  if (rows < 0 || vocab < 1) return set_error(SV_ERR_INVALID, "softmax: %d rows of %d tokens", rows, vocab);
  if (rows == 0) return SV_OK;
  if (logits == probs && dtype != SV_F32) return set_error(SV_ERR_INVALID, "softmax: in-place needs f32 logits");
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
  int chunks = min((4 * sms + rows - 1) / rows, (vocab + 2047) / 2048);
  if (chunks < 1) chunks = 1;
  int chunk = (vocab + chunks - 1) / chunks;
  chunk = (chunk + 7) / 8 * 8;
  chunks = (vocab + chunk - 1) / chunk;
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
