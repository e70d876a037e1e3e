// fast_top.cuh: step 2 of the fast path (fastrow.cuh): the chunks'
// candidates merged, the top-k set found and ranked by weight, and the
// filters applied, with exact weights for the top-k set alone.
#pragma once

#include "fast_select.cuh"

namespace sv {

// place_ranked calls put(j, r) once for every entry j < n, r being the
// number of keys[0..n) below keys[j] (the keys are distinct), and ends in a
// barrier. A set of at most kSmallSet entries is counted by four threads
// an entry, each over a quarter of the keys, with the four counts added
// through s.hist, so that no thread walks the whole set.
template <typename K, typename Put>
__device__ void place_ranked(const K *keys, int n, FastSmem &s, Put put) {
  constexpr int kGroups = kFastBlock / kSmallSet, kSpan = kSmallSet / kGroups;
  static_assert(kGroups * kSmallSet == kFastBlock, "four threads an entry");
  if (n <= kSmallSet) {
    const int j = (int)threadIdx.x % kSmallSet, g = (int)threadIdx.x / kSmallSet;
    int below = 0;
    if (j < n) {
      const K v = keys[j];
      const int end = min(n, (g + 1) * kSpan);
#pragma unroll 4
      for (int b = g * kSpan; b < end; b++) below += keys[b] < v;
    }
    s.hist[threadIdx.x] = (unsigned)below;
    __syncthreads();
    if (g == 0 && j < n) {
      int r = 0;
#pragma unroll
      for (int q = 0; q < kGroups; q++) r += (int)s.hist[q * kSmallSet + j];
      put(j, r);
    }
  } else {
    for (int j = threadIdx.x; j < n; j += kFastBlock) {
      const K v = keys[j];
      int r = 0;
      for (int b = 0; b < n; b++) r += keys[b] < v;
      put(j, r);
    }
  }
  __syncthreads();
}

// filter_warp is fast_top's filters for a ranked top-k set of n <=
// kSmallSet tokens (s.lw/s.lidx), run by one warp: lane l holds ranks 2l
// and 2l + 1, and the block code's sums and scans become warp scans, with
// the same decisions. It returns the kept count to every lane.
__device__ inline int filter_warp(int n, int kset, const FastParams &fp, FastSmem &s) {
  const int lane = threadIdx.x & 31, r0 = 2 * lane;
  const bool topp = fp.top_p < 1.0f;
  const float minw = fp.min_p > 0.0f ? fp.min_p : 0.0f;
  unsigned long long W[2], z = 0;
#pragma unroll
  for (int q = 0; q < 2; q++) {
    W[q] = r0 + q < n ? weight(s.lw[r0 + q]) : 0ull;
    if (r0 + q < kset) z += W[q];
  }
  const double limit = topp ? (double)fp.top_p * (double)__shfl_sync(0xffffffffu, warp_inclusive_scan(z, SumU64()), 31) : 0.0;
  const unsigned long long sum = W[0] + W[1];
  unsigned long long before = warp_inclusive_scan(sum, SumU64()) - sum, head[2], hmax = 0;
#pragma unroll
  for (int q = 0; q < 2; q++) {
    const int r = r0 + q;
    head[q] = r < n && (r == 0 || s.lw[r] != s.lw[r - 1]) ? before : 0ull;
    before += W[q];
    hmax = max(hmax, head[q]);
  }
  // The exclusive max-scan: the inclusive one a lane up, 0 for lane 0.
  const unsigned long long hincl = __shfl_up_sync(0xffffffffu, warp_inclusive_scan(hmax, MaxU64()), 1);
  unsigned long long hbefore = lane == 0 ? 0ull : hincl;
  int keep = 0;
#pragma unroll
  for (int q = 0; q < 2; q++) {
    const int r = r0 + q;
    hbefore = max(hbefore, head[q]);
    keep += r < kset && (!topp || (double)hbefore < limit) && s.lw[r] >= minw;
  }
  return __reduce_add_sync(0xffffffffu, keep);
}

// FastTop is a row's top-k result after fast_top: in shared memory,
// lidx/lw[0..n) ranked by (w desc, index) with the kept tokens a prefix
// of length kept, and sidx/sw[0..kept) the kept tokens by index.
struct FastTop {
  float m, temp;
  int arg;
  int kept;
};

// fast_top is step 2 for slot's row, run by the row's last block (a
// cluster row's leader, with CLUSTER): it merges the chunks' candidates
// (from s itself when C = 1; scan_nan is that chunk's NaN flag), takes the
// row's max and its first index from them, finds the top-k set and applies
// the filters. It returns false (every thread) when the row must take the
// full-row path. With CLUSTER the chunks have pushed their candidates into
// this block's shared memory already (fast_cluster_row, cluster_push).
template <typename T, bool CLUSTER>
__device__ bool fast_top(const FastArgs &a, int slot, const FastParams &fp, int scan_nan, FastSmem &s,
                         FastTop &top) {
  using ScanU = cub::BlockScan<unsigned long long, kFastBlock>;
  constexpr int PASSES = KeyPasses<T>::value;
  const int C = a.chunks;
  const int k = fp.k;
  const float temp = fp.temp;
  int nan = 0, total = 0, overflow = 0;
  unsigned merged_lo = 0;  // with C > 1, every merged key is at least this
  if (C == 1) {
    nan = scan_nan;
    overflow = s.overflow;
    total = s.count;
  } else {
    // Every warp reads the C chunk results (one per lane). The row's k-th
    // largest is at least every chunk's theta, so only the candidates at or
    // above the largest theta are merged (in any order: what follows does
    // not depend on it). Warp w copies chunks w, w + 8, ..., its loads in
    // flight at once, and keeps the largest (key, ~index) it copies: the
    // row's max and its first index, without a block reduction after.
    //
    // A cluster row's results are in s.told and its candidates were pushed
    // here (cluster_push), each pushing warp's largest in s.rank_key: warp 0
    // takes the largest of those. Else both are in global memory
    // (fast_arrive).
    const unsigned lane = threadIdx.x & 31;
    int count = 0;
    unsigned theta = 0;
    if ((int)lane < C) {
      const FastChunk *st = CLUSTER ? &s.told[lane] : a.stats + (size_t)slot * C + lane;
      nan = CLUSTER ? st->nan : __ldcg(&st->nan);
      count = CLUSTER ? st->count : __ldcg(&st->count);
      theta = CLUSTER ? st->theta : __ldcg(&st->theta);
    }
    nan = __any_sync(0xffffffffu, nan);
    overflow = __any_sync(0xffffffffu, count < 0);
    count = max(count, 0);
    theta = __reduce_max_sync(0xffffffffu, theta);
    merged_lo = theta;
    if (CLUSTER) {
      if (threadIdx.x < 32) {
        unsigned long long t = 0;
        for (int j = (int)lane; j < C * kFastWarps; j += 32) t = max(t, s.rank_key[j]);
        const unsigned hi = __reduce_max_sync(0xffffffffu, (unsigned)(t >> 32));
        const unsigned lo = __reduce_max_sync(0xffffffffu, (unsigned)(t >> 32) == hi ? (unsigned)t : 0u);
        if (lane == 0) s.top = ((unsigned long long)hi << 32) | lo;
      }
    } else if (!nan && !overflow) {
      unsigned long long top = 0;  // (key, ~index) of this lane's largest merged candidate
      for (int c = threadIdx.x >> 5; c < C; c += kFastWarps) {
        const int n = __shfl_sync(0xffffffffu, count, c);  // c is the same in the whole warp
        const size_t from = ((size_t)slot * C + c) * kFastChunkOut;
        for (int j0 = 0; j0 < n; j0 += 128) {
          unsigned key[4];
          int id[4];
#pragma unroll
          for (int q = 0; q < 4; q++) {
            const int j = j0 + q * 32 + (int)lane;
            key[q] = 0;
            if (j < n) {
              key[q] = __ldcg(a.keys + from + j);
              id[q] = __ldcg(a.idx + from + j);
            }
          }
#pragma unroll
          for (int q = 0; q < 4; q++) {
            const bool keep = key[q] >= theta && j0 + q * 32 + (int)lane < n;
            const unsigned ballot = __ballot_sync(0xffffffffu, keep);
            if (!ballot) continue;
            int at = 0;
            if (lane == 0) at = atomicAdd(&s.count, __popc(ballot));
            at = __shfl_sync(0xffffffffu, at, 0) + __popc(ballot & ((1u << lane) - 1));
            if (keep) {
              const unsigned long long t = ((unsigned long long)key[q] << 32) | ~(unsigned)id[q];
              top = t > top ? t : top;
              if (at < kFastCap) {
                s.keys[at] = key[q];
                s.idx[at] = id[q];
              }
            }
          }
        }
      }
      // The warp's largest (key, ~index): the largest key, then the lowest index.
      const unsigned hi = __reduce_max_sync(0xffffffffu, (unsigned)(top >> 32));
      const unsigned lo = __reduce_max_sync(0xffffffffu, (unsigned)(top >> 32) == hi ? (unsigned)top : 0u);
      if (lane == 0 && hi != 0) atomicMax(&s.top, ((unsigned long long)hi << 32) | lo);
    }
    __syncthreads();
    total = s.count;
  }
  if (nan || overflow || total > (CLUSTER ? kFastChunkOut : kFastCap) || total < k) return false;
  // Every token at or above the row's k-th largest is a candidate, so the
  // max and all of its copies are: the merge keeps the largest (C > 1).
  if (C == 1) {
    ArgBest best{-kInf, 0x7fffffff};
    for (int j = threadIdx.x; j < total; j += kFastBlock) {
      const float v = key_value(s.keys[j]);
      if (better(v, s.idx[j], best)) best = ArgBest{v, s.idx[j]};
    }
    best = cub::BlockReduce<ArgBest, kFastBlock>(s.tmp.ra).Reduce(best, ArgBestOp());
    if (threadIdx.x == 0) s.best = best;
  } else if (threadIdx.x == 0) {
    s.best = ArgBest{key_value((unsigned)(s.top >> 32)), (int)~(unsigned)s.top};
  }
  __syncthreads();
  const float m = s.best.v;
  const int arg = s.best.i;
  if (!(m > -kInf) || m == kInf) return false;
  // With C > 1 the merged keys lie between the largest chunk theta and the
  // max; when their top bytes span fewer than 256 values, one pass selects.
  constexpr int kShift = 32 - 8 * PASSES;
  const unsigned lo = merged_lo >> kShift, hi = (unsigned)(s.top >> 32) >> kShift;
  const unsigned kth = C > 1 && hi - lo < 256 ? kth_key_span<PASSES>(s.keys, total, k, lo, s, CLUSTER)
                                              : kth_key<PASSES>(s.keys, total, k, s);
  const int n = keep_at_least(s.keys, s.idx, total, kth, s);
  if (n > kFastList) return false;

  // Rank the top-k set by (w desc, index): ~bits of w (w >= 0) then index.
  // Meanwhile the last thread checks the one case the logits cannot
  // decide: a token below x_k whose weight equals tau_k would be in the
  // top-k set without being a candidate.
  for (int j = threadIdx.x; j < n; j += kFastBlock) {
    const float w = weight_of(key_value(s.keys[j]), m, temp);
    s.rank_key[j] = ((unsigned long long)~__float_as_uint(w) << 32) | (unsigned)s.idx[j];
  }
  if (threadIdx.x == kFastBlock - 1) {
    const float xk = key_value(kth);
    const float tau = weight_of(xk, m, temp);
    s.undecided = tau > 0.0f && weight_of(below(xk, (const T *)nullptr), m, temp) >= tau;
  }
  __syncthreads();
  if (s.undecided) return false;
  place_ranked(s.rank_key, n, s, [&](int j, int r) {
    const unsigned long long key = s.rank_key[j];
    s.lidx[r] = (int)(unsigned)key;
    s.lw[r] = __uint_as_float(~(unsigned)(key >> 32));
  });

  // Filters on the ranked list: a small set by one warp (filter_warp),
  // else thread t holds ranks t*ITEMS.. (blocked).
  const bool lowest = a.flags & SV_TIES_LOWEST_INDEX;
  const int kset = lowest ? k : n;  // the top-k set is a prefix of the ranks
  int kept = 0;
  if (n <= kSmallSet) {
    if (threadIdx.x < 32) {
      kept = filter_warp(n, kset, fp, s);
      if (threadIdx.x == 0) s.count = kept;
    }
    __syncthreads();
    kept = s.count;
  } else {
    const float top_p = fp.top_p, min_p = fp.min_p;
    const bool topp = top_p < 1.0f;
    const float minw = min_p > 0.0f ? min_p : 0.0f;
    unsigned long long W[kFastItems], z = 0;
    const int r0 = (int)threadIdx.x * kFastItems;
#pragma unroll
    for (int q = 0; q < kFastItems; q++) {
      W[q] = r0 + q < n ? weight(s.lw[r0 + q]) : 0ull;
      if (r0 + q < kset) z += W[q];
    }
    double limit = 0.0;
    if (topp) {
      z = cub::BlockReduce<unsigned long long, kFastBlock>(s.tmp.ru).Sum(z);
      if (threadIdx.x == 0) s.u = z;
      __syncthreads();
      limit = (double)top_p * (double)s.u;
    }
    // above: the mass of the tokens strictly heavier than rank r, i.e. the
    // exclusive prefix at the head of r's group of equal weights.
    unsigned long long sum = 0, excl[kFastItems], head[kFastItems];
#pragma unroll
    for (int q = 0; q < kFastItems; q++) sum += W[q];
    unsigned long long before;
    ScanU(s.tmp.su).ExclusiveSum(sum, before);
    __syncthreads();
    unsigned long long hmax = 0;
#pragma unroll
    for (int q = 0; q < kFastItems; q++) {
      const int r = r0 + q;
      excl[q] = before;
      before += W[q];
      head[q] = r < n && (r == 0 || s.lw[r] != s.lw[r - 1]) ? excl[q] : 0ull;
      hmax = max(hmax, head[q]);
    }
    unsigned long long hbefore;
    ScanU(s.tmp.su).ExclusiveScan(hmax, hbefore, 0ull, MaxU64());
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kFastItems; q++) {
      const int r = r0 + q;
      hbefore = max(hbefore, head[q]);
      const bool keep = r < kset && (!topp || (double)hbefore < limit) && s.lw[r] >= minw;
      kept += keep;
    }
    kept = cub::BlockReduce<int, kFastBlock>(s.tmp.ri).Sum(kept);
    if (threadIdx.x == 0) s.count = kept;
    __syncthreads();
    kept = s.count;
  }

  // The kept prefix ranked by index.
  place_ranked(s.lidx, kept, s, [&](int j, int r) {
    s.sidx[r] = s.lidx[j];
    s.sw[r] = s.lw[j];
  });
  top.m = m;
  top.temp = temp;
  top.arg = arg;
  top.kept = kept;
  return true;
}

}  // namespace sv
