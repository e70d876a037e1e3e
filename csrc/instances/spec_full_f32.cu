// spec_verify's prepare and chain kernels for f32 logits (spec_verify.cuh),
// in a translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../spec_verify.cuh"

namespace sv {

SpecFullKernels<float> spec_full_kernels(const float *) {
  return spec_full_instances<float>();
}

}  // namespace sv
