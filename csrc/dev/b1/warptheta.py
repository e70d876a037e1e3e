# warptheta.py (dev, b1 variant "warptheta"): edits a copy of
# fast_scan.cuh so that the first tile's theta is the smallest, over the
# block's warps, of each warp's ceil(k / kFastWarps)-th largest vector max
# (a bitwise search on the keys in registers, one warp reduction a bit),
# in place of the block's radix select over the tile's vector maxima (a
# barrier to store them, two passes of four barriers and a block scan
# each). Still a lower bound of the chunk's k-th largest: each warp has
# ceil(k / 8) vector maxima at or above its own, so the block has at least
# k at or above the smallest. Looser than the block's k-th largest, so more
# candidates are appended. Used as: python3 warptheta.py FILE (in place).
import sys
p = sys.argv[1]
s = open(p).read()
def sub(s, a, b):
    assert a in s, "warptheta: text not found: " + a[:60]
    return s.replace(a, b)
s = sub(s, """    s.count = 0;
    s.overflow = 0;
  }
  __syncthreads();
  int nan = 0, high = 0;""", """    s.count = 0;
    s.overflow = 0;
    s.need = -1;  // the warps' smallest theta key (unsigned)
  }
  __syncthreads();
  int nan = 0, high = 0;""")
s = sub(s, """    s.keys[head_count + q * BLOCK + threadIdx.x] = vm[q] == vm[q] ? order_key(vm[q]) : 0u;
  }
  __syncthreads();
  if (min(nvec, BLOCK * UNROLL) >= k) {
    const unsigned t0 = kth_key<PASSES>(s.keys + head_count, BLOCK * UNROLL, k, s);
    theta = t0 > order_key(-kInf) ? key_value(t0) : -kInf;
  }""", """  }
  (void)head_count;
  if (min(nvec, BLOCK * UNROLL) >= k) {
    const int jw = (k + kFastWarps - 1) / kFastWarps;
    unsigned key[UNROLL];
#pragma unroll
    for (int q = 0; q < UNROLL; q++) key[q] = vm[q] == vm[q] ? order_key(vm[q]) : 0u;
    unsigned prefix = 0;
    for (int b = 31; b >= 32 - 8 * PASSES; b--) {
      const unsigned cand = prefix | (1u << b);
      unsigned c = 0;
#pragma unroll
      for (int q = 0; q < UNROLL; q++) c += key[q] >= cand;
      if ((int)__reduce_add_sync(0xffffffffu, c) >= jw) prefix = cand;
    }
    if ((threadIdx.x & 31) == 0) atomicMin(reinterpret_cast<unsigned *>(&s.need), fill_key<PASSES>(prefix));
    __syncthreads();
    const unsigned t0 = (unsigned)s.need;
    theta = t0 > order_key(-kInf) ? key_value(t0) : -kInf;
  }""")
open(p, "w").write(s)
