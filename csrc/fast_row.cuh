// fast_row.cuh: both steps of the fast path for one block (fastrow.cuh),
// and the hand-over between them: through global memory and a counter per
// row, or, where a row's chunks run as one cluster, through the leader's
// shared memory.
#pragma once

#include "fast_scan.cuh"
#include "fast_top.cuh"

namespace sv {

// fast_arrive publishes this chunk's result and reports whether this block
// is the last of its row to arrive (always, for C = 1). Every thread
// returns the same answer.
__device__ inline bool fast_arrive(const FastArgs &a, int slot, int nan, FastSmem &s) {
  if (a.chunks == 1) return true;
  const int c = blockIdx.x;
  const size_t base = ((size_t)slot * a.chunks + c) * kFastChunkOut;
  const int n = s.overflow || s.count > kFastChunkOut ? -1 : s.count;
  for (int j = threadIdx.x; j < n; j += kFastBlock) {
    a.keys[base + j] = s.keys[j];
    a.idx[base + j] = s.idx[j];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    a.stats[(size_t)slot * a.chunks + c] = FastChunk{nan, n, order_key(s.theta)};
    s.count = 0;  // fast_top's merge counter and largest, in the last block
    s.top = 0;
    __threadfence();
    const bool last = atomicAdd(&a.arrived[slot], 1u) == (unsigned)a.chunks - 1;
    if (last) a.arrived[slot] = 0;
    s.last = last;
  }
  __syncthreads();
  const bool last = s.last;
  if (last) __threadfence();
  return last;
}

// cluster_push is every cluster block's part of a cluster row's merge,
// after the barrier that publishes the chunks' results: each block reads
// them all from its own s.told and appends its candidates at or above the
// largest theta (count of them: its scan's, the leader's at kFastChunkOut)
// to the leader's s.keys/s.idx, taking places with one add a warp on the
// leader's s.count. On the way it counts them in the leader's s.hist by
// their top bytes above the largest theta's (kth_key_span's buckets, the
// last one holding any beyond) and stores each warp's largest (key,
// ~index) in the leader's s.rank_key[chunk * kFastWarps + warp]. Pushing
// spreads the merge over the row's blocks: the leader pulling every
// chunk's candidates over DSMEM measured slower. It pushes nothing when a
// chunk saw a NaN or overflowed: the leader flags the row.
template <typename T>
__device__ void cluster_push(const FastArgs &a, int count, FastSmem &s) {
  constexpr int kShift = 32 - 8 * KeyPasses<T>::value;
  const unsigned lane = threadIdx.x & 31;
  int bad = 0;
  unsigned th = 0;
  if ((int)lane < a.chunks) {
    bad = s.told[lane].nan || s.told[lane].count < 0;
    th = s.told[lane].theta;
  }
  if (__any_sync(0xffffffffu, bad)) return;
  const unsigned theta = __reduce_max_sync(0xffffffffu, th);
  const unsigned lo = theta >> kShift;
  const int from = blockIdx.x == 0 ? kFastChunkOut : 0;
  const unsigned to_count = peer_address(&s.count, 0), to_keys = peer_address(s.keys, 0),
                 to_idx = peer_address(s.idx, 0), to_hist = peer_address(s.hist, 0);
  unsigned long long top = 0;
  for (int j0 = 0; j0 < count; j0 += kFastBlock) {
    const int j = j0 + (int)threadIdx.x;
    const unsigned key = j < count ? s.keys[from + j] : 0u;
    const bool keep = j < count && key >= theta;
    const unsigned ballot = __ballot_sync(0xffffffffu, keep);
    if (!ballot) continue;
    const int first = __ffs(ballot) - 1;
    unsigned at = 0;
    if ((int)lane == first) at = add_peer(to_count, __popc(ballot));
    at = __shfl_sync(0xffffffffu, at, first) + __popc(ballot & ((1u << lane) - 1));
    if (keep) {
      const int id = s.idx[from + j];
      const unsigned long long t = ((unsigned long long)key << 32) | ~(unsigned)id;
      top = t > top ? t : top;
      if (at < kFastChunkOut) {  // the leader's own candidates lie above
        store_peer_u32(to_keys + 4 * at, key);
        store_peer_u32(to_idx + 4 * at, (unsigned)id);
      }
      count_peer(to_hist + 4 * min(255u, (key >> kShift) - lo), 1u);
    }
  }
  // The warp's largest (key, ~index): the largest key, then the lowest index.
  const unsigned hi = __reduce_max_sync(0xffffffffu, (unsigned)(top >> 32));
  const unsigned low = __reduce_max_sync(0xffffffffu, (unsigned)(top >> 32) == hi ? (unsigned)top : 0u);
  if (lane == 0 && hi != 0)
    store_peer(&s.rank_key[blockIdx.x * kFastWarps + (threadIdx.x >> 5)], 0, ((unsigned long long)hi << 32) | low);
}

// fast_cluster_row is fast_row's hand-over and finish for a cluster row:
// the row's C chunks (8 to 16) are one thread block cluster, block c its
// rank c, and the leader (block 0) finishes the row. Three cluster
// barriers: the first (begun in fast_row before the scan) makes sure every
// block has started before any writes into another's shared memory; then
// each block writes its result into every block's s.told, and after the
// second every block pushes its candidates into the leader's shared
// memory (cluster_push); after the third the leader has them all. No
// chunk publishes through global memory or waits on a fence, as
// fast_arrive's do. The chunks write their
// zeros (zeros, when given) before the third barrier, which orders them
// before the leader's own writes. No block reads another's shared memory,
// so the others exit at the third barrier, not after the leader's finish.
// Every block of a row takes the same path (the row's parameters decide
// eligibility), so every block meets all three barriers or none.
template <typename T>
__device__ FastOutcome fast_cluster_row(const FastArgs &a, int slot, const FastParams &fp, int nan, float *zeros,
                                        int begin, int end, FastSmem &s, FastTop &top) {
  static_assert(kFastBlock >= 256 && kFastBlock >= kMaxCluster * kFastWarps, "the leader clears s.hist and the tops");
  const int c = blockIdx.x;  // the cluster is the row's chunks: rank = blockIdx.x
  const int count = s.overflow || s.count > kFastChunkOut ? -1 : s.count;
  cluster_wait();  // every block has started (fast_row arrived before its scan)
  if ((int)threadIdx.x < a.chunks) {  // this chunk's result, into block threadIdx.x
    store_peer_u32(peer_address(&s.told[c].nan, threadIdx.x), (unsigned)nan);
    store_peer_u32(peer_address(&s.told[c].count, threadIdx.x), (unsigned)count);
    store_peer_u32(peer_address(&s.told[c].theta, threadIdx.x), order_key(s.theta));
  }
  if (c == 0) {  // the leader's own candidates move up: the pushes fill from 0
    for (int j = threadIdx.x; j < count; j += kFastBlock) {
      s.keys[kFastChunkOut + j] = s.keys[j];
      s.idx[kFastChunkOut + j] = s.idx[j];
    }
    __syncthreads();
    if (threadIdx.x == 0) s.count = 0;
    s.hist[threadIdx.x] = 0;
    if ((int)threadIdx.x < a.chunks * kFastWarps) s.rank_key[threadIdx.x] = 0;
  }
  cluster_arrive();  // this chunk's result is published; the leader is ready
  if (zeros) zero_chunk(zeros, begin, end);
  cluster_wait();
  cluster_push<T>(a, count, s);
  cluster_arrive();  // releases the pushes and the zeros to the leader
  cluster_wait();
  if (c != 0) return kFastDone;
  const bool ok = fast_top<T, true>(a, slot, fp, nan, s, top);
  if (threadIdx.x == 0) a.todo[slot] = !ok;
  return ok ? kFastServed : kFastFlagged;
}

// fast_row is both steps for block (chunk, slot) of a fast kernel on
// logits row x with parameters fp: the scan of this block's chunk (which it
// also zeroes in zeros, when given), then, in the row's last block (with
// CLUSTER, fast_cluster_row: block 0), fast_top. It flags the slot in
// a.todo when the full path must serve it. Where fast_serves, no full-row
// kernel follows: the block that gets kFastFlagged serves the row itself
// (fast_full_shared).
template <typename T, bool CLUSTER>
__device__ FastOutcome fast_row(const T *x, const FastArgs &a, int slot, const FastParams &fp, float *zeros,
                                FastSmem &s, FastTop &top) {
  const int n = a.vocab;
  if (!fast_eligible(fp, n, a.flags)) {
    if (blockIdx.x != 0) return kFastDone;
    if (threadIdx.x == 0) a.todo[slot] = 1;
    return kFastFlagged;
  }
  const int begin = blockIdx.x * a.chunk, end = min(n, begin + a.chunk);
  // A cluster row arrives now and waits before its first DSMEM store
  // (fast_cluster_row): by then every block of the cluster has started,
  // which DSMEM access requires, at no cost.
  if constexpr (CLUSTER) cluster_arrive();
  const int nan = scan_chunk<T, kFastUnroll>(x, begin, end, fp.k, s);
  if constexpr (CLUSTER) return fast_cluster_row<T>(a, slot, fp, nan, zeros, begin, end, s, top);
  if (zeros) zero_chunk(zeros, begin, end);
  if (!fast_arrive(a, slot, nan, s)) return kFastDone;
  const bool ok = fast_top<T, false>(a, slot, fp, nan, s, top);
  if (threadIdx.x == 0) a.todo[slot] = !ok;
  return ok ? kFastServed : kFastFlagged;
}

}  // namespace sv
