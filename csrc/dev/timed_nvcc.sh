#!/usr/bin/env bash
# timed_nvcc.sh: nvcc that also records how long it took, for measuring
# where the kernel build's time goes (docs/PERF.md, "Kernel build"):
#   make -j16 kernels NVCC="csrc/dev/timed_nvcc.sh" BUILD_TIMES=build/times
# appends "seconds output" to $BUILD_TIMES/objects.txt for every call and
# writes nvcc's own phase times (--time: cicc, ptxas, host compiler) to
# $BUILD_TIMES/<output>.csv. Sort the first to find the slowest unit.
set -u
dir=${BUILD_TIMES:-build/times}
mkdir -p "$dir"
out=unknown
prev=
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  prev=$a
done
start=$(date +%s.%N)
nvcc --time "$dir/$(basename "$out").csv" "$@"
rc=$?
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v o="$out" 'BEGIN { printf "%.1f %s\n", e - s, o }' >>"$dir/objects.txt"
exit $rc
