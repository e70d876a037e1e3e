// f32math.cuh mirrors engine/f32math: float32 exp and log (Cephes' expf and
// logf) written out of single IEEE operations. __fmul_rn, __fadd_rn and
// __fsub_rn are never contracted into fused multiply-adds, so the results
// equal Go's bit for bit; never build this with --use_fast_math or -ftz.
#pragma once

namespace sv {

// pow2 returns 2^n for n in [-126, 127].
__device__ __forceinline__ float pow2(int n) { return __uint_as_float((unsigned)(n + 127) << 23); }

// exp_scale returns y * 2^n with one rounding, for y in [0.5, 2), n in [-151, 129].
__device__ __forceinline__ float exp_scale(float y, int n) {
  if (n > 127) return __fmul_rn(__fmul_rn(y, pow2(127)), pow2(n - 127));
  if (n < -126) return __fmul_rn(__fmul_rn(y, pow2(n + 64)), pow2(-64));
  return __fmul_rn(y, pow2(n));
}

// exp_reduced is the core of Cephes' expf: e^x = y * 2^n, y returned in
// [0.5, 2) from the polynomial on the reduced argument, n set.
__device__ __forceinline__ float exp_reduced(float x, int &n) {
  const float n_f = floorf(__fadd_rn(__fmul_rn(x, 1.44269504088896341f), 0.5f));
  float r = __fsub_rn(x, __fmul_rn(n_f, 0.693359375f));
  r = __fsub_rn(r, __fmul_rn(n_f, -2.12194440e-4f));
  const float z = __fmul_rn(r, r);
  float y = __fadd_rn(__fmul_rn(1.9875691500e-4f, r), 1.3981999507e-3f);
  y = __fadd_rn(__fmul_rn(y, r), 8.3334519073e-3f);
  y = __fadd_rn(__fmul_rn(y, r), 4.1665795894e-2f);
  y = __fadd_rn(__fmul_rn(y, r), 1.6666665459e-1f);
  y = __fadd_rn(__fmul_rn(y, r), 5.0000001201e-1f);
  y = __fadd_rn(__fmul_rn(y, z), r);
  y = __fadd_rn(y, 1.0f);
  n = (int)n_f;
  return y;
}

// f32_exp is f32math.Exp: exactly 1 at 0, 0 at -Inf, NaN at NaN.
__device__ __forceinline__ float f32_exp(float x) {
  if (x != x) return x;
  if (x > 88.7228394f) return __int_as_float(0x7f800000);
  if (x < -103.972077f) return 0.0f;
  int n;
  const float y = exp_reduced(x, n);
  return exp_scale(y, n);
}

// f32_log is f32math.Log: -Inf at 0, NaN below 0, +Inf at +Inf.
__device__ __forceinline__ float f32_log(float x) {
  if (x != x || x < 0.0f) return __int_as_float(0x7fffffff);
  if (x == 0.0f) return -__int_as_float(0x7f800000);
  if (x > 3.40282346638528859812e+38f) return x;
  unsigned bits = __float_as_uint(x);
  int e = 0;
  if (bits < 0x00800000u) {  // subnormal: into the normal range first
    x = __fmul_rn(x, 8388608.0f);
    bits = __float_as_uint(x);
    e = -23;
  }
  e += (int)(bits >> 23) - 126;
  float m = __uint_as_float((bits & 0x807fffffu) | 0x3f000000u);  // [0.5, 1)
  if (m < 0.707106781186547524f) {
    e--;
    m = __fsub_rn(__fadd_rn(m, m), 1.0f);
  } else {
    m = __fsub_rn(m, 1.0f);
  }
  const float z = __fmul_rn(m, m);
  float y = __fsub_rn(__fmul_rn(7.0376836292e-2f, m), 1.1514610310e-1f);
  y = __fadd_rn(__fmul_rn(y, m), 1.1676998740e-1f);
  y = __fsub_rn(__fmul_rn(y, m), 1.2420140846e-1f);
  y = __fadd_rn(__fmul_rn(y, m), 1.4249322787e-1f);
  y = __fsub_rn(__fmul_rn(y, m), 1.6668057665e-1f);
  y = __fadd_rn(__fmul_rn(y, m), 2.0000714765e-1f);
  y = __fsub_rn(__fmul_rn(y, m), 2.4999993993e-1f);
  y = __fadd_rn(__fmul_rn(y, m), 3.3333331174e-1f);
  y = __fmul_rn(__fmul_rn(y, m), z);
  const float fe = (float)e;
  if (e != 0) y = __fadd_rn(y, __fmul_rn(-2.12194440e-4f, fe));
  y = __fadd_rn(y, __fmul_rn(-0.5f, z));
  float r = __fadd_rn(m, y);
  if (e != 0) r = __fadd_rn(r, __fmul_rn(0.693359375f, fe));
  return r;
}

// f32_exp_nonpos is f32_exp for x <= 0 or -Inf (never NaN), which is what
// softmax weights feed it: the NaN and overflow tests cannot fire, and the
// scale 2^n has n <= 0, so they are left out; every result is bit-identical
// to f32_exp on that domain.
__device__ __forceinline__ float f32_exp_nonpos(float x) {
  if (x < -103.972077f) return 0.0f;
  int n;
  const float y = exp_reduced(x, n);
  if (n < -126) return __fmul_rn(__fmul_rn(y, pow2(n + 64)), pow2(-64));
  return __fmul_rn(y, pow2(n));
}

// scaled returns float32((x - m) / t): one subtraction, one IEEE division;
// at t = 1 the division is exact and skipped.
__device__ __forceinline__ float scaled(float x, float m, float t) {
  const float d = __fsub_rn(x, m);
  return t == 1.0f ? d : __fdiv_rn(d, t);
}

// weight_of is w = f32math.Exp((x - m) / t), the kernels' softmax weight,
// for x <= m (or -Inf) and t > 0: the argument is <= 0 or -Inf.
__device__ __forceinline__ float weight_of(float x, float m, float t) {
  return f32_exp_nonpos(scaled(x, m, t));
}

}  // namespace sv
