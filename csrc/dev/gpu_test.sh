#!/usr/bin/env bash
# gpu_test.sh: what `make gpu-test` runs on the GPU machine (which has nvcc
# and no Go): build the kernels, run the GPU suite from gpu-bundle/ (built
# elsewhere by `make gpu-bundle`), compute-sanitizer memcheck on the suite's
# quick mode, `sampviz check --backend cuda` against the cpu backend on the
# scenario catalogue, `sampviz serve --backend cuda` opening every scenario
# over HTTP (cmd/sampviz's TestServeScenarios), and `sampviz bench`. Logs go
# to $GPU_OUT (default gpu-out). STAGES picks the steps (default "build suite
# memcheck check serve bench"). The suite and memcheck print which tests
# took each kernel variant (TestGPUVariantCoverage), and memcheck's quick
# mode fails when a variant the dispatch can choose was never taken.
set -uo pipefail
out=${GPU_OUT:-gpu-out}
stages=${STAGES:-build suite memcheck check serve bench}
timeout=${GPU_TIMEOUT:-15m}
mkdir -p "$out"
lib=$(pwd)/build/libsampviz_kernels.so
status=0
has() { [[ " $stages " == *" $1 "* ]]; }

if has build; then
  echo "== build ($(nvcc --version | tail -1), archs ${SAMPVIZ_ARCHS:-default})"
  start=$(date +%s)
  make -j"$(nproc)" kernels >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
  echo "build took $(($(date +%s) - start)) s"
fi
[ -f "$lib" ] || { echo "no $lib"; exit 1; }
# make gpu-bundle gzips the binaries; unpack them once.
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
for f in cuda.test sampviz.test sampviz; do
  [ -x "gpu-bundle/$f" ] || { echo "no gpu-bundle/$f: run make gpu-bundle where Go is"; exit 1; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$out/device.txt" 2>&1
cat "$out/device.txt"

if has suite; then
  echo "== suite"
  SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 ./gpu-bundle/cuda.test -test.v -test.count=1 \
    -test.timeout="$timeout" ${SUITE_RUN:+-test.run "$SUITE_RUN"} >"$out/suite.log" 2>&1
  rc=$?
  grep -E '^(=== RUN|--- FAIL|FAIL|ok|PASS)|gpu_test.go|gpu_tree_test.go|ngram_fastdeploy_test.go|helpers_test.go|variants_test.go|panic' "$out/suite.log" |
    grep -v '^=== RUN' | tail -60
  grep '^variant' "$out/suite.log"
  echo "suite exit $rc"; [ $rc -eq 0 ] || status=1
fi

if has memcheck; then
  # The test process runs no kernels: wrap every worker it starts instead.
  echo "== compute-sanitizer memcheck (quick suite, on the workers)"
  SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
    SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3 --print-limit 50" \
    ./gpu-bundle/cuda.test -test.count=1 -test.run 'TestGPU' -test.skip 'TestGPUFaults' \
    -test.timeout="$timeout" >"$out/memcheck.log" 2>&1
  rc=$?
  grep -E 'ERROR SUMMARY|Invalid|--- FAIL|^ok|^PASS|^FAIL' "$out/memcheck.log" | sort | uniq -c | tail -20
  grep -E '^variant|variants_test.go' "$out/memcheck.log"
  summaries=$(grep -c 'ERROR SUMMARY' "$out/memcheck.log")
  dirty=$(grep 'ERROR SUMMARY' "$out/memcheck.log" | grep -vc 'ERROR SUMMARY: 0 errors')
  echo "memcheck exit $rc, $summaries worker summaries, $dirty with errors"
  [ $rc -eq 0 ] && [ "$summaries" -gt 0 ] && [ "$dirty" -eq 0 ] || status=1
fi

if has ncu; then
  # Profile one kernel of a few cases: "ops|case text|kernel regex" each.
  : >"$out/ncu.txt"
  IFS=';' read -ra probes <<<"${NCU_PROBES:-softmax|softmax bf16 B=128 V=128256|softmax_row;argmax|bf16 B=128 V=128256|argmax_kernel;sample|k50 p0.9 bf16 B=512|sample_kernel}"
  for probe in "${probes[@]}"; do
    IFS='|' read -r ops match kern <<<"$probe"
    echo "== ncu: $kern in $ops '$match'" | tee -a "$out/ncu.txt"
    SAMPVIZ_WORKER_WRAPPER="ncu --clock-control none -k regex:$kern -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats --section ComputeWorkloadAnalysis" \
      ./gpu-bundle/sampviz bench --kernels "$lib" --quick --ops "$ops" --match "$match" >>"$out/ncu.txt" 2>&1
  done
  grep -E '^== ncu|SM Frequency|DRAM Throughput|^    Memory Throughput|^    Duration|Compute \(SM\) Thr|Achieved Occupancy|Registers Per Thread|Warp Cycles Per Issued|L2 Hit Rate|L1/TEX Hit|Executed Ipc A|Issue Slots Busy|Theoretical Occ' "$out/ncu.txt" | head -80
fi

if has check; then
  # `sampviz check --backend cuda` on every scenario: the real kernels behind
  # the product's own command, with the same verdict as the cpu backend.
  echo "== sampviz check --backend cuda vs cpu on the scenario catalogue"
  dir=${TMPDIR:-/tmp}/sampviz-scenarios
  mkdir -p "$dir"
  ./gpu-bundle/sampviz scenarios --write "$dir" >/dev/null
  for f in "$dir"/*.safetensors; do
    name=$(basename "$f" .safetensors)
    ./gpu-bundle/sampviz check --backend cpu "$f" >"$dir/$name.cpu.txt" 2>&1; cpu=$?
    ./gpu-bundle/sampviz check --backend cuda --kernels "$lib" "$f" >"$dir/$name.cuda.txt" 2>&1; gpu=$?
    same=same
    if [ $cpu -ne $gpu ]; then
      # A mode the kernels do not serve is refused in one sentence that
      # names the cpu backend (auto and serve fall back to it): not a fault.
      if [ $gpu -eq 2 ] && grep -q 'has no CUDA kernel; the cpu backend serves it' "$dir/$name.cuda.txt"; then
        same="cpu only (the cuda backend refuses it, naming --backend cpu)"
      else
        same=DIFFERENT; status=1
      fi
    fi
    printf '%-26s cpu exit %d, cuda exit %d: %s; %s\n' "$name" $cpu $gpu $same "$(tail -1 "$dir/$name.cuda.txt")"
  done
fi

if has serve; then
  # The server as a user meets it: `sampviz serve --backend cuda` (the
  # cmd/sampviz test binary started as sampviz), every scenario opened over
  # HTTP and followed to its verdict on the GPU.
  echo "== sampviz serve --backend cuda on the scenario catalogue"
  SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 ./gpu-bundle/sampviz.test -test.v -test.count=1 \
    -test.run 'TestServeScenarios' -test.timeout="$timeout" >"$out/serve.log" 2>&1
  rc=$?
  grep -E -- '--- (PASS|FAIL|SKIP)|^(ok|PASS|FAIL)|serve_e2e_test.go' "$out/serve.log" | tail -30
  echo "serve exit $rc"; [ $rc -eq 0 ] || status=1
fi

if has bench; then
  echo "== bench"
  ./gpu-bundle/sampviz bench --kernels "$lib" --json "$out/bench.json" ${BENCH_FLAGS:-} >"$out/bench.txt" 2>"$out/bench.err"
  rc=$?
  cat "$out/bench.txt"; tail -5 "$out/bench.err"
  echo "bench exit $rc"; [ $rc -eq 0 ] || status=1
fi
exit $status
