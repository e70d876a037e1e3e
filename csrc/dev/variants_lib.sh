# variants_lib.sh: what a csrc/dev/*_variants.sh script that builds kernel
# variants as text edits of csrc/ shares (sourced, never run): the
# gpu-bundle unpack, the summary, each variant's edited copy of csrc/ and
# its units compiled beside the product's build, its library linked from the
# product's other objects, and `sampviz bench --quick` on each. The sourcing
# script defines names (the variants, "base" the product), units NAME (the
# csrc/ units NAME compiles from its copy) and edit NAME FILE (python that
# edits s, FILE's text, or "pass"), then calls variants_build and
# variants_bench with its prefix, and variant_tests for the variants its
# SUITE=1 checks.
set -uo pipefail
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
archs=sm_90
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 -gencode arch=compute_90,code=sm_90"
EDITED=${EDITED:-sample.cu sample.cuh}  # the csrc/ files edit may change
started=$(date +%s)

# lib_of PREFIX NAME is variant NAME's library.
lib_of() { [ "$2" = base ] && echo "$PWD/build/libsampviz_kernels.so" || echo "$PWD/build/variants/$1-$2/libsampviz_kernels.so"; }

# variants_build PREFIX makes each variant's copy of csrc/ and compiles its
# units while `make kernels` builds the product. With PREP_ONLY=1 it only
# makes the copies and exits (a check of the edits, without a GPU).
variants_build() {
  local pids="" n f e u o d
  for n in "${names[@]}"; do
    [ "$n" = base ] && continue
    d=build/variants/$1-$n; rm -rf "$d"; mkdir -p "$d"; cp -r csrc "$d/csrc"
    for f in $EDITED; do
      e=$(edit "$n" "$f")
      [ "$e" = pass ] && continue
      python3 -c "s = open('csrc/$f').read(); t = s; $e; assert s != t, 'edit of $n $f did not apply'; open('$d/csrc/$f', 'w').write(s)" ||
        { note "$n: edit of $f failed"; rm -rf "$d"; continue 2; }
    done
    [ "${PREP_ONLY:-0}" = 1 ] && { note "$n: edited (units $(units "$n" | tr '\n' ' '))"; continue; }
    for u in $(units "$n"); do
      o=$d/obj/${u%.cu}.o; mkdir -p "$(dirname "$o")"
      (timeout 240 nvcc $FL -c -o "$o" "$d/csrc/$u" >"$o.log" 2>&1) &
      pids="$pids $!"
    done
  done
  [ "${PREP_ONLY:-0}" = 1 ] && exit 0
  make -j"$(nproc)" kernels SAMPVIZ_ARCHS=$archs >"$O/build.log" 2>&1 || { note "build FAILED"; grep error "$O/build.log" | head; exit 1; }
  wait $pids
  note "build $(($(date +%s) - started)) s"
}

# variants_bench PREFIX MATCH [OPS] links each variant and runs `sampviz
# bench --quick --ops OPS --match MATCH` on it (OPS: sample unless given),
# each case's median to the summary.
variants_bench() {
  local n d u skip objs ops=${3:-sample}
  for n in "${names[@]}"; do
    if [ "$n" != base ]; then
      d=build/variants/$1-$n
      [ -d "$d/obj" ] || continue
      skip=""
      for u in $(units "$n"); do skip="$skip ! -path build/obj/$archs/${u%.cu}.o"; done
      objs="$(find build/obj/$archs -name '*.o' $skip | sort) $(find "$d/obj" -name '*.o' | sort)"
      if ! nvcc $FL -shared -o "$d/libsampviz_kernels.so" $objs >"$d/link.log" 2>&1; then
        note "$n does not build:"; cat "$d"/obj/*.log "$d"/obj/*/*.log "$d/link.log" 2>/dev/null | grep -m5 error | tee -a "$S"; continue
      fi
    fi
    timeout 120 ./gpu-bundle/sampviz bench --kernels "$(lib_of "$1" "$n")" --quick --ops "$ops" --match "$2" \
      >"$O/bench-$ops-$n.txt" 2>&1
    note "== $n (exit $?)"
    grep " us$" "$O/bench-$ops-$n.txt" | tee -a "$S"
  done
}

# variant_tests PREFIX NAME TESTS [MEMTESTS] runs the GPU tests TESTS
# (cuda.test -test.run) on variant NAME's library, then compute-sanitizer
# memcheck on MEMTESTS (TESTS when empty; "-": none) in the quick mode, and
# notes both in the summary. A variant that did not build is skipped.
variant_tests() {
  local lib rc mrc=- mem="no memcheck"
  lib=$(lib_of "$1" "$2")
  [ -f "$lib" ] || return 0
  SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 timeout "${SUITE_TIMEOUT:-150}" ./gpu-bundle/cuda.test -test.count=1 \
    -test.v -test.run "$3" >"$O/suite-$2.log" 2>&1
  rc=$?
  if [ "${4:-}" != - ]; then
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
      SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3" \
      timeout "${SUITE_TIMEOUT:-150}" ./gpu-bundle/cuda.test -test.count=1 -test.run "${4:-$3}" >"$O/memcheck-$2.log" 2>&1
    mrc=$?
    mem="$(grep -c 'ERROR SUMMARY: 0 errors' "$O/memcheck-$2.log") clean of $(grep -c 'ERROR SUMMARY' "$O/memcheck-$2.log")"
  fi
  note "suite $2: exit $rc ($(grep -c -- '--- PASS' "$O/suite-$2.log") passed, $(grep -c -- '--- FAIL' "$O/suite-$2.log") failed); memcheck exit $mrc, $mem"
}
