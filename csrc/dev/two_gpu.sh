#!/usr/bin/env bash
# two_gpu.sh: one worker per GPU on a host with two GPUs or more (issue 30,
# part 4), in one call on the GPU machine after `make gpu-bundle` where Go
# is: build the kernels when they are not built, run engine/cuda's pool
# tests (TestGPUTwoGPUs prints the two wall times and their ratio, then
# plants a fault on GPU 0 beside a run on GPU 1), and start `sampviz serve
# --backend cuda` to print GET /api/gpus (one entry per GPU). Logs go to
# $GPU_OUT (default gpu-out).
set -uo pipefail
out=${GPU_OUT:-gpu-out}
mkdir -p "$out"
lib=$(pwd)/build/libsampviz_kernels.so
status=0
if [ ! -f "$lib" ]; then
  make -j"$(nproc)" kernels >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
fi
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
nvidia-smi -L
echo "== pool tests (TestGPUTwoGPUs, TestPool*, TestOpenPool*)"
SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_REQUIRE_GPUS=2 ./gpu-bundle/cuda.test -test.v -test.count=1 \
  -test.timeout=15m -test.run 'TestGPUTwoGPUs|TestPool|TestOpenPool' >"$out/two_gpu.log" 2>&1
rc=$?
grep -E '^(--- |FAIL|ok|PASS)|gpu_pool_test.go|pool_test.go|panic' "$out/two_gpu.log" | tail -40
echo "pool tests exit $rc"; [ $rc -eq 0 ] || status=1

echo "== sampviz serve --backend cuda: GET /api/gpus"
data=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
SAMPVIZ_KERNELS=$lib ./gpu-bundle/sampviz serve --backend cuda --listen 127.0.0.1:$port --data "$data" >"$out/serve_gpus.log" 2>&1 &
pid=$!
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$port/api/gpus" >"$out/gpus.json" 2>/dev/null && break
  sleep 1
done
cat "$out/serve_gpus.log"; cat "$out/gpus.json"; echo
kill "$pid"; wait "$pid" 2>/dev/null
grep -Eq '"index": ?1' "$out/gpus.json" || { echo "serve did not report two GPUs"; status=1; }
rm -rf "$data"
exit $status
