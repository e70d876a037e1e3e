// fastrow.cuh: the top-k fast path that renorm, sample and spec_verify share
// for rows whose filters are decided inside their top-k set: top-k on
// (0 < k <= kFastMaxK), and top-p, if on, on the top-k mass (top_k_first).
//
// Every decision still equals engine/cpu's bit for bit (docs/SEMANTICS.md);
// what changes is how few tokens need their exact weight. w = Exp((x - m)/T)
// never decreases as x grows, so the k-th largest weight is the weight of
// the k-th largest logit, and a row's top-k set is found on the logits
// alone, with no exp:
//
//   1. scan: the row is split into C chunks, one block each (fast_layout:
//      whole rows when there are enough of them to fill the GPU). A block
//      reads its chunk once (16-byte loads, several in flight per thread)
//      and appends to a shared-memory buffer every token at or above a
//      running threshold theta; the hot loop is a packed vector max and
//      one comparison per 16 bytes. The first tile's theta is the k-th
//      largest of its vector maxima (no exp, no cut of every token); when
//      the buffer passes half full, it is cut to its k largest (radix
//      select on order-preserving keys) and theta rises to the k-th
//      largest seen so far. Every token at or above the chunk's k-th
//      largest is in the buffer, and theta never passes it.
//   2. finish, by the last block of the row to arrive (a counter per row;
//      with C = 1 the same block, without a round trip through memory;
//      where a row's 8 to 16 chunks run as one cluster, block 0, into
//      whose shared memory every chunk pushes its candidates):
//      the chunks' candidates at or above the largest theta are merged,
//      the row's max and its first index are read off them, the k-th
//      largest logit x_k gives tau_k = w(x_k), and only the tokens at or
//      above x_k get their exact weight. Ranked by (w descending, index),
//      top-k (keep or lowest_index), top-p on integer masses and min-p
//      keep a prefix; the kept tokens are then ranked by index for the
//      op's own use (sum, draw, list).
//
// What sends a row to the full-row kernels instead (they run after, only on
// the rows flagged in todo): NaN or +Inf, all -Inf, T = 0, no top-k, k over
// kFastMaxK, joint top-p, a buffer overflow (ties in the logits, or rows
// that rise steadily), a top-k set with ties past kFastList, and the one
// case the logits cannot decide: a token below x_k whose weight still
// equals tau_k (two logits one step apart that the exp maps to one float
// weight, e.g. at T = 100 on float32 logits). That case is detected
// exactly: the weight of the next representable value below x_k is
// compared with tau_k.
#pragma once

#include <type_traits>

#include "cluster.cuh"
#include "rowops.cuh"
#include "trace.cuh"

namespace sv {

constexpr int kFastBlock = 256;
constexpr int kFastUnroll = 4;        // 16-byte loads in flight per thread (8: spills, slower)
constexpr int kFastCap = 4096;        // candidates one block holds in shared memory
constexpr int kFastMaxK = 256;        // largest top_k the fast path serves
constexpr int kFastList = 512;        // largest top-k set (ties included) it ranks
constexpr int kFastChunkOut = 2048;   // candidates one chunk hands on
constexpr int kFastMaxChunks = 32;    // chunks per row (one per lane in fast_top)
constexpr int kFastMinChunk = 8192;   // tokens: one tile of 16-bit logits (a block's loads in flight)
constexpr int kFastItems = kFastList / kFastBlock;
constexpr int kSmallSet = 64;         // top-k sets ranked four threads an entry, filtered by one warp
constexpr int kFastWarps = kFastBlock / 32;

// FastChunk is what one chunk's scan hands to its row's finishing block.
struct FastChunk {
  int nan;         // a NaN was seen
  int count;       // candidates written; < 0: the buffer overflowed
  unsigned theta;  // order key of the chunk's final theta (<= its k-th largest)
};

// FastArgs locate one launch's rows, parameters and scratch for the fast path.
struct FastArgs {
  int vocab;
  int chunks;            // C
  int chunk;             // tokens per chunk (a multiple of 8)
  RowParams rp;
  int flags;
  const int *map;        // slot -> logits row (sample's sampled rows)
  FastChunk *stats;      // [slots, C]
  unsigned *keys;        // [slots, C, kFastChunkOut] (C > 1)
  int *idx;
  unsigned *arrived;     // [slots] zeroed counters
  int *todo;             // [slots]: 1 = the full-row kernel must serve it
};

// FastSmem is the fast path's shared memory (dynamic, ~46 KB: four blocks
// share an SM). The Sum tree reuses the candidate keys once they are done.
struct FastSmem {
  union {
    unsigned keys[kFastCap];
    float tree[2 * kMaxLeaves];
  };
  int idx[kFastCap];
  unsigned long long rank_key[kFastList];
  int lidx[kFastList];   // the top-k set ranked by (w desc, index)
  float lw[kFastList];
  int sidx[kFastList];   // the kept tokens ranked by index
  float sw[kFastList];
  unsigned hist[256];
  union {
    typename cub::BlockScan<int, kFastBlock>::TempStorage si;
    typename cub::BlockScan<unsigned long long, kFastBlock>::TempStorage su;
    typename cub::BlockReduce<unsigned long long, kFastBlock>::TempStorage ru;
    typename cub::BlockReduce<int, kFastBlock>::TempStorage ri;
    typename cub::BlockReduce<ArgBest, kFastBlock>::TempStorage ra;
  } tmp;
  int count, overflow, pick, need, last;
  int undecided;  // the top-k set is not decided by the logits (fast_top)
  float theta;
  unsigned long long u;
  unsigned long long top;  // the merge's largest (order key, ~index); at C = 1 unset, its value unused
  ArgBest best;  // the row's max and its first index, in the finishing block
  FastChunk told[kMaxCluster];  // a cluster row's chunk results, in each of its blocks (fast_cluster_row)
};

// FastParams are one row's parameters, read once.
struct FastParams {
  int k;
  float temp, top_p, min_p;
};

__device__ __forceinline__ FastParams fast_params(const RowParams &rp, int r) {
  return FastParams{rp.top_k[r], rp.temperature[r], rp.top_p[r], rp.min_p[r]};
}

// fast_eligible says whether a row of n tokens can take the fast path as
// far as its parameters tell.
__device__ __forceinline__ bool fast_eligible(const FastParams &fp, int n, int flags) {
  if (!(fp.temp > 0.0f) || fp.k <= 0 || fp.k >= n || fp.k > kFastMaxK) return false;
  return fp.top_p >= 1.0f || !(flags & SV_ORDER_JOINT);
}

// KeyPasses is how many byte-wide radix passes order a dtype's keys: a
// bf16 value widened to float32 has 16 low bits that the sign alone fixes,
// an f16 value 13.
template <typename T>
struct KeyPasses {
  static constexpr int value = sizeof(T) == 4 ? 4 : (std::is_same<T, __half>::value ? 3 : 2);
};

// order_key maps a float (not NaN) to an unsigned that orders as the float
// does; -0 and +0 share the key of +0.
__device__ __forceinline__ unsigned order_key(float v) {
  const unsigned b = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_value(unsigned k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// below returns the next value of the input dtype below v (v finite or
// +Inf, not -Inf), skipping -0 when v is 0.
__device__ __forceinline__ float below(float v, const float *) {
  float p = key_value(order_key(v) - 1);
  if (p == v) p = key_value(order_key(v) - 2);
  return p;
}
__device__ __forceinline__ float below(float v, const __half *) {
  unsigned short k = key16(__half_as_ushort(__float2half_rn(v == 0.0f ? 0.0f : v)));
  float p = __half2float(__ushort_as_half(unkey16((unsigned short)(k - 1))));
  if (p == v) p = __half2float(__ushort_as_half(unkey16((unsigned short)(k - 2))));
  return p;
}
__device__ __forceinline__ float below(float v, const __nv_bfloat16 *) {
  unsigned short k = key16(__bfloat16_as_ushort(__float2bfloat16_rn(v == 0.0f ? 0.0f : v)));
  float p = __bfloat162float(__ushort_as_bfloat16(unkey16((unsigned short)(k - 1))));
  if (p == v) p = __bfloat162float(__ushort_as_bfloat16(unkey16((unsigned short)(k - 2))));
  return p;
}

struct MaxU64 {
  __device__ __forceinline__ unsigned long long operator()(unsigned long long a, unsigned long long b) const {
    return a > b ? a : b;
  }
};

// pick_bucket is one radix pass over keys[0..n): bucket(key) is a key's
// bucket, 0..255 (256: not counted). It returns the bucket that holds the
// need-th largest counted key and leaves in need its rank within that
// bucket. Candidates often share their top byte, and 32 lanes adding to one
// counter serialise: a warp whose keys all fall in one bucket adds once.
// With counted, s.hist already holds the counts (cluster_push).
template <typename Bucket>
__device__ int pick_bucket(const unsigned *keys, int n, int &need, Bucket bucket_of, FastSmem &s,
                           bool counted = false) {
  using Scan = cub::BlockScan<int, kFastBlock>;
  const unsigned lane = threadIdx.x & 31;
  if (!counted) {
    for (int d = threadIdx.x; d < 256; d += kFastBlock) s.hist[d] = 0;
    __syncthreads();
    for (int base = 0; base < n; base += kFastBlock) {
      const int j = base + (int)threadIdx.x;
      const unsigned bucket = j < n ? bucket_of(keys[j]) : 256u;
      const unsigned valid = __ballot_sync(0xffffffffu, bucket < 256);
      if (valid) {
        const int first = __ffs(valid) - 1;
        const unsigned lead = __shfl_sync(0xffffffffu, bucket, first);
        if (__ballot_sync(0xffffffffu, bucket == lead) == valid) {
          if (lane == (unsigned)first) atomicAdd(&s.hist[lead], (unsigned)__popc(valid));
        } else if (bucket < 256) {
          atomicAdd(&s.hist[bucket], 1u);
        }
      }
    }
    __syncthreads();
  }
  // Thread t holds bucket 255 - t: an inclusive scan counts from the top.
  const int c = threadIdx.x < 256 ? (int)s.hist[255 - threadIdx.x] : 0;
  int incl;
  Scan(s.tmp.si).InclusiveSum(c, incl);
  if (threadIdx.x < 256 && c > 0 && incl >= need && incl - c < need) {
    s.pick = 255 - (int)threadIdx.x;
    s.need = need - (incl - c);
  }
  __syncthreads();
  const int pick = s.pick;
  need = s.need;
  __syncthreads();
  return pick;
}

// fill_key completes a key whose top PASSES bytes are known: the bytes
// below are all zero for keys of values >= +0, all ones below (KeyPasses).
template <int PASSES>
__device__ __forceinline__ unsigned fill_key(unsigned top) {
  return PASSES < 4 ? top | ((top & 0x80000000u) ? 0u : (0xffffffffu >> (8 * (PASSES & 3)))) : top;
}

// kth_key returns the k-th largest (1-based, k <= n) of keys[0..n): a
// byte-wide radix select over the top PASSES bytes (KeyPasses: the bytes
// below are fixed by the sign).
template <int PASSES>
__device__ unsigned kth_key(const unsigned *keys, int n, int k, FastSmem &s) {
  unsigned prefix = 0, mask = 0;
  int need = k;
  for (int shift = 24; shift >= 32 - 8 * PASSES; shift -= 8) {
    const int pick = pick_bucket(keys, n, need, [&](unsigned key) {
      return (key & mask) == prefix ? (key >> shift) & 0xffu : 256u;
    }, s);
    prefix |= (unsigned)pick << shift;
    mask |= 0xffu << shift;
  }
  return fill_key<PASSES>(prefix);
}

// kth_key_span is kth_key in one pass for keys whose top PASSES bytes
// (key >> (32 - 8 * PASSES)) all lie in [lo, lo + 256), as the merged
// candidates of a row often do (they lie between the largest chunk theta
// and the row's max: for bf16 logits, a few hundred values at most). With
// counted, s.hist already holds their counts by bucket (cluster_push).
template <int PASSES>
__device__ unsigned kth_key_span(const unsigned *keys, int n, int k, unsigned lo, FastSmem &s, bool counted) {
  constexpr int kShift = 32 - 8 * PASSES;
  int need = k;
  const int pick = pick_bucket(keys, n, need, [&](unsigned key) { return (key >> kShift) - lo; }, s, counted);
  return fill_key<PASSES>((lo + (unsigned)pick) << kShift);
}

// keep_at_least moves the entries of keys/idx[0..n) whose key is >= lo to
// the front (their order is lost) and returns how many there are. A kept
// entry never lands past where it was read, and a tile is read whole
// before it is written, so the compaction is in place.
__device__ inline int keep_at_least(unsigned *keys, int *idx, int n, unsigned lo, FastSmem &s) {
  using Scan = cub::BlockScan<int, kFastBlock>;
  constexpr int ITEMS = 4;
  int carry = 0;
  for (int base = 0; base < n; base += kFastBlock * ITEMS) {
    const int j0 = base + (int)threadIdx.x * ITEMS;
    unsigned key[ITEMS];
    int id[ITEMS], keep = 0;
#pragma unroll
    for (int q = 0; q < ITEMS; q++) {
      key[q] = 0;
      id[q] = 0;
      if (j0 + q < n) {
        key[q] = keys[j0 + q];
        id[q] = idx[j0 + q];
        keep += key[q] >= lo;
      }
    }
    int pos, total;
    Scan(s.tmp.si).ExclusiveSum(keep, pos, total);
    __syncthreads();
    pos += carry;
#pragma unroll
    for (int q = 0; q < ITEMS; q++)
      if (j0 + q < n && key[q] >= lo) {
        keys[pos] = key[q];
        idx[pos] = id[q];
        pos++;
      }
    carry += total;
    __syncthreads();
  }
  return carry;
}

// cut_to_top_k cuts the buffer to its k largest keys (ties included) and
// raises theta to the k-th largest, or leaves it when it holds k or fewer.
template <int PASSES>
__device__ void cut_to_top_k(int k, FastSmem &s) {
  const int n = s.count;
  if (n <= k) return;
  const unsigned kth = kth_key<PASSES>(s.keys, n, k, s);
  const int kept = keep_at_least(s.keys, s.idx, n, kth, s);
  if (threadIdx.x == 0) {
    s.count = kept;
    s.theta = key_value(kth);
  }
  __syncthreads();
}

// scan_chunk is step 1 for elements [begin, end) of row x: it leaves the
// candidates in s.keys/s.idx[0..s.count) (s.overflow set if they did not
// fit) and returns, to every thread, whether the chunk holds a NaN. The
// chunk's max is not tracked here: it is the largest candidate (every token
// at or above theta is one), found once per row by fast_top.
//
// The loop is kept lean, because it runs once per 16-byte vector of every
// row: the vector's packed max, a NaN test, and one comparison with theta;
// only a thread whose vector reaches theta compares its elements and
// appends them (one shared atomic per appending thread, rare once theta is
// set). A tile of UNROLL vectors per thread ends in one barrier, which also
// tells every thread whether the buffer is past half full (each appending
// thread knows where its entries ended), and only then is it cut.
//
// The first tile sets theta without a cut: the k-th largest of its vector
// maxima is at most the chunk's k-th largest logit (k vectors each hold a
// token at or above it), so only the first tile's tokens at or above it are
// appended.
template <typename T, int UNROLL>
__device__ int scan_chunk(const T *x, int begin, int end, int k, FastSmem &s) {
  constexpr int N = 16 / sizeof(T);
  constexpr int BLOCK = kFastBlock;
  constexpr int PASSES = KeyPasses<T>::value;
  if (threadIdx.x == 0) {
    s.count = 0;
    s.overflow = 0;
  }
  __syncthreads();
  int nan = 0, high = 0;  // high: where this thread's last entries ended
  float theta = -kInf;
  auto put = [&](int at, float v, int i) {
    if (at < kFastCap) {
      s.keys[at] = order_key(v);
      s.idx[at] = i;
    } else {
      s.overflow = 1;
    }
  };
  // add appends the elements of vector u (element 0 at index base) that
  // are at or above theta.
  auto add = [&](const uint4 &u, int base) {
    const T *e = reinterpret_cast<const T *>(&u);
    unsigned pass = 0;
#pragma unroll
    for (int q = 0; q < N; q++)
      if (to_f32(e[q]) >= theta) pass |= 1u << q;
    int at = atomicAdd(&s.count, __popc(pass));
    high = at + __popc(pass);
#pragma unroll
    for (int q = 0; q < N; q++)
      if (pass & (1u << q)) put(at++, to_f32(e[q]), base + q);
  };
  // settle ends a tile: one barrier, then a cut if the buffer is past half
  // full. It returns false, in every thread, when the buffer overflowed.
  auto settle = [&]() {
    if (!__syncthreads_or(high > kFastCap / 2)) return true;
    if (s.overflow) return false;
    cut_to_top_k<PASSES>(k, s);
    theta = s.theta;
    high = 0;
    return true;
  };
  const uintptr_t addr = reinterpret_cast<uintptr_t>(x + begin);
  const int head = min(end - begin, (int)(((16 - (addr & 15)) & 15) / sizeof(T)));
  const int start = begin + head;
  const int nvec = (end - start) / N;
  const int tail = start + nvec * N;
  const uint4 *vec = reinterpret_cast<const uint4 *>(x + start);
  // Head and tail elements (at most 2 * (N - 1)) are all candidates.
  auto scalar = [&](int i) {
    const float v = load_f32(x, i);
    if (v != v)
      nan = 1;
    else
      put(atomicAdd(&s.count, 1), v, i);
  };
  if ((int)threadIdx.x < head) scalar(begin + threadIdx.x);
  if ((int)threadIdx.x < end - tail) scalar(tail + threadIdx.x);

  // First tile: UNROLL vectors per thread; their maxima set theta.
  uint4 u[UNROLL];
#pragma unroll
  for (int q = 0; q < UNROLL; q++) {
    const int j = q * BLOCK + (int)threadIdx.x;
    u[q] = j < nvec ? __ldg(vec + j) : make_uint4(0, 0, 0, 0);
  }
  __syncthreads();  // the head and tail candidates are in
  const int head_count = s.count;
  float vm[UNROLL];
#pragma unroll
  for (int q = 0; q < UNROLL; q++) {
    const int j = q * BLOCK + (int)threadIdx.x;
    vm[q] = j < nvec ? vec_max(u[q], (const T *)nullptr) : nan_f32();
    if (j < nvec && vm[q] != vm[q]) nan = 1;
    s.keys[head_count + q * BLOCK + threadIdx.x] = vm[q] == vm[q] ? order_key(vm[q]) : 0u;
  }
  __syncthreads();
  if (min(nvec, BLOCK * UNROLL) >= k) {
    const unsigned t0 = kth_key<PASSES>(s.keys + head_count, BLOCK * UNROLL, k, s);
    theta = t0 > order_key(-kInf) ? key_value(t0) : -kInf;
  }
  SV_MARK(1);
#pragma unroll
  for (int q = 0; q < UNROLL; q++)
    if (vm[q] >= theta) add(u[q], start + (q * BLOCK + (int)threadIdx.x) * N);  // false for NaN
  bool ok = settle();
  for (int j0 = BLOCK * UNROLL; ok && j0 < nvec; j0 += BLOCK * UNROLL) {
#pragma unroll
    for (int q = 0; q < UNROLL; q++) {
      const int j = j0 + q * BLOCK + (int)threadIdx.x;
      if (j < nvec) u[q] = __ldg(vec + j);
    }
#pragma unroll
    for (int q = 0; q < UNROLL; q++) {
      const int j = j0 + q * BLOCK + (int)threadIdx.x;
      if (j < nvec) {
        const float m = vec_max(u[q], (const T *)nullptr);
        nan |= m != m;
        if (m >= theta) add(u[q], start + j * N);
      }
    }
    ok = settle();
  }
  if (threadIdx.x == 0) s.theta = theta;  // every thread holds the same theta
  return __syncthreads_or(nan);
}

// place_ranked calls put(j, r) once for every entry j < n, r being the
// number of keys[0..n) below keys[j] (the keys are distinct), and ends in a
// barrier. A set of at most kSmallSet entries is counted by four threads
// an entry, each over a quarter of the keys, with the four counts added
// through s.hist, so that no thread walks the whole set (docs/PERF.md, run
// 53: a few tenths of a microsecond at B=1).
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

// warp_inclusive_scan is the inclusive scan of 64-bit values over the
// warp's lanes with op (every lane takes part): lane l gets
// v_0 op ... op v_l; lane 31 holds the whole warp's.
template <typename Op>
__device__ __forceinline__ unsigned long long warp_inclusive_scan(unsigned long long v, Op op) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long t = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v = op(v, t);
  }
  return v;
}
struct SumU64 {
  __device__ __forceinline__ unsigned long long operator()(unsigned long long a, unsigned long long b) const {
    return a + b;
  }
};

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
  SV_MARK(5);
  SV_COUNT(20, total);
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
  SV_MARK(6);
  const float m = s.best.v;
  const int arg = s.best.i;
  if (!(m > -kInf) || m == kInf) return false;
  // With C > 1 the merged keys lie between the largest chunk theta and the
  // max; when their top bytes span fewer than 256 values, one pass selects.
  constexpr int kShift = 32 - 8 * PASSES;
  const unsigned lo = merged_lo >> kShift, hi = (unsigned)(s.top >> 32) >> kShift;
  const unsigned kth = C > 1 && hi - lo < 256 ? kth_key_span<PASSES>(s.keys, total, k, lo, s, CLUSTER)
                                              : kth_key<PASSES>(s.keys, total, k, s);
  SV_MARK(7);
  const int n = keep_at_least(s.keys, s.idx, total, kth, s);
  SV_MARK(8);
  SV_COUNT(21, n);
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
  SV_MARK(9);

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
  SV_MARK(10);
  SV_COUNT(22, kept);

  // The kept prefix ranked by index.
  place_ranked(s.lidx, kept, s, [&](int j, int r) {
    s.sidx[r] = s.lidx[j];
    s.sw[r] = s.lw[j];
  });
  SV_MARK(11);
  top.m = m;
  top.temp = temp;
  top.arg = arg;
  top.kept = kept;
  return true;
}

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

// fast_smem is a fast kernel's dynamic shared memory.
__device__ __forceinline__ FastSmem &fast_smem() {
  extern __shared__ __align__(16) unsigned char smem[];
  return *reinterpret_cast<FastSmem *>(smem);
}

// zero_chunk writes zeros to p[begin, end) with the block's threads,
// 16 bytes at a time where p is aligned.
__device__ inline void zero_chunk(float *p, int begin, int end) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p + begin);
  const int head = min(end - begin, (int)(((16 - (addr & 15)) & 15) / sizeof(float)));
  if ((int)threadIdx.x < head) p[begin + threadIdx.x] = 0.0f;
  const int start = begin + head;
  const int nvec = (end - start) / 4;
  float4 *v = reinterpret_cast<float4 *>(p + start);
  for (int j = threadIdx.x; j < nvec; j += kFastBlock) v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if ((int)threadIdx.x < end - (start + 4 * nvec)) p[start + 4 * nvec + threadIdx.x] = 0.0f;
}

// What fast_row leaves to its block (the same in every thread).
enum FastOutcome {
  kFastDone = 0,     // nothing: not the row's last block, or the row is served
  kFastServed = 1,   // the row's last block: top holds the kept tokens
  kFastFlagged = -1  // the row is flagged in a.todo, and this block is its
                     // last (or, for a row the fast path never takes, block 0)
};

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
// chunk's candidates over DSMEM took 1.8 us at B=1 (docs/PERF.md, runs
// 76-80). It pushes nothing when a chunk saw a NaN or overflowed: the
// leader flags the row.
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
// fast_arrive's do (docs/PERF.md, runs 68-72). The chunks write their
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
  SV_MARK(3);
  cluster_wait();
  cluster_push<T>(a, count, s);
  cluster_arrive();  // releases the pushes and the zeros to the leader
  cluster_wait();
  if (c != 0) return kFastDone;
  SV_MARK(4);
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
  SV_MARK(0);
  const int nan = scan_chunk<T, kFastUnroll>(x, begin, end, fp.k, s);
  SV_MARK(2);
  if constexpr (CLUSTER) return fast_cluster_row<T>(a, slot, fp, nan, zeros, begin, end, s, top);
  if (zeros) zero_chunk(zeros, begin, end);
  SV_MARK(3);
  if (!fast_arrive(a, slot, nan, s)) return kFastDone;
  SV_MARK(4);
  const bool ok = fast_top<T, false>(a, slot, fp, nan, s, top);
  if (threadIdx.x == 0) a.todo[slot] = !ok;
  return ok ? kFastServed : kFastFlagged;
}

// fast_serves says whether a fast kernel serves the rows it flags itself,
// with no full-row kernel after it: under SV_ALL_FAST (rows the fast path
// does not take are rare) and for rows split into at least 8 chunks (at
// most ~50 rows), where the second kernel's ~3 us is a sixth of the
// launch and the full path's call in the fast kernel costs less than that.
inline bool fast_serves(int flags, const FastArgs &a) { return (flags & SV_ALL_FAST) && a.chunks >= 8; }

// fast_full_shared is a fast kernel's dynamic shared memory as the
// full-row path's RowShared, for a block that serves a flagged row itself
// (fast_serves). It begins with a barrier: every thread is done with
// FastSmem.
__device__ inline RowShared<kFastBlock> &fast_full_shared() {
  static_assert(sizeof(RowShared<kFastBlock>) <= sizeof(FastSmem), "the full-row path fits the fast path's memory");
  __syncthreads();
  return *reinterpret_cast<RowShared<kFastBlock> *>(&fast_smem());
}

// sparse_sum is engine/cpu's Sum (rowops.cuh tree_sum) of a row of n
// tokens that is zero except at the kept tokens sidx/sw[0..kept) (ranked by
// index): adding zeros changes no float sum, so only the chunks that hold
// kept tokens get a leaf, each summed in its 8 lanes in index order.
__device__ inline float sparse_sum(int n, int kept, FastSmem &s) {
  const int chunks = (n + 255) / 256;
  int depth = 0;
  while ((1 << depth) < chunks) depth++;
  const int leaves = 1 << depth;
  for (int j = threadIdx.x; j < leaves; j += kFastBlock) s.tree[leaves + j] = 0.0f;
  __syncthreads();
  for (int r = threadIdx.x; r < kept; r += kFastBlock) {
    const int c = s.sidx[r] >> 8;
    if (r > 0 && (s.sidx[r - 1] >> 8) == c) continue;  // not the first of its chunk
    float a[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int e = r; e < kept && (s.sidx[e] >> 8) == c; e++) {
      const int l = s.sidx[e] & 7;
      a[l] = __fadd_rn(a[l], s.sw[e]);
    }
    const float sum = __fadd_rn(__fadd_rn(__fadd_rn(a[0], a[1]), __fadd_rn(a[2], a[3])),
                                __fadd_rn(__fadd_rn(a[4], a[5]), __fadd_rn(a[6], a[7])));
    s.tree[leaves + tree_leaf(c, chunks, depth)] = sum;
  }
  __syncthreads();
  // Up the tree three levels a barrier: node j is formed from its eight
  // descendants 8j..8j+7 with the same pairwise adds, so the same bits.
  for (int len = leaves; len > 1;) {
    const int step = len >= 8 ? 3 : len >= 4 ? 2 : 1;
    const int up = len >> step;
    for (int j = up + threadIdx.x; j < 2 * up; j += kFastBlock) {
      const float *d = s.tree + (j << step);
      float v;
      if (step == 3)
        v = __fadd_rn(__fadd_rn(__fadd_rn(d[0], d[1]), __fadd_rn(d[2], d[3])),
                      __fadd_rn(__fadd_rn(d[4], d[5]), __fadd_rn(d[6], d[7])));
      else if (step == 2)
        v = __fadd_rn(__fadd_rn(d[0], d[1]), __fadd_rn(d[2], d[3]));
      else
        v = __fadd_rn(d[0], d[1]);
      s.tree[j] = v;
    }
    __syncthreads();
    len = up;
  }
  const float sum = s.tree[1];
  __syncthreads();
  return sum;
}

// kept_pick draws from the kept tokens (ranked by index) with fixed-point
// weights val(r): the total S, t = pick(u, S), and the first rank whose
// inclusive prefix exceeds t; -1 when S = 0. Every thread gets the rank.
//
// At most kSmallSet kept tokens are drawn by one warp (lane l holds ranks
// 2l and 2l + 1), with a warp scan in place of the block scan.
template <typename Val>
__device__ int kept_pick(int kept, unsigned long long u, Val val, FastSmem &s) {
  if (kept <= kSmallSet) {
    if (threadIdx.x < 32) {
      const int r0 = 2 * (int)threadIdx.x;
      unsigned long long v[2];
#pragma unroll
      for (int q = 0; q < 2; q++) v[q] = r0 + q < kept ? val(r0 + q) : 0ull;
      const unsigned long long sum = v[0] + v[1], incl = warp_inclusive_scan(sum, SumU64());
      const unsigned long long total = __shfl_sync(0xffffffffu, incl, 31);
      int r = -1;
      if (total > 0) {
        const unsigned long long t = pick(u, total);
        unsigned long long before = incl - sum;
#pragma unroll
        for (int q = 0; q < 2; q++) {
          if (before <= t && t < before + v[q]) r = r0 + q;
          before += v[q];
        }
      }
      r = __reduce_max_sync(0xffffffffu, r);
      if (threadIdx.x == 0) s.pick = r;
    }
    __syncthreads();
    const int r = s.pick;
    __syncthreads();
    return r;
  }
  using ScanU = cub::BlockScan<unsigned long long, kFastBlock>;
  const int r0 = (int)threadIdx.x * kFastItems;
  unsigned long long v[kFastItems], sum = 0;
#pragma unroll
  for (int q = 0; q < kFastItems; q++) {
    v[q] = r0 + q < kept ? val(r0 + q) : 0ull;
    sum += v[q];
  }
  unsigned long long before, total;
  ScanU(s.tmp.su).ExclusiveSum(sum, before, total);
  if (threadIdx.x == 0) s.pick = -1;
  __syncthreads();
  if (total > 0) {
    const unsigned long long t = pick(u, total);
#pragma unroll
    for (int q = 0; q < kFastItems; q++) {
      if (before <= t && t < before + v[q]) s.pick = r0 + q;
      before += v[q];
    }
  }
  __syncthreads();
  const int r = s.pick;
  __syncthreads();
  return r;
}

// fast_attributes raises a fast kernel's dynamic shared memory limit above
// the 48 KB default and, on devices with clusters, allows clusters of up to
// kMaxCluster (16) blocks: once per kernel (fast_cluster and fast_launch
// both need them).
inline cudaError_t fast_attributes(const void *kernel) {
  static KernelMemo<bool> set;
  bool done;
  if (set.find(kernel, done)) return cudaSuccess;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sizeof(FastSmem));
  if (err == cudaSuccess && cluster_path())
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (err == cudaSuccess) set.put(kernel, true);
  return err;
}

// fast_cluster says whether kernel, a fast kernel's CLUSTER variant, runs a
// launch of a's layout: rows of 8 to 16 chunks (at most ~50 rows, where the
// hand-over through global memory is a large part of a launch), on a
// device and from a binary with clusters, where such a cluster fits.
template <typename K>
bool fast_cluster(K kernel, const FastArgs &a) {
  if (a.chunks < 8 || a.chunks > kMaxCluster || !cluster_path() || !cluster_binary((const void *)kernel))
    return false;
  if (fast_attributes((const void *)kernel) != cudaSuccess) {
    cudaGetLastError();  // not sticky: the plain launch follows
    return false;
  }
  return max_clusters((const void *)kernel, a.chunks, kFastBlock, sizeof(FastSmem)) > 0;
}

// fast_launch launches a fast kernel with its dynamic shared memory, each
// row's chunks (grid.x) as one cluster where cluster (fast_cluster).
template <typename... Args>
int fast_launch(void (*kernel)(Args...), dim3 grid, bool cluster, const char *what, Args... args) {
  const cudaError_t err = fast_attributes((const void *)kernel);
  if (err != cudaSuccess) return cuda_status(err, what);
  if (cluster) return launch_cluster(kernel, grid, kFastBlock, sizeof(FastSmem), (int)grid.x, what, args...);
  kernel<<<grid, kFastBlock, sizeof(FastSmem), stream()>>>(args...);
  return check_launch(what);
}

// fast_layout picks the chunks per row for a launch of slots rows of vocab
// tokens: the fewest that give about three blocks per SM (chunks of at least
// kFastMinChunk tokens, at most kFastMaxChunks). Every chunk but the row's
// last pays a hand-over (its candidates through memory, the merge), and a
// block that scans a whole row needs none, so rows are split only to fill
// the GPU: B = 512 takes whole rows, B = 128 four chunks, B = 1 sixteen.
inline void fast_layout(int slots, int vocab, int &chunks, int &chunk) {
  int c = (3 * device_sms() + slots - 1) / slots;
  chunks = max(1, min(c, min(kFastMaxChunks, (vocab + kFastMinChunk - 1) / kFastMinChunk)));
  chunk = split_row(vocab, chunks);
}

// fast_bytes is the workspace the fast path needs for slots rows.
inline size_t fast_bytes(int slots, int chunks) {
  size_t b = ((sizeof(FastChunk) * (size_t)slots * chunks + 255) & ~(size_t)255) + 256 * (((size_t)slots * 4 + 255) / 256);
  if (chunks > 1) b += 2 * 4 * (size_t)slots * chunks * kFastChunkOut;
  return b;
}

// fast_args carves the workspace at base for the fast path.
inline int fast_args(char *base, int slots, int vocab, RowParams rp, int flags, const int *map, FastArgs &a) {
  fast_layout(slots, vocab, a.chunks, a.chunk);
  a.vocab = vocab;
  a.rp = rp;
  a.flags = flags;
  a.map = map;
  a.stats = reinterpret_cast<FastChunk *>(base);
  base += (sizeof(FastChunk) * (size_t)slots * a.chunks + 255) & ~(size_t)255;
  a.todo = reinterpret_cast<int *>(base);
  base += 256 * (((size_t)slots * 4 + 255) / 256);
  a.keys = nullptr;
  a.idx = nullptr;
  if (a.chunks > 1) {
    a.keys = reinterpret_cast<unsigned *>(base);
    a.idx = reinterpret_cast<int *>(base + 4 * (size_t)slots * a.chunks * kFastChunkOut);
  }
  return counters(slots, &a.arrived);
}

}  // namespace sv
