"""grouptheta.py: group_theta(s) edits csrc/fast_scan.cuh's text s
(b1b_variants.sh's "grp" variants; as a command, grouptheta.py FILE edits
the file): a chunk of at most one tile (B=1's chunks) takes its first
theta from group maxima instead of kth_key's radix select. G = 256/L groups
of L lanes (G >= k); each group's largest vector-max key is a distinct
token at or above the smallest of them,
so that smallest is at most the k-th largest key: exact by the same rule as
the radix select, with up to five shuffles, a warp min and the barrier
that is already there in place of kth_key's passes. Only for k <= 64
(L = 32, 16, 8, 4 for k <= 8, 16, 32, 64): at k = 256 (L = 1) a model
(random normal logits) passes ~1400-1800 of a tile, near the 2048 a chunk
hands on; at k = 50 ~300 of 4008 or 8016 (the radix select ~50)."""
import sys

old = """    s.keys[head_count + q * BLOCK + threadIdx.x] = vm[q] == vm[q] ? order_key(vm[q]) : 0u;
  }
  __syncthreads();
  if (min(nvec, BLOCK * UNROLL) >= k) {
    const unsigned t0 = kth_key<PASSES>(s.keys + head_count, BLOCK * UNROLL, k, s);
    theta = t0 > order_key(-kInf) ? key_value(t0) : -kInf;
  }
"""
new = """    s.keys[head_count + q * BLOCK + threadIdx.x] = vm[q] == vm[q] ? order_key(vm[q]) : 0u;
  }
  const bool small = k <= BLOCK / 4 && end - begin <= BLOCK * UNROLL * N;
  if (small) {
    unsigned gk = 0;
#pragma unroll
    for (int q = 0; q < UNROLL; q++) {
      const int j = q * BLOCK + (int)threadIdx.x;
      if (j < nvec && vm[q] == vm[q]) gk = max(gk, order_key(vm[q]));
    }
#pragma unroll
    for (int l = 1; l < 32; l *= 2)  // groups of 2l lanes while BLOCK / (2l) >= k
      if (BLOCK / (2 * l) >= k) gk = max(gk, __shfl_xor_sync(0xffffffffu, gk, l));
    gk = __reduce_min_sync(0xffffffffu, gk);
    if ((threadIdx.x & 31) == 0) s.hist[threadIdx.x >> 5] = gk;
  }
  __syncthreads();
  if (small) {
    unsigned t0 = s.hist[0];
#pragma unroll
    for (int w = 1; w < kFastWarps; w++) t0 = min(t0, s.hist[w]);
    theta = t0 > order_key(-kInf) ? key_value(t0) : -kInf;
  } else if (min(nvec, BLOCK * UNROLL) >= k) {
    const unsigned t0 = kth_key<PASSES>(s.keys + head_count, BLOCK * UNROLL, k, s);
    theta = t0 > order_key(-kInf) ? key_value(t0) : -kInf;
  }
"""


def group_theta(s):
    """Returns fast_scan.cuh's text s with the first tile's theta from group maxima."""
    assert s.count(old) == 1, "grouptheta.py: fast_scan.cuh's first-tile theta not found"
    return s.replace(old, new)


if __name__ == "__main__":
    p = sys.argv[1]
    t = group_theta(open(p).read())
    open(p, "w").write(t)
