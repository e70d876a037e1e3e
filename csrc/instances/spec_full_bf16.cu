// spec_verify's prepare and chain kernels for bf16 logits (spec_verify.cuh),
// in a translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../spec_verify.cuh"

namespace sv {

SpecFullKernels<__nv_bfloat16> spec_full_kernels(const __nv_bfloat16 *) {
  return spec_full_instances<__nv_bfloat16>();
}

}  // namespace sv
