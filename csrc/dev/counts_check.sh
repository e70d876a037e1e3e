#!/usr/bin/env bash
# counts_check.sh: sample's draws counted on the device (issue 30 part 1)
# checked on the GPU machine in one call:
#   build     make kernels SAMPVIZ_ARCHS=sm_90 (unless NO_BUILD=1)
#   suite     engine/cuda's counts tests with SAMPVIZ_REQUIRE_GPU=1: the
#             counts kernel against draws_kernel and engine/cpu
#             (TestGPUSampleCounts), the old draws tests now judged from
#             counts (TestGPUSampleDraws), the variants and their coverage,
#             a 10^7-draw check through engine/session
#   memcheck  compute-sanitizer on the quick counts tests
#   check     `sampviz check --backend cuda` on a 512 x 128256 bf16 sample
#             dump at the cuda default (10^7 draws a row) and at --draws
#             100000: wall time and peak resident memory (/usr/bin/time)
#   bench     `sampviz bench --ops sample --match counts`
#   ncu       one counts_kernel launch of the 10^5-draw case profiled (is it
#             issue-bound or L2-bound? docs/PERF.md, "What blocks each
#             missed target", counted draws)
# Needs gpu-bundle/ from `make gpu-bundle` and python3 with numpy (the
# dump). Logs go to $GPU_OUT (default $OUT, else gpu-out).
set -uo pipefail
out=${GPU_OUT:-${OUT:-gpu-out}}
stages=${STAGES:-suite memcheck check bench ncu}
mkdir -p "$out"
lib=$(pwd)/build/libsampviz_kernels.so
summary="$out/summary.txt"
: >"$summary"
has() { [[ " $stages " == *" $1 "* ]]; }
say() { echo "$*" | tee -a "$summary"; }

if [[ "${NO_BUILD:-0}" != 1 ]]; then
  start=$(date +%s)
  make kernels SAMPVIZ_ARCHS=sm_90 >"$out/build.log" 2>&1 || { say "build FAILED"; tail -30 "$out/build.log"; exit 1; }
  say "build: $(($(date +%s) - start)) s"
fi
for f in cuda.test sampviz; do
  [[ -x gpu-bundle/$f ]] || gunzip -kf "gpu-bundle/$f.gz"
  chmod +x "gpu-bundle/$f"
done

if has suite; then
  SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_KERNELS=$lib timeout 420 ./gpu-bundle/cuda.test -test.v -test.timeout 400s \
    -test.run 'TestGPUSampleCounts|TestGPUCheckTenMillionDraws|TestGPUSampleDraws|TestGPUVariants|TestGPUVariantCoverage|TestHeaderConstants' \
    >"$out/suite.log" 2>&1
  say "suite: rc $? ($(grep -c -- '--- PASS' "$out/suite.log") passed, $(grep -c -- '--- FAIL' "$out/suite.log") failed)"
  grep -E -- '--- FAIL|power|draws a row catch' "$out/suite.log" | head -20 | tee -a "$summary"
fi

if has memcheck && command -v compute-sanitizer >/dev/null; then
  SAMPVIZ_GPU_QUICK=1 SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_KERNELS=$lib \
    SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 9" \
    timeout 200 ./gpu-bundle/cuda.test -test.run 'TestGPUSampleCounts' -test.v >"$out/memcheck.log" 2>&1
  say "memcheck: rc $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$out/memcheck.log") clean summaries)"
fi

if has check; then
  dump=${TMPDIR:-/tmp}/sample-512x128256.safetensors
  python3 - "$dump" <<'EOF'
import json, struct, sys
import numpy as np
rows, vocab = 512, 128256
rng = np.random.default_rng(30)
x = (rng.standard_normal((rows, vocab), dtype=np.float32) * 2).view(np.uint32)
bf16 = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
seed = rng.integers(0, 2**62, size=rows, dtype=np.int64)
tensors = [("logits", "BF16", [rows, vocab], bf16.tobytes()), ("seed", "I64", [rows], seed.tobytes())]
header, off = {"__metadata__": {"op": "sample"}}, 0
for name, dt, shape, data in tensors:
    header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
    off += len(data)
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for t in tensors:
        f.write(t[3])
EOF
  for draws in default 100000; do
    flag=()
    [[ $draws != default ]] && flag=(--draws "$draws")
    /usr/bin/time -v ./gpu-bundle/sampviz check --backend cuda --kernels "$lib" "${flag[@]}" "$dump" \
      >"$out/check-$draws.txt" 2>"$out/check-$draws.time"
    rc=$?
    say "check ($draws draws): rc $rc, wall $(grep 'Elapsed (wall' "$out/check-$draws.time" | awk '{print $NF}'), peak RSS $(grep 'Maximum resident' "$out/check-$draws.time" | awk '{print $NF}') KiB"
    grep -E 'power|draws per row|PASS|FAIL' "$out/check-$draws.txt" | head -6 | tee -a "$summary"
  done
fi

if has bench; then
  ./gpu-bundle/sampviz bench --kernels "$lib" --ops sample --match counts >"$out/bench.txt" 2>&1
  say "bench: rc $?"
  tail -12 "$out/bench.txt" | tee -a "$summary"
fi

if has ncu && command -v ncu >/dev/null; then
  SAMPVIZ_WORKER_WRAPPER="ncu --clock-control none -k regex:counts_kernel -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis" \
    ./gpu-bundle/sampviz bench --kernels "$lib" --quick --ops sample --match "draws=10^5" >"$out/ncu.txt" 2>&1
  say "ncu: rc $?"
  grep -E 'Duration|Compute \(SM\) Thr|Memory Throughput|L2 Hit Rate|L1/TEX Hit|Issue Slots Busy|Achieved Occupancy|lts__|Warp Cycles Per Issued' "$out/ncu.txt" | head -20 | tee -a "$summary"
fi
