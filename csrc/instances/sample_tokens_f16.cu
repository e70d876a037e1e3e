// sample's full-row kernels per token for f16 logits (sample.cuh), in a
// translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../sample.cuh"

namespace sv {

SampleFullKernels<__half> sample_token_kernels(const __half *) {
  return sample_full_instances<__half, false>();
}

}  // namespace sv
