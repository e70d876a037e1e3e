// spec_verify's prepare and chain kernels for f16 logits (spec_verify.cuh),
// in a translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../spec_verify.cuh"

namespace sv {

SpecFullKernels<__half> spec_full_kernels(const __half *) {
  return spec_full_instances<__half>();
}

}  // namespace sv
