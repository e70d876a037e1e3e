// spec_verify's top-k fast-path kernels for f32 logits (spec_verify.cuh), in
// a translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../spec_verify.cuh"

namespace sv {

SpecFastKernels<float> spec_fast_kernels(const float *) {
  return spec_fast_instances<float>();
}

}  // namespace sv
