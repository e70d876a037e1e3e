// cluster.cuh: what the sm_90 row kernels (argmax, softmax) share to split a
// row over a thread block cluster: which path the device takes, the cluster
// barrier in its split form, stores and adds into a peer block's shared
// memory, and the host side of a cluster launch (kernel attributes, how many
// clusters fit at once, cudaLaunchKernelEx).
//
// The device helpers exist only in the sm_90 pass (__CUDA_ARCH__ >= 900);
// kernels that use them keep their body inside the same guard, and the host
// launches them only where cluster_path() says so. The few that fastrow.cuh's
// cluster rows call are also declared elsewhere, where they trap: the fast
// kernels' cluster variant (a template flag) is compiled empty in the sm_80
// pass (kSm90Pass), but the code it shares with the others must still
// compile there.
#pragma once

#include <cooperative_groups.h>

#include <utility>

#include "common.cuh"

namespace sv {

// kMaxCluster is the largest cluster the row kernels use (16 needs the
// non-portable cluster size attribute; 8 is the portable limit).
constexpr int kMaxCluster = 16;
constexpr int kPortableCluster = 8;

// cluster_path says whether the current device runs the cluster kernels
// (compute capability 9.0 or newer). The library binds one device in
// sv_init, so the answer is queried once; a failed query means no.
inline bool cluster_path() {
  static const int major = [] {
    int dev = 0, m = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      return 0;
    }
    return m;
  }();
  return major >= 9;
}

// kSm90Pass is false in the sm_80 device pass and true in the sm_90 pass
// (and on the host). Kernel variants that only an sm_90 device launches
// (the cluster and pattern variants of the fast and full-row kernels) keep
// their bodies behind it, so the sm_80 pass compiles them empty rather
// than compiling code that never runs there; the host checks sm90_binary
// before it launches one.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr bool kSm90Pass = false;
#else
constexpr bool kSm90Pass = true;
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// cluster_arrive and cluster_wait are the two halves of the cluster barrier
// (cluster.sync() is both in a row): arrive releases this thread's earlier
// writes, shared memory of peers included; wait returns once every thread
// of the cluster has arrived and acquires their writes. Every thread of
// every block calls them, alternately, the same number of times (the
// forms without .aligned: a warp need not be converged).
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait;" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// cluster_rank is this block's rank in its cluster, cluster_blocks the
// number of blocks of the cluster (special registers read directly: the
// cooperative_groups calls cost spills with nvcc 11.8's ptxas).
__device__ __forceinline__ int cluster_rank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return (int)r;
}
__device__ __forceinline__ int cluster_blocks() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return (int)r;
}

// store_peer writes 8 bytes (v) into the shared memory of block rank of the
// cluster, at the address that local (8-byte aligned, in this block's
// shared memory) has in this block: distributed shared memory, which
// cooperative_groups' map_shared_rank also maps (mapa).
__device__ __forceinline__ void store_peer(const void *local, int rank, unsigned long long v) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(local);
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(a), "r"(rank));
  asm volatile("st.shared::cluster.u64 [%0], %1;" ::"r"(remote), "l"(v) : "memory");
}

// store_peer_f32 is store_peer for 4 bytes (local 4-byte aligned).
__device__ __forceinline__ void store_peer_f32(const void *local, int rank, float v) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(local);
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(a), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}

// peer_address is the address, in the cluster's shared memory window, of
// what local (in this block's shared memory) is in block rank (mapa);
// store_peer_u32 writes 4 bytes there, add_peer adds to them and returns
// what they held, and count_peer adds without waiting for the answer (the
// reduction form).
__device__ __forceinline__ unsigned peer_address(const void *local, int rank) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(local);
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(a), "r"(rank));
  return remote;
}
__device__ __forceinline__ void store_peer_u32(unsigned remote, unsigned v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(remote), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned add_peer(unsigned remote, unsigned v) {
  unsigned old;
  asm volatile("atom.shared::cluster.add.u32 %0, [%1], %2;" : "=r"(old) : "r"(remote), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ void count_peer(unsigned remote, unsigned v) {
  asm volatile("red.shared::cluster.add.u32 [%0], %1;" ::"r"(remote), "r"(v) : "memory");
}
// load_peer_v4 reads 16 bytes at a peer_address (16-byte aligned).
__device__ __forceinline__ uint4 load_peer_v4(unsigned remote) {
  uint4 v;
  asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

// pack is an ArgBest as the 8 bytes store_peer writes (its memory layout).
__device__ __forceinline__ unsigned long long pack(const ArgBest &b) {
  return (unsigned long long)__float_as_uint(b.v) | (unsigned long long)(unsigned)b.i << 32;
}

#else
__device__ __forceinline__ void cluster_arrive() { __trap(); }
__device__ __forceinline__ void cluster_wait() { __trap(); }
__device__ __forceinline__ unsigned peer_address(const void *, int) {
  __trap();
  return 0;
}
__device__ __forceinline__ void store_peer(const void *, int, unsigned long long) { __trap(); }
__device__ __forceinline__ void store_peer_u32(unsigned, unsigned) { __trap(); }
__device__ __forceinline__ unsigned add_peer(unsigned, unsigned) {
  __trap();
  return 0;
}
__device__ __forceinline__ void count_peer(unsigned, unsigned) { __trap(); }
__device__ __forceinline__ uint4 load_peer_v4(unsigned) {
  __trap();
  return uint4{};
}
#endif

// KernelMemo keeps one answer per kernel, for questions whose answer does
// not change once the library has bound its device (sv_init): asked on
// every launch, they would cost a runtime call each time. Past kSlots
// kernels it forgets the oldest. Launchers run on one thread, so it takes
// no lock (as max_clusters' cache).
template <typename V>
struct KernelMemo {
  static constexpr int kSlots = 64;
  const void *kern[kSlots] = {};
  V val[kSlots] = {};
  int used = 0, next = 0;
  bool find(const void *k, V &v) const {
    for (int i = 0; i < used; i++)
      if (kern[i] == k) {
        v = val[i];
        return true;
      }
    return false;
  }
  void put(const void *k, V v) {
    const int i = used < kSlots ? used++ : next++ % kSlots;
    kern[i] = k;
    val[i] = v;
  }
};

// smem_ready gives kern bytes of dynamic shared memory (beyond the default
// 48 KB with its static shared memory), once per kernel: each kernel asks
// with one size. False where the device cannot; the failure is not sticky,
// and the caller's other path serves.
inline bool smem_ready(const void *kern, size_t bytes) {
  static KernelMemo<bool> memo;
  bool ok;
  if (memo.find(kern, ok)) return ok;
  ok = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) == cudaSuccess;
  if (!ok) cudaGetLastError();
  memo.put(kern, ok);
  return ok;
}

// sm90_binary says whether the device runs kern from an sm_90 (or newer)
// binary: a build without sm_90 code (say sm_80 PTX, JIT-compiled) would
// run the empty sm_80 bodies of the cluster and pattern kernels
// (kSm90Pass).
inline bool sm90_binary(const void *kern) {
  static KernelMemo<bool> memo;
  bool v;
  if (memo.find(kern, v)) return v;
  cudaFuncAttributes a;
  if (cudaFuncGetAttributes(&a, kern) != cudaSuccess) {
    cudaGetLastError();
    return false;  // not remembered: asked again next time
  }
  v = a.binaryVersion >= 90;
  memo.put(kern, v);
  return v;
}

// cluster_ready sets what a cluster kernel needs once (clusters of up to
// kMaxCluster blocks; with big_smem, dynamic shared memory up to all the
// device gives a block beside the kernel's static shared memory) and says
// whether it can be launched: an sm_90 binary whose attributes took. A
// failed attribute is not sticky; the caller's other path serves.
inline bool cluster_ready(const void *kern, bool big_smem) {
  static KernelMemo<bool> memo;
  bool ok;
  if (memo.find(kern, ok)) return ok;
  ok = sm90_binary(kern) &&
       cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
  if (ok && big_smem) {
    int dev = 0, optin = 0;
    cudaFuncAttributes a;
    ok = cudaGetDevice(&dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess &&
         cudaFuncGetAttributes(&a, kern) == cudaSuccess &&
         cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              optin - (int)a.sharedSizeBytes) == cudaSuccess;
  }
  if (!ok) cudaGetLastError();
  memo.put(kern, ok);
  return ok;
}

// cluster_config is the launch configuration of blocks blocks of threads
// threads in clusters of csize, with smem bytes of dynamic shared memory;
// attr holds its one attribute (the cluster shape) and must outlive it.
inline cudaLaunchConfig_t cluster_config(dim3 blocks, int threads, size_t smem, int csize, cudaLaunchAttribute &attr) {
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = csize;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = blocks;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cfg;
}

// max_clusters is how many clusters of csize blocks of kern (threads per
// block, dynamic shared memory smem) the device holds at once: 0 when none
// fits, so a launch would fail. The kernel's attributes must be set first.
// Answers are cached (the launchers ask with a few shapes only).
inline int max_clusters(const void *kern, int csize, int threads, size_t smem) {
  struct Entry {
    const void *kern;
    int csize, threads;
    size_t smem;
    int n;
  };
  static Entry cache[64];
  static int used = 0, next = 0;
  for (int k = 0; k < used; k++)
    if (cache[k].kern == kern && cache[k].csize == csize && cache[k].threads == threads && cache[k].smem == smem)
      return cache[k].n;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(csize, threads, smem, csize, attr);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess) {
    cudaGetLastError();  // a shape the device refuses: not sticky
    n = 0;
  }
  Entry &e = used < 64 ? cache[used++] : cache[next++ % 64];
  e = Entry{kern, csize, threads, smem, n};
  return n;
}

// launch_cluster launches kern, variant (SV_VARIANT_*) of its op, on
// blocks blocks of threads threads, grouped into clusters of csize
// consecutive blocks along x (blocks.x is a multiple of csize), with smem
// bytes of dynamic shared memory, on the library's stream.
template <typename... Params, typename... Args>
int launch_cluster(int variant, void (*kern)(Params...), dim3 blocks, int threads, size_t smem, int csize,
                   const char *what, Args &&...args) {
  if (skip_launch(variant)) return SV_OK;
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = cluster_config(blocks, threads, smem, csize, attr);
  cfg.stream = stream();
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kern, std::forward<Args>(args)...);
  if (err != cudaSuccess) return cuda_status(err, what);
  return check_launch(what);
}

}  // namespace sv
