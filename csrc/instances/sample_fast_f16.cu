// sample's top-k fast-path kernels for f16 logits (sample.cuh), in a
// translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../sample.cuh"

namespace sv {

FastKernels<SampleFastKernel<__half>> sample_fast_kernels(const __half *) {
  return sample_fast_instances<__half>();
}

}  // namespace sv
