# hmm.py: the edit of csrc/sample.cuh that made variant hmm, applied to the
# product after run 154 (first run by
# gumbel_variants.sh with s the header's text): on the aligned 16-bit path
# a thread keeps the row's maximum and minimum logit as packed pairs
# (max.NaN/min.NaN .bf16x2 or .f16x2: 8 instructions a group of 8 where
# the product's float max and max.NaN |x| take 16) and folds them into its
# share's mx and ax after the loop (max |x| = max(max x, -min x); a NaN
# reaches ax through the pair maximum, as in the product).
def rep(a, b):
    global s
    assert a in s, a
    s = s.replace(a, b)

rep("""// gumbel_take scores group g's first cnt tokens (logits xs) approximately.
__device__ __forceinline__ void gumbel_take(""", """// gumbel_pmax, gumbel_pmin are NaN-propagating max and min of packed 16-bit pairs.
template <typename T>
__device__ __forceinline__ uint32_t gumbel_pmax(uint32_t a, uint32_t b) {
  uint32_t r;
  if constexpr (std::is_same<T, __nv_bfloat16>::value)
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  else
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <typename T>
__device__ __forceinline__ uint32_t gumbel_pmin(uint32_t a, uint32_t b) {
  uint32_t r;
  if constexpr (std::is_same<T, __nv_bfloat16>::value)
    asm("min.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  else
    asm("min.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <typename T>
__device__ __forceinline__ float gumbel_h2f(uint32_t bits) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value)
    return __uint_as_float(bits << 16);
  else
    return __half2float(__ushort_as_half((unsigned short)bits));
}

// gumbel_take scores group g's first cnt tokens (logits xs) approximately.
template <bool STAT = true>
__device__ __forceinline__ void gumbel_take(""")
rep("""      s.mx = fmaxf(s.mx, xs[e]);
      s.ax = gumbel_max_nan(s.ax, fabsf(xs[e]));
""", """      if (STAT) {
        s.mx = fmaxf(s.mx, xs[e]);
        s.ax = gumbel_max_nan(s.ax, fabsf(xs[e]));
      }
""")
rep("""    int g = threadIdx.x;
    GumbelRaw<T> cur;""", """    int g = threadIdx.x;
    const uint32_t ninf2 = std::is_same<T, __nv_bfloat16>::value ? 0xff80ff80u : 0xfc00fc00u;
    uint32_t hi2 = ninf2, lo2 = ninf2 ^ 0x80008000u;  // -inf, +inf pairs
    GumbelRaw<T> cur;""")
rep("""      gumbel_unpack<T>(cur, xs);
      gumbel_take(s, K, c, g, xs, 8);
      cur = nxt;
    }""", """      gumbel_unpack<T>(cur, xs);
      if constexpr (sizeof(T) == 2) {
        const uint4 r = cur.v[0];
        hi2 = gumbel_pmax<T>(hi2, gumbel_pmax<T>(gumbel_pmax<T>(r.x, r.y), gumbel_pmax<T>(r.z, r.w)));
        lo2 = gumbel_pmin<T>(lo2, gumbel_pmin<T>(gumbel_pmin<T>(r.x, r.y), gumbel_pmin<T>(r.z, r.w)));
        gumbel_take<false>(s, K, c, g, xs, 8);
      } else {
        gumbel_take(s, K, c, g, xs, 8);
      }
      cur = nxt;
    }
    if (sizeof(T) == 2 && (int)threadIdx.x < full) {
      const float h0 = gumbel_h2f<T>(hi2 & 0xffffu), h1 = gumbel_h2f<T>(hi2 >> 16);
      const float l0 = gumbel_h2f<T>(lo2 & 0xffffu), l1 = gumbel_h2f<T>(lo2 >> 16);
      s.mx = fmaxf(s.mx, fmaxf(h0, h1));
      s.ax = gumbel_max_nan(gumbel_max_nan(s.ax, gumbel_max_nan(fabsf(h0), fabsf(h1))),
                            gumbel_max_nan(fabsf(l0), fabsf(l1)));
    }""")
