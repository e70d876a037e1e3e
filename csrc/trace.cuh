// trace.cuh: phase stamps for `make gpu-trace` (csrc/probe/trace.cu), which
// times the steps of one launch from inside the kernel, where the bench
// sees only the whole launch. Built with -DSV_TRACE, SV_MARK(id) stores,
// from thread 0 of a block, the SM clock and the global timer, and
// SV_COUNT(id, v) stores a count; only the blocks of grid row 0 with
// blockIdx.x < kTraceBlocks write, kTraceSlots slots each. The library's
// own build compiles both to nothing: they never cost the product time.
// Each translation unit has its own buffer; renorm.cu reads its out
// (sv_trace_read), so only renorm's kernels are traced.
//
// The ids (csrc/probe/trace.cu names them): in every block of fastrow.cuh's
// fast path, 0 its start, 1 the first tile's theta, 2 its scan done, 3 its
// zeros written; in the row's finishing block, 4 arrived, 5 candidates
// merged, 6 row max, 7 k-th largest, 8 top-k set kept, 9 ranked, 10
// filtered, 11 ordered by index, then renorm's 12 sum and 13 outputs
// written. Counts: 20 candidates merged, 21 the top-k set, 22 kept. In
// renorm's full-row pattern path (patterns.cuh): 14 the row's start, 16
// counted, 17 listed, 18 weighed, 19 filtered (key floor and quads), 23
// summed, 24 written; count 25 the distinct values.
#pragma once

// SV_TRACE_WORDS is the buffer's size in 64-bit words (a literal: nvcc 13
// copies a __device__ array's bound into host code outside the namespace).
#define SV_TRACE_WORDS 4096

namespace sv {

#ifdef SV_TRACE
constexpr int kTraceBlocks = 64;
constexpr int kTraceSlots = 32;
static_assert(kTraceBlocks * kTraceSlots * 2 == SV_TRACE_WORDS, "trace buffer size");
static __device__ unsigned long long trace_buf[SV_TRACE_WORDS];

__device__ __forceinline__ void trace_put(int id, unsigned long long clock, unsigned long long timer) {
  if (threadIdx.x != 0 || blockIdx.y != 0 || blockIdx.x >= kTraceBlocks) return;
  trace_buf[(blockIdx.x * kTraceSlots + id) * 2] = clock;
  trace_buf[(blockIdx.x * kTraceSlots + id) * 2 + 1] = timer;
}
__device__ __forceinline__ unsigned long long trace_timer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define SV_MARK(id) ::sv::trace_put((id), clock64(), ::sv::trace_timer())
#define SV_COUNT(id, v) ::sv::trace_put((id), (unsigned long long)(v), 0)
#else
#define SV_MARK(id) ((void)0)
#define SV_COUNT(id, v) ((void)0)
#endif

}  // namespace sv
