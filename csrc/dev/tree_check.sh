#!/usr/bin/env bash
# tree_check.sh: spec_tree_verify's CUDA kernel (issue 28) checked on the
# GPU machine in one call, within about 9.5 minutes: build the kernels
# (timed; should csrc/spec_tree_verify.cu not build, its errors are shown
# and the library is rebuilt with SV_TREE=0, so that the rest checks the
# fallback: the tree tests skip and the backend refuses the op), then
#   suite     the tree tests of engine/cuda with SAMPVIZ_REQUIRE_GPU=1 (and
#             SAMPVIZ_REQUIRE_TREE=1 when the tree kernel built): bit for
#             bit against engine/cpu's twin, judged against engine/ref,
#             chains as trees against spec_verify, plus TestGPUVariants
#             (every op's variants against engine/cpu, a regression check
#             of the library the tree unit joined) and the Go-only tests
#             (plan layout, error parity, the kernel's decomposition)
#   memcheck  compute-sanitizer memcheck on the workers of the quick tree
#             tests; racecheck on the quick TestGPUTree (reported, not
#             failed on)
#   check     `sampviz check --backend cuda` against --backend cpu on the
#             five tree scenarios, and `sampviz serve --backend cuda` on
#             them (TestServeScenarios)
#   bench     `sampviz bench --ops spec_tree_verify,spec_verify` (the
#             spec_verify rows: the same machine's baseline)
# Needs gpu-bundle/ from `make gpu-bundle` (run where Go is; the call
# carries it). Logs go to $GPU_OUT (default $OUT, else gpu-out), at most
# eight files: build.log suite.log memcheck.log racecheck.log check.log
# bench.txt bench.json summary.txt. STAGES picks the steps (default "suite
# memcheck check bench"; the build always runs unless NO_BUILD=1).
# TREE_BUDGET (seconds, default 560) bounds the whole script: each stage
# gets at most what is left.
#
# The expected floor and what this kernel's shape should reach are in
# docs/perf-log.md ("spec_tree_verify: the first kernel").
set -uo pipefail
t0=$(date +%s)
out=${GPU_OUT:-${OUT:-gpu-out}}
stages=${STAGES:-suite memcheck check bench}
budget=${TREE_BUDGET:-560}
mkdir -p "$out"
lib=$(pwd)/build/libsampviz_kernels.so
summary="$out/summary.txt"
: >"$summary"
status=0
has() { [[ " $stages " == *" $1 "* ]]; }
note() { echo "$*" | tee -a "$summary"; }
# left CAP: the seconds a stage may take, at most CAP, leaving 15 s.
left() { local l=$((t0 + budget - $(date +%s) - 15)); ((l > $1)) && l=$1; ((l < 10)) && l=10; echo $l; }

tree=1
if [ "${NO_BUILD:-0}" != 1 ]; then
  note "== build ($(nvcc --version | tail -1), archs ${SAMPVIZ_ARCHS:-sm_90 sm_80}, $(nproc) cores)"
  start=$(date +%s)
  if make -j"$(nproc)" kernels >"$out/build.log" 2>&1; then
    note "build took $(($(date +%s) - start)) s, with the tree kernel"
  else
    tree=0
    note "build FAILED after $(($(date +%s) - start)) s; the errors:"
    grep -E 'error|spec_tree_verify' "$out/build.log" | head -40 | tee -a "$summary"
    note "== fallback: make kernels SV_TREE=0"
    start=$(date +%s)
    { echo; echo "== fallback: SV_TREE=0"; } >>"$out/build.log"
    make -j"$(nproc)" kernels SV_TREE=0 >>"$out/build.log" 2>&1 || {
      tail -30 "$out/build.log"
      exit 1
    }
    note "fallback build took $(($(date +%s) - start)) s, without the tree kernel"
  fi
  obj=$(ls build/obj/*/spec_tree_verify.o 2>/dev/null | head -1)
  if [ -n "$obj" ] && command -v cuobjdump >/dev/null; then
    # Registers, stack and shared memory of the tree kernels, per arch.
    cuobjdump -res-usage "$obj" 2>&1 | grep -E 'Function|REG' | sed 's/^/  /' >>"$out/build.log"
    grep -A1 -E 'Function .*tree_(node|walk)' "$out/build.log" | grep -v '^--' |
      sed -E 's/.*Function .*(tree_(node|walk)_kernel)I(13__nv_bfloat16|6__half|f)Li.*/\1 \3:/; s/ (TEXTURE|SURFACE|SAMPLER):0//g' |
      paste - - | head -12 | tee -a "$summary"
  fi
fi
[ -f "$lib" ] || { echo "no $lib"; exit 1; }
if nm -D "$lib" 2>/dev/null | grep -q ' T sv_spec_tree_verify'; then
  tree=1
  note "the library exports sv_spec_tree_verify"
else
  tree=0
  note "the library has no sv_spec_tree_verify (built with SV_TREE=0)"
fi
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
for f in cuda.test sampviz.test sampviz; do
  [ -x "gpu-bundle/$f" ] || { echo "no gpu-bundle/$f: run make gpu-bundle where Go is, and carry gpu-bundle"; exit 1; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee -a "$summary"

require_tree=
[ $tree = 1 ] && require_tree=1
if has suite; then
  note "== suite (tree tests, TestGPUVariants, Go-only tree tests)"
  s=$(left 300)
  SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_REQUIRE_TREE=$require_tree timeout $((s + 10)) \
    ./gpu-bundle/cuda.test -test.v -test.count=1 -test.timeout="${s}s" \
    -test.run 'TestHeaderConstants|TestTree|TestBenchTree|TestGPUDevice|TestGPUTree|TestGPUVariants|TestGPUVariantCoverage' >"$out/suite.log" 2>&1
  rc=$?
  grep -E -- '^(--- FAIL|FAIL|ok|PASS|panic)|^    --- FAIL|gpu_tree_test.go|tree_model_test.go|plan_test.go' "$out/suite.log" | head -40 | tee -a "$summary"
  grep -E -- '^--- (PASS|SKIP)' "$out/suite.log" | tee -a "$summary"
  grep -E '^variant (tree|spec)' "$out/suite.log" | tee -a "$summary"
  note "suite exit $rc"
  [ $rc -eq 0 ] || status=1
fi

if has memcheck; then
  # The test process runs no kernels: the workers it starts run under the tool.
  note "== compute-sanitizer memcheck (quick tree tests, on the workers)"
  s=$(left 150)
  SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
    SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3 --print-limit 50" \
    timeout $((s + 10)) ./gpu-bundle/cuda.test -test.count=1 -test.timeout="${s}s" \
    -test.run 'TestGPUTree|TestGPUVariants/spec_tree' >"$out/memcheck.log" 2>&1
  rc=$?
  grep -E 'ERROR SUMMARY|Invalid|--- FAIL|^ok|^PASS|^FAIL' "$out/memcheck.log" | sort | uniq -c | tail -12 | tee -a "$summary"
  summaries=$(grep -c 'ERROR SUMMARY' "$out/memcheck.log")
  dirty=$(grep 'ERROR SUMMARY' "$out/memcheck.log" | grep -vc 'ERROR SUMMARY: 0 errors')
  note "memcheck exit $rc, $summaries worker summaries, $dirty with errors"
  [ $rc -eq 0 ] && [ "$summaries" -gt 0 ] && [ "$dirty" -eq 0 ] || status=1
  if [ $tree = 1 ]; then
    note "== compute-sanitizer racecheck (quick TestGPUTree; reported, not failed on)"
    s=$(left 90)
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
      SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 20" \
      timeout $((s + 10)) ./gpu-bundle/cuda.test -test.count=1 -test.timeout="${s}s" \
      -test.run 'TestGPUTree$' >"$out/racecheck.log" 2>&1
    rc=$?
    grep -E 'RACECHECK SUMMARY|hazard|--- FAIL|^ok|^FAIL' "$out/racecheck.log" | sort | uniq -c | tail -8 | tee -a "$summary"
    note "racecheck exit $rc"
  fi
fi

if has check; then
  note "== sampviz check --backend cuda vs cpu, and serve --backend cuda, on the tree scenarios"
  dir=${TMPDIR:-/tmp}/sampviz-tree-scenarios
  mkdir -p "$dir"
  ./gpu-bundle/sampviz scenarios --write "$dir" >/dev/null
  : >"$out/check.log"
  for f in "$dir"/tree-*.safetensors; do
    name=$(basename "$f" .safetensors)
    ./gpu-bundle/sampviz check --backend cpu "$f" >"$dir/$name.cpu.txt" 2>&1; cpu=$?
    timeout 120 ./gpu-bundle/sampviz check --backend cuda --kernels "$lib" "$f" >"$dir/$name.cuda.txt" 2>&1; gpu=$?
    same=same; [ $cpu -eq $gpu ] || { same=DIFFERENT; [ $tree = 1 ] && status=1; }
    line=$(printf '%-26s cpu exit %d, cuda exit %d: %s; %s' "$name" $cpu $gpu $same "$(tail -1 "$dir/$name.cuda.txt")")
    note "$line"
    { echo "=== $name (cpu)"; cat "$dir/$name.cpu.txt"; echo "=== $name (cuda)"; cat "$dir/$name.cuda.txt"; } >>"$out/check.log"
  done
  if [ $tree = 1 ]; then
    s=$(left 150)
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 timeout $((s + 10)) ./gpu-bundle/sampviz.test -test.v -test.count=1 \
      -test.run 'TestServeScenarios/cuda/tree' -test.timeout="${s}s" >>"$out/check.log" 2>&1
    rc=$?
    grep -E -- '--- (PASS|FAIL|SKIP)|^(ok|PASS|FAIL)' "$out/check.log" | grep -v '^=== ' | tail -8 | tee -a "$summary"
    note "serve exit $rc"
    [ $rc -eq 0 ] || status=1
  fi
fi

if has bench && [ $tree = 1 ]; then
  note "== bench (spec_tree_verify, and spec_verify as the same machine's baseline)"
  s=$(left 150)
  err=${TMPDIR:-/tmp}/tree-bench.err
  timeout "$s" ./gpu-bundle/sampviz bench --kernels "$lib" --ops spec_tree_verify,spec_verify \
    --json "$out/bench.json" ${BENCH_FLAGS:-} >"$out/bench.txt" 2>"$err"
  rc=$?
  tail -20 "$err" >>"$summary"
  tee -a "$summary" <"$out/bench.txt"
  note "bench exit $rc"
  [ $rc -eq 0 ] || status=1
fi
note "tree_check: $(($(date +%s) - t0)) s in all, status $status (tree kernel: $tree)"
exit $status
