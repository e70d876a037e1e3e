// sample's top-k fast-path kernels for bf16 logits (sample.cuh), in a
// translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../sample.cuh"

namespace sv {

FastKernels<SampleFastKernel<__nv_bfloat16>> sample_fast_kernels(const __nv_bfloat16 *) {
  return sample_fast_instances<__nv_bfloat16>();
}

}  // namespace sv
