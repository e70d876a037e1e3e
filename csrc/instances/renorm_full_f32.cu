// renorm's full-row kernels for f32 logits (renorm.cuh), in a translation
// unit of their own so that the kernel build compiles them beside the
// others.
#include "../renorm.cuh"

namespace sv {

FullRowKernels<RenormKernel<float>> renorm_full_kernels(const float *) {
  return renorm_full_instances<float>();
}

}  // namespace sv
