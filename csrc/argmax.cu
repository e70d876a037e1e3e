// argmax.cu: the first index of each row's maximum.
//
// History (H100, bf16, V=128256; `sampviz bench`, 2026-11-22):
//
//   v1  rows split into chunks so that every SM streams whatever B is; per
//       chunk a (value, index, flags) partial from 16-byte loads (two in
//       flight per thread) compared element by element, then a second
//       kernel combined a row's chunks. B=128: 29.9 us (2.7x the floor),
//       B=512: 83.4 us (1.9x), B=1: 9.7 us. About 80 instructions per
//       16-byte vector and two launches.
//   v2  (this file) one comparison per vector: the largest element of 8
//       bf16 (or f16) comes from three packed __hmax2_nan and one __hmax_nan,
//       which also carry any NaN (a NaN makes the row -1 anyway), and only a
//       vector that beats the thread's best is searched for its first
//       index. Vectors are visited in increasing index order within a
//       thread, so a strict > keeps the first index. Four loads in flight
//       per thread. The chunks of a row are combined by the block that
//       finishes last (a counter per row, reset by that block): one launch.
//       B=512: 52.4 us (1.18x, 85% of the copy bandwidth), B=128: 19.9 us
//       (1.79x), B=1: 7.5 us. What is left at B=128 is a fixed ~8 us per
//       launch (launch, first-load latency, reductions, the last block's
//       combine) on an 11 us floor.
//
// Ties go to the lowest index everywhere: in a thread, in the block
// reduction and across chunks. Padded lanes start at (-Inf, INT_MAX) and
// never win; an all -Inf row stays at -Inf and gives -1. +Inf is an ordinary
// maximum unless the caller (sample's greedy rows) asks for it to be invalid.
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

}  // namespace

// launch_argmax is sv_argmax for callers inside the library (sample's greedy rows).
int launch_argmax(int dtype, const void *logits, int rows, int vocab, const int *row_idx, int n_idx, int flags,
                  int *tokens) {
  if (rows < 0 || vocab < 1) return set_error(SV_ERR_INVALID, "argmax: %d rows of %d tokens", rows, vocab);
  const int slots = row_idx ? n_idx : rows;
  if (slots <= 0) return SV_OK;
  if (slots > 65535) return set_error(SV_ERR_UNSUPPORTED, "argmax: %d rows in one launch", slots);
  // Enough chunks for about eight blocks per SM, none under 2048 tokens.
  const int want = (8 * device_sms() + slots - 1) / slots;
  int chunks = max(1, min(want, (vocab + 2047) / 2048));
  int chunk = (vocab + chunks - 1) / chunks;
  chunk = (chunk + 7) / 8 * 8;
  chunks = (vocab + chunk - 1) / chunk;
  void *ws = nullptr;
  int st = workspace(sizeof(ArgPartial) * (size_t)slots * chunks, &ws);
  if (st != SV_OK) return st;
  unsigned *count = nullptr;
  st = counters(slots, &count);
  if (st != SV_OK) return st;
  dim3 grid(chunks, slots);
  const int inf_invalid = (flags & SV_ARGMAX_INF_INVALID) != 0;
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
