// fast_scan.cuh: step 1 of the fast path (fastrow.cuh): one read of a
// chunk of a row that keeps every token at or above a rising threshold.
#pragma once

#include "fast_select.cuh"

namespace sv {

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

}  // namespace sv
