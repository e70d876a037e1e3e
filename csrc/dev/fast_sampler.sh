#!/usr/bin/env bash
# fast_sampler.sh: what the exact weights cost the unfiltered Gumbel sampler
# (issue 30 part 3), in one call on the GPU machine, after the lead's
# `make -j16 kernels SAMPVIZ_ARCHS=sm_90` (for the product's numbers) and
# the gpu-bundle unpack. Builds csrc/dev/fast_sampler/fast_sampler.cu (a
# standalone harness, no Go, not part of the product library), runs it, and
# runs `sampviz bench --ops sample --match 'sample plain|sample gumbel'` on
# the product library in the same call, so every number comes from one
# machine. The harness prints:
#   EXACT/AGREE  the one-pass exact kernels draw the reference's tokens on
#                every row (B=512 sets, adversarial rows); the fast ones'
#                agreement rate (not bit-exact by design)
#   CHI2         fast, exact and ref against softmax on V=64, 2^20 draws,
#                plus a control against softmax(x/1.05) that must fail
#   COPY/TIME    medians of 100 behind a 1 ms spin, B=512 V=128256 bf16
#   RESULT       whether every check passed
# Logs go to $OUT (else gpu-out); summary.txt has the lines above and the
# product's bench lines. Takes about 30 s (compile ~15 s, run ~10 s, bench).
set -uo pipefail
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
mkdir -p build
s=$(date +%s)
note "== build fast_sampler ($(nvcc --version | tail -1))"
if ! timeout 120 nvcc -O3 -std=c++17 -lineinfo -Icsrc -gencode arch=compute_90,code=sm_90 \
    -o build/fast_sampler csrc/dev/fast_sampler/fast_sampler.cu >"$O/build.log" 2>&1; then
  note "build FAILED"; head -20 "$O/build.log" | tee -a "$S"; exit 1
fi
note "built in $(($(date +%s) - s)) s"
cuobjdump -sass build/fast_sampler >"$O/fast_sampler.sass" 2>/dev/null
cuobjdump -res-usage build/fast_sampler >"$O/res_usage.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv >"$O/clocks.txt" 2>&1
timeout 120 ./build/fast_sampler >"$O/fast_sampler.txt" 2>&1
rc=$?
note "== fast_sampler (exit $rc)"
grep -E "^(device|EXACT|AGREE|CHI2|COPY|TIME|RESULT)" "$O/fast_sampler.txt" | tee -a "$S"
[ $rc = 0 ] || tail -5 "$O/fast_sampler.txt" | tee -a "$S"
lib=$PWD/build/libsampviz_kernels.so
if [ -x gpu-bundle/sampviz ] && [ -f "$lib" ]; then
  timeout 120 ./gpu-bundle/sampviz bench --kernels "$lib" --ops sample --match 'sample plain|sample gumbel' \
    >"$O/bench.txt" 2>&1
  note "== product: sampviz bench --ops sample --match 'sample plain|sample gumbel' (exit $?, median of 100)"
  grep -E "device:|sample" "$O/bench.txt" | tee -a "$S"
else
  note "== product bench skipped: no gpu-bundle/sampviz or $lib"
fi
note "total $(($(date +%s) - s)) s"
