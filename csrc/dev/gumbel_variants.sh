#!/usr/bin/env bash
# gumbel_variants.sh: sample's unfiltered Gumbel-max before and after the
# one-read kernel with its exact recheck (issue 30 part 3), in one call on
# the GPU machine after the gpu-bundle unpack and `make -j16 kernels
# SAMPVIZ_ARCHS=sm_90` (this script runs that make too). Each variant is a
# library of its own (csrc/dev/variants_lib.sh): the product's objects,
# with the units a variant changes compiled from its copy; `sampviz bench
# --quick --ops sample --match 'gumbel|plain'` runs on each. Variants (VARIANTS picks them,
# default all, in this order):
#   base   the product (build/libsampviz_kernels.so): gumbel_kernel, 512
#          threads, two blocks an SM
#   old    the launcher before it (csrc/dev/gumbel/sample.cu.old,
#          verbatim): unfiltered Gumbel by the lean full-row kernel, f32math
#          logs for every token (sample.cuh's old kernels are unchanged in
#          today's header, so only sample.cu differs; sample.cuh.old there
#          is the header before, kept for reference)
#   b256   the product with kGumbelBlock = 256 (four blocks an SM): sample.cu
#          and the sample_tokens_* instances from an edited copy of csrc/
# Second session (issue 30 part 3, the product's ~4 us over the harness's
# tuned exact kernel; the new units are compiled from a copy of csrc/ with
# that variant's sample.cuh):
#   base   (since run 154) the winning group's exact scores only for its
#          tokens whose approximate score reaches the threshold
#          (gumbel_pick: about one f32math score a row instead of 8 in the
#          block's serial tail), the three block maxima in one round (one
#          barrier where three Reduce::max took six), and the row's max and
#          min logit kept as packed 16-bit pairs on the aligned path
#          (csrc/dev/gumbel/hmm.py, applied): 260 instructions a group of 8
#          in the main loop where nohmm takes 268 (nvcc 11.8 SASS)
#   prev   the first one-read kernel, run 153 (csrc/dev/gumbel/sample.cuh.prev)
#   nohmm  base without the packed pairs (csrc/dev/gumbel/sample.cuh.nohmm)
#   pick   base with prev's three Reduce::max (the gain of gumbel_pick alone)
#   group  base with prev's whole-group exact scores (the gain of the fused
#          maxima alone)
# With SUITE=1 base and b256 (where built) run the sample GPU tests
# (TestGPUSample|TestGPUVariants, which hold TestGPUSampleGumbel's
# adversarial rows) against engine/cpu, and base also runs them under
# compute-sanitizer memcheck (quick mode).
# Logs go to $OUT (else gpu-out); summary.txt has the table.
source csrc/dev/variants_lib.sh
names=(${VARIANTS:-base prev nohmm pick group old b256})
# units NAME: the product units (under csrc/) that variant NAME compiles from its copy.
units() {
  case $1 in
    base) ;;
    old) echo sample.cu ;;
    prev | nohmm | pick | group) echo instances/sample_tokens_bf16.cu instances/sample_tokens_f16.cu instances/sample_tokens_f32.cu ;;  # sample.cu takes the kernels by pointer
    *) echo sample.cu instances/sample_tokens_bf16.cu instances/sample_tokens_f16.cu instances/sample_tokens_f32.cu ;;
  esac
}
# edit NAME FILE: the python that turns FILE's text s into NAME's copy.
edit() {
  case $1:$2 in
    old:sample.cu) echo 's = open("csrc/dev/gumbel/sample.cu.old").read()' ;;
    prev:sample.cuh | nohmm:sample.cuh) echo "s = open('csrc/dev/gumbel/sample.cuh.$1').read()" ;;
    b256:sample.cuh) echo 's = s.replace("constexpr int kGumbelBlock = 512;", "constexpr int kGumbelBlock = 256;")' ;;
    pick:sample.cuh) echo 's = s.replace("  __shared__ float red3[3][BLOCK / 32];\n  float m = s.mx, ax = s.ax == s.ax ? s.ax : kInf, amax = s.a1;  // NaN counts as +Inf\n  gumbel_max3<BLOCK>(red3, m, ax, amax);\n", "  const float m = Reduce<BLOCK>::max(sh.red, s.mx);\n  const float ax = Reduce<BLOCK>::max(sh.red, s.ax == s.ax ? s.ax : kInf);\n  const float amax = Reduce<BLOCK>::max(sh.red, s.a1);\n")' ;;
    group:sample.cuh) echo 's = s.replace("gumbel_pick(x, K, rng, c, thr, m, temp, s.g1, n, best);", "gumbel_exact(x, rng, m, temp, 8 * s.g1, min(n, 8 * s.g1 + 8), best);")' ;;
    *) echo pass ;;
  esac
}
variants_build gumbel
variants_bench gumbel 'gumbel|plain'
if [ "${SUITE:-0}" = 1 ]; then
  for n in "${names[@]}"; do
    case $n in old | prev | pick | group) continue ;; esac  # old and prev were the product, suite-tested then; pick and group are base's halves
    mem=-
    [ "$n" = base ] && mem='TestGPUSampleGumbel|TestGPUVariants'
    variant_tests gumbel "$n" 'TestGPUSample|TestGPUVariants' "$mem"
  done
fi
note "total $(($(date +%s) - started)) s"
