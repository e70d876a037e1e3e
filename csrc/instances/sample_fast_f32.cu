// sample's top-k fast-path kernels for f32 logits (sample.cuh), in a
// translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../sample.cuh"

namespace sv {

FastKernels<SampleFastKernel<float>> sample_fast_kernels(const float *) {
  return sample_fast_instances<float>();
}

}  // namespace sv
