// renorm's top-k fast-path kernels for bf16 logits (renorm.cuh), in a
// translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../renorm.cuh"

namespace sv {

FastKernels<RenormFastKernel<__nv_bfloat16>> renorm_fast_kernels(const __nv_bfloat16 *) {
  return renorm_fast_instances<__nv_bfloat16>();
}

}  // namespace sv
