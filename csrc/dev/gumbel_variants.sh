#!/usr/bin/env bash
# gumbel_variants.sh: sample's unfiltered Gumbel-max before and after the
# one-read kernel with its exact recheck (issue 30 part 3), in one call on
# the GPU machine after the gpu-bundle unpack and `make -j16 kernels
# SAMPVIZ_ARCHS=sm_90` (this script runs that make too). Each variant is a
# library of its own: the product's objects, with the units a variant
# changes compiled from its copy; `sampviz bench --quick --ops sample
# --match 'gumbel|plain'` runs on each. Variants (VARIANTS picks them,
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
set -uo pipefail
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
archs=sm_90
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 -gencode arch=compute_90,code=sm_90"
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
# edit NAME: the python that turns csrc/sample.cuh into NAME's copy.
edit() {
  case $1 in
    b256) echo 's = s.replace("constexpr int kGumbelBlock = 512;", "constexpr int kGumbelBlock = 256;")' ;;
    pick) echo 's = s.replace("  __shared__ float red3[3][BLOCK / 32];\n  float m = s.mx, ax = s.ax == s.ax ? s.ax : kInf, amax = s.a1;  // NaN counts as +Inf\n  gumbel_max3<BLOCK>(red3, m, ax, amax);\n", "  const float m = Reduce<BLOCK>::max(sh.red, s.mx);\n  const float ax = Reduce<BLOCK>::max(sh.red, s.ax == s.ax ? s.ax : kInf);\n  const float amax = Reduce<BLOCK>::max(sh.red, s.a1);\n")' ;;
    group) echo 's = s.replace("gumbel_pick(x, K, rng, c, thr, m, temp, s.g1, n, best);", "gumbel_exact(x, rng, m, temp, 8 * s.g1, min(n, 8 * s.g1 + 8), best);")' ;;
    *) echo pass ;;
  esac
}
s=$(date +%s)
pids=""
for n in "${names[@]}"; do
  [ "$n" = base ] && continue
  d=build/variants/gumbel-$n; rm -rf "$d"; mkdir -p "$d"; cp -r csrc "$d/csrc"
  if [ "$n" = old ]; then
    cp csrc/dev/gumbel/sample.cu.old "$d/csrc/sample.cu"
  elif [ "$n" = prev ] || [ "$n" = nohmm ]; then
    cp csrc/dev/gumbel/sample.cuh.$n "$d/csrc/sample.cuh"
  else
    e=$(edit "$n")
    python3 -c "s = open('csrc/sample.cuh').read(); t = s; $e; assert s != t, 'edit of $n did not apply'; open('$d/csrc/sample.cuh', 'w').write(s)" ||
      { note "$n: edit failed"; continue; }
  fi
  for u in $(units "$n"); do
    o=$d/obj/${u%.cu}.o; mkdir -p "$(dirname "$o")"
    (timeout 240 nvcc $FL -c -o "$o" "$d/csrc/$u" >"$o.log" 2>&1) &
    pids="$pids $!"
  done
done
make -j"$(nproc)" kernels SAMPVIZ_ARCHS=$archs >"$O/build.log" 2>&1 || { note "build FAILED"; grep error "$O/build.log" | head; exit 1; }
wait $pids
note "build $(($(date +%s) - s)) s"
lib_of() { [ "$1" = base ] && echo "$PWD/build/libsampviz_kernels.so" || echo "$PWD/build/variants/gumbel-$1/libsampviz_kernels.so"; }
for n in "${names[@]}"; do
  if [ "$n" != base ]; then
    d=build/variants/gumbel-$n
    skip=""
    for u in $(units "$n"); do skip="$skip ! -path build/obj/$archs/${u%.cu}.o"; done
    objs="$(find build/obj/$archs -name '*.o' $skip | sort) $(find "$d/obj" -name '*.o' | sort)"
    if ! nvcc $FL -shared -o "$d/libsampviz_kernels.so" $objs >"$d/link.log" 2>&1; then
      note "$n does not build:"; cat "$d"/obj/*.log "$d"/obj/*/*.log "$d/link.log" 2>/dev/null | grep -m5 error | tee -a "$S"; continue
    fi
  fi
  timeout 120 ./gpu-bundle/sampviz bench --kernels "$(lib_of "$n")" --quick --ops sample --match 'gumbel|plain' \
    >"$O/bench-$n.txt" 2>&1
  note "== $n (exit $?)"
  grep -E "sample (plain|gumbel)" "$O/bench-$n.txt" | awk '{print "   ", $0}' | tee -a "$S"
done
if [ "${SUITE:-0}" = 1 ]; then
  for n in "${names[@]}"; do
    lib=$(lib_of "$n")
    [ -f "$lib" ] || continue
    case $n in old | prev | pick | group) continue ;; esac  # old and prev were the product, suite-tested then; pick and group are base's halves
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 timeout 150 ./gpu-bundle/cuda.test -test.count=1 \
      -test.run 'TestGPUSample|TestGPUVariants' >"$O/suite-$n.log" 2>&1
    rc=$?
    line="suite $n: exit $rc ($(grep -c -- '--- FAIL' "$O/suite-$n.log") failures)"
    if [ "$n" = base ]; then
      SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
        SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3" \
        timeout 150 ./gpu-bundle/cuda.test -test.count=1 -test.run 'TestGPUSampleGumbel|TestGPUVariants' \
        >"$O/memcheck-$n.log" 2>&1
      mrc=$?
      line="$line; memcheck exit $mrc, $(grep -c 'ERROR SUMMARY: 0 errors' "$O/memcheck-$n.log") clean of $(grep -c 'ERROR SUMMARY' "$O/memcheck-$n.log")"
    fi
    note "$line"
  done
fi
note "total $(($(date +%s) - s)) s"
