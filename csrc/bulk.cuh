// bulk.cuh: the SM's bulk copy engine (sm_90, PTX 8.0's cp.async.bulk)
// between global and shared memory. One thread issues a copy of any
// multiple of 16 bytes (both addresses 16-byte aligned) and goes on: a
// load completes on an mbarrier in shared memory, stores are tracked per
// issuing thread in bulk groups. Kernels use it where threads' own loads
// or stores measured slower: the chunks softmax writes (the probe's
// `bwprobe tma`, csrc/dev) and the zeros of a filtered row (patterns.cuh).
//
// On sm_80 every helper is empty: callers keep their bulk paths behind
// the same __CUDA_ARCH__ guard, or (bulk_store's callers) test it first.
#pragma once

namespace sv {

// bulk_store copies bytes (a multiple of 16) from shared memory src to
// global dst (both 16-byte aligned), in the calling thread's bulk group;
// bulk_fence makes the calling thread's shared-memory writes visible to
// later bulk copies (before the barrier that hands them to the issuing
// thread); bulk_commit closes the thread's current bulk group;
// bulk_wait_read<N> waits until at most N of the thread's committed groups
// still read their shared memory (so it may be written again, or freed);
// bulk_wait commits and waits until every store is done.
__device__ __forceinline__ void bulk_store(void *dst, const void *src, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
               "r"((unsigned)__cvta_generic_to_shared(src)), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
#endif
}
__device__ __forceinline__ void bulk_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

// A bulk load completes on an mbarrier (8 bytes of shared memory):
// bulk_barrier_init makes one for a single expected arrival (call from
// one thread, then a block barrier before anyone waits on it);
// bulk_load arrives on it expecting bytes and copies bytes (a multiple of
// 16) from global src to shared dst (both 16-byte aligned): one bulk_load
// per barrier and use; bulk_barrier_wait returns once the bytes have
// landed, and makes them visible to the calling thread (phase 0: each
// barrier is used once).
__device__ __forceinline__ void bulk_barrier_init(unsigned long long *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_load(void *dst, const void *src, unsigned bytes, unsigned long long *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   (unsigned)__cvta_generic_to_shared(dst)),
               "l"(src), "r"(bytes), "r"(b)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_barrier_wait(unsigned long long *bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(b)
                 : "memory");
#endif
}

}  // namespace sv
