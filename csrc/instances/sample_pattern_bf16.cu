// sample's full-row kernels by pattern for bf16 logits (sample.cuh), in a
// translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../sample.cuh"

namespace sv {

SampleFullKernels<__nv_bfloat16> sample_pattern_kernels(const __nv_bfloat16 *) {
  return sample_full_instances<__nv_bfloat16, true>();
}

}  // namespace sv
