#!/usr/bin/env bash
# build_times.sh: measures the kernel build (docs/PERF.md, "Kernel build")
# on the machine it runs on: a full `make -j$(nproc) kernels` from clean
# objects for the arch set ARCHS (default "sm_90 sm_80"), its slowest
# translation units, and the rebuilds after touching one op's launcher
# (csrc/sample.cu) and one op's kernels (csrc/sample.cuh). Per-unit times
# and nvcc's phase times go to $BUILD_TIMES (default build/times).
set -uo pipefail
archs=${1:-sm_90 sm_80}
times=${BUILD_TIMES:-build/times}
dir=build/obj/${archs// /-}
rm -rf "$dir" "$times"
mkdir -p "$times"
timed() {  # timed LABEL: make kernels, timed, each nvcc call logged
  local start=$(date +%s.%N)
  make -k -j"$(nproc)" kernels SAMPVIZ_ARCHS="$archs" NVCC="$PWD/csrc/dev/timed_nvcc.sh" \
    BUILD_TIMES="$times" >>"$times/make.log" 2>&1 || { grep -E 'error|Error' "$times/make.log" | head -40; return 1; }
  awk -v s="$start" -v e="$(date +%s.%N)" -v l="$1" 'BEGIN { printf "%-34s %6.1f s\n", l, e - s }'
}
echo "== kernel build, archs $archs, $(nproc) cores, $(nvcc --version | tail -1)"
timed "full build" || exit 1
echo "slowest units (seconds, archs side by side):"
sort -rn "$times/objects.txt" | head -6 | sed 's/^/  /'
mv "$times/objects.txt" "$times/full.txt"
touch csrc/sample.cu
timed "rebuild after touching sample.cu"
touch csrc/sample.cuh
timed "rebuild after touching sample.cuh"
