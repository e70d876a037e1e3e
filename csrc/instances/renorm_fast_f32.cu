// renorm's top-k fast-path kernels for f32 logits (renorm.cuh), in a
// translation unit of their own so that the kernel build compiles them
// beside the others.
#include "../renorm.cuh"

namespace sv {

FastKernels<RenormFastKernel<float>> renorm_fast_kernels(const float *) {
  return renorm_fast_instances<float>();
}

}  // namespace sv
