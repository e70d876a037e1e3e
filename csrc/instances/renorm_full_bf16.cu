// renorm's full-row kernels for bf16 logits (renorm.cuh), in a translation
// unit of their own so that the kernel build compiles them beside the
// others.
#include "../renorm.cuh"

namespace sv {

FullRowKernels<RenormKernel<__nv_bfloat16>> renorm_full_kernels(const __nv_bfloat16 *) {
  return renorm_full_instances<__nv_bfloat16>();
}

}  // namespace sv
