// sample's full-row kernels per token for f32 logits (sample.cuh), in a
// translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../sample.cuh"

namespace sv {

SampleFullKernels<float> sample_token_kernels(const float *) {
  return sample_full_instances<float, false>();
}

}  // namespace sv
