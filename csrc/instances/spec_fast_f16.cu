// spec_verify's top-k fast-path kernels for f16 logits (spec_verify.cuh), in
// a translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../spec_verify.cuh"

namespace sv {

SpecFastKernels<__half> spec_fast_kernels(const __half *) {
  return spec_fast_instances<__half>();
}

}  // namespace sv
