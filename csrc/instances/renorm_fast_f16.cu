// renorm's top-k fast-path kernels for f16 logits (renorm.cuh), in a
// translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../renorm.cuh"

namespace sv {

FastKernels<RenormFastKernel<__half>> renorm_fast_kernels(const __half *) {
  return renorm_fast_instances<__half>();
}

}  // namespace sv
