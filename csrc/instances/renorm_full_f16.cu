// renorm's full-row kernels for f16 logits (renorm.cuh), in a translation
// unit of their own so that the kernel build compiles them beside the
// others.
#include "../renorm.cuh"

namespace sv {

FullRowKernels<RenormKernel<__half>> renorm_full_kernels(const __half *) {
  return renorm_full_instances<__half>();
}

}  // namespace sv
