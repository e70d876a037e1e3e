// sample's full-row kernels per token for bf16 logits (sample.cuh), in a
// translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../sample.cuh"

namespace sv {

SampleFullKernels<__nv_bfloat16> sample_token_kernels(const __nv_bfloat16 *) {
  return sample_full_instances<__nv_bfloat16, false>();
}

}  // namespace sv
