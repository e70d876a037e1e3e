// spec_verify's top-k fast-path kernels for bf16 logits (spec_verify.cuh),
// in a translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../spec_verify.cuh"

namespace sv {

SpecFastKernels<__nv_bfloat16> spec_fast_kernels(const __nv_bfloat16 *) {
  return spec_fast_instances<__nv_bfloat16>();
}

}  // namespace sv
