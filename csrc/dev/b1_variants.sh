#!/usr/bin/env bash
# b1_variants.sh: the filtered ops at B=1 (issue 30 part 3: renorm and
# sample with top-k 50, top-p 0.9 in at most 12 us), in one call on the GPU
# machine after `make -j16 kernels SAMPVIZ_ARCHS=sm_90`. Each variant is a
# copy of csrc/'s headers and of the units it needs, edited here by text
# (the product carries no switches), those units compiled and linked with
# the product's other objects into a library of its own, and `sampviz bench
# --quick --ops renorm,sample,spec_verify --match ...` run on each (the
# filtered k50 p0.9 cases: renorm B=1, 128; sample B=1, 512; spec_verify
# B=1, 128):
#   base     the product library (build/libsampviz_kernels.so) as built
#   warpsum  renorm's and spec_verify's Sum (fast_kept.cuh sparse_sum) by
#            one warp over the nonzero leaves alone, up to kSmallSet kept
#            tokens (no 2^depth leaves zeroed, no block barrier):
#            csrc/dev/b1/fast_kept_warpsum.cuh. Rejected (run 152: renorm
#            B=1 19.6 against 17.5 us, spec_verify k50 B=128 193.9 against
#            186.0); the product keeps the tree in shared memory, three
#            levels a block barrier
#   zero4    renorm's chunks issue their zeros after the barrier that
#            releases their pushes, and release them by a fourth cluster
#            arrive that the leader waits on only after fast_top, before its
#            own writes (the chunks exit after that arrive; a cluster wait
#            counts exited threads as arrived): the zeros' stores no longer
#            hold the leader's start.
#   warptheta the first tile's theta from each warp's ceil(k/8)-th largest
#            vector max (a search on the keys in registers) in place of the
#            block's radix select, one barrier in place of nine
#            (csrc/dev/b1/warptheta.py edits fast_scan.cuh); every op, every B
#   spread   a cluster row's blocks ask for 116 KB of dynamic shared memory
#            (one block an SM), so a row's 16 chunks run on 16 SMs of the
#            GPC, in case the cluster scheduler packs them four an SM
#            (4 x 46 KB fit one). Host edit only (renorm.cu, sample.cu).
#   nozero   diagnostic (wrong output): renorm's chunks write no zeros, so
#            the third cluster barrier no longer waits for 513 KB of stores:
#            what moving the zeros off that barrier could gain
#   nosum    diagnostic (wrong output): renorm divides by 1, no Sum: the
#            Sum's share of the chain
#   scanonly diagnostic (no output): a cluster row's blocks stop after
#            their scan: the launch and the scan alone
#   nofinish diagnostic (no output): the leader stops once the pushes are
#            in (no fast_top, no Sum, no writes): the launch, the scan, the
#            zeros and the hand-over
# VARIANTS picks them (default: all of the above); PREP_ONLY=1 only makes
# the edited copies (under build/variants/b1-NAME), a check without a GPU.
# With SUITE=1 each correct variant's library (base too) also runs the fast-path GPU
# tests against engine/cpu and compute-sanitizer memcheck on their quick
# mode.
# Logs go to $OUT (else gpu-out); summary.txt has the table.
set -uo pipefail
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
archs=sm_90
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 -gencode arch=compute_90,code=sm_90"
units() { # units NAME: the units (under csrc/) NAME compiles from its copy
  case $1 in
    warpsum) echo instances/renorm_fast_bf16 instances/spec_fast_bf16 ;;
    spread) echo renorm sample ;;
    zero4 | nozero | nosum) echo instances/renorm_fast_bf16 ;;
    scanonly | nofinish) echo instances/renorm_fast_bf16 instances/sample_fast_bf16 ;;
    warptheta) echo instances/renorm_fast_bf16 instances/sample_fast_bf16 instances/spec_fast_bf16 ;;
  esac
}
edit() { # edit NAME: python editing files f[path] (paths under csrc/) into NAME's
  case $1 in
    warpsum) echo 'f["fast_kept.cuh"] = open(d + "/dev/b1/fast_kept_warpsum.cuh").read()' ;;
    spread) echo 'f["fast_layout.cuh"] = sub(sub(f["fast_layout.cuh"], "  return max_clusters((const void *)kernel, a.chunks, kFastBlock, sizeof(FastSmem)) > 0;", "  if (cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 116 << 10) != cudaSuccess) { cudaGetLastError(); return false; }\n  return max_clusters((const void *)kernel, a.chunks, kFastBlock, 116 << 10) > 0;"), "launch_cluster(variant, kernel, grid, kFastBlock, sizeof(FastSmem),", "launch_cluster(variant, kernel, grid, kFastBlock, (size_t)(116 << 10),")' ;;
    zero4) echo 'f["fast_row.cuh"] = sub(f["fast_row.cuh"], "  cluster_arrive();  // this chunk\x27s result is published; the leader is ready\n  if (zeros) zero_chunk(zeros, begin, end);\n  cluster_wait();\n  cluster_push<T>(a, count, s);\n  cluster_arrive();  // releases the pushes and the zeros to the leader\n  cluster_wait();\n  if (c != 0) return kFastDone;\n  const bool ok = fast_top<T, true>(a, slot, fp, nan, s, top);\n", "  cluster_arrive();\n  cluster_wait();\n  cluster_push<T>(a, count, s);\n  cluster_arrive();  // releases the pushes to the leader\n  if (zeros) zero_chunk(zeros, begin, end);\n  cluster_wait();\n  if (c != 0) {\n    if (zeros) cluster_arrive();  // releases the zeros: the leader waits for them before it writes\n    return kFastDone;\n  }\n  const bool ok = fast_top<T, true>(a, slot, fp, nan, s, top);\n  if (zeros) {\n    cluster_arrive();\n    cluster_wait();\n  }\n")' ;;
    scanonly) echo 'f["fast_row.cuh"] = sub(f["fast_row.cuh"], "  if constexpr (CLUSTER) return fast_cluster_row<T>(a, slot, fp, nan, zeros, begin, end, s, top);", "  if constexpr (CLUSTER) return nan == 2 ? kFastFlagged : kFastDone;")' ;;
    nofinish) echo 'f["fast_row.cuh"] = sub(f["fast_row.cuh"], "  if (c != 0) return kFastDone;\n  const bool ok = fast_top<T, true>", "  if (c >= 0) return kFastDone;\n  const bool ok = fast_top<T, true>")' ;;
    warptheta) echo 'import subprocess; subprocess.run(["python3", "csrc/dev/b1/warptheta.py", d + "/fast_scan.cuh"], check=True); f["fast_scan.cuh"] = open(d + "/fast_scan.cuh").read()' ;;
    nozero) echo 'f["fast_row.cuh"] = sub(f["fast_row.cuh"], "  if (zeros) zero_chunk(zeros, begin, end);\n  cluster_wait();", "  cluster_wait();")' ;;
    nosum) echo 'f["renorm.cuh"] = sub(f["renorm.cuh"], "const float sum = sparse_sum(n, top.kept, s);", "const float sum = 1.0f;")' ;;
  esac
}
names=(${VARIANTS:-base warpsum zero4 warptheta spread nozero nosum scanonly nofinish})
s=$(date +%s)
pids=""
for n in "${names[@]}"; do
  [ "$n" = base ] && continue
  d=build/variants/b1-$n; rm -rf "$d"; mkdir -p "$d/instances" "$d/dev"
  cp csrc/*.cuh csrc/*.h csrc/*.cu "$d/" && cp csrc/instances/*.cu "$d/instances/" && cp -r csrc/dev/b1 "$d/dev/"
  python3 -c "
import os
d = '$d'
def sub(s, a, b):
    assert a in s, 'edit of $n: text not found: ' + a[:60]
    return s.replace(a, b)
f = {p: open(os.path.join('$d', p)).read() for p in ['fast_kept.cuh', 'fast_layout.cuh', 'fast_row.cuh', 'renorm.cuh', 'fast_scan.cuh']}
g = dict(f)
$(edit "$n")
assert f != g, 'edit of $n changed nothing'
for p in f: open(os.path.join('$d', p), 'w').write(f[p])
" || { note "$n: edit failed"; continue; }
  [ "${PREP_ONLY:-0}" = 1 ] && { note "$n: edited"; continue; }
  for u in $(units "$n"); do
    (timeout 140 nvcc $FL -I"$d" -c -o "$d/$(basename $u).o" "$d/$u.cu" >"$d/log-$(basename $u)" 2>&1; echo $? >"$d/rc-$(basename $u)") &
    pids="$pids $!"
  done
done
[ "${PREP_ONLY:-0}" = 1 ] && exit 0  # a check of the edits, here without a GPU
echo "compiling variants; make kernels for the product objects" >&2
make -j"$(nproc)" kernels SAMPVIZ_ARCHS=$archs >"$O/build.log" 2>&1 || { note "build FAILED"; grep error "$O/build.log" | head; exit 1; }
wait $pids
note "build $(($(date +%s) - s)) s"
for n in "${names[@]}"; do
  d=build/variants/b1-$n
  if [ "$n" = base ]; then
    lib=$PWD/build/libsampviz_kernels.so
  else
    lib=$PWD/$d/libsampviz_kernels.so
    skip=""; mine=""
    for u in $(units "$n"); do
      b=$(basename $u)
      [ "$(cat "$d/rc-$b" 2>/dev/null)" = 0 ] || { note "$n: $u does not compile:"; grep -m5 error "$d/log-$b" | tee -a "$S"; skip=1; }
      mine="$mine $d/$b.o"
    done
    [ -z "$skip" ] || continue
    objs=$(find build/obj/$archs -name '*.o' | sort | grep -v -x -F -f <(for u in $(units "$n"); do echo "build/obj/$archs/$u.o"; done))
    if ! nvcc $FL -shared -o "$lib" $objs $mine >"$d/log-link" 2>&1; then
      note "$n does not link:"; grep -m5 error "$d/log-link" | tee -a "$S"; continue
    fi
  fi
  timeout 60 ./gpu-bundle/sampviz bench --kernels "$lib" --quick --ops renorm,sample,spec_verify \
    --match 'renorm k50 p0.9 bf16|sample k50 p0.9 bf16|spec_verify k50 p0.9 bf16' \
    >"$O/bench-$n.txt" 2>&1
  note "== $n (exit $?)"
  grep -E "^ *(renorm|sample|spec_verify) k50 p0\.9 .*[0-9]" "$O/bench-$n.txt" | grep -v -E "rejection|counts| q | us$" | awk '{print "   ", $0}' | tee -a "$S"
done
if [ "${SUITE:-0}" = 1 ]; then
  for n in "${names[@]}"; do
    case $n in nozero | nosum | scanonly | nofinish) continue ;; esac
    lib=$PWD/build/variants/b1-$n/libsampviz_kernels.so
    [ -f "$lib" ] || continue
    tests='TestGPURenorm|TestGPUSample$|TestGPUSampleDraws|TestGPUSpecVerify|TestGPUFastSmallBatches|TestGPUVariants'
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 timeout 150 ./gpu-bundle/cuda.test -test.count=1 -test.run "$tests" \
      >"$O/suite-$n.log" 2>&1
    rc=$?
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
      SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3" \
      timeout 150 ./gpu-bundle/cuda.test -test.count=1 -test.run 'TestGPURenorm|TestGPUFastSmallBatches' >"$O/memcheck-$n.log" 2>&1
    mrc=$?
    note "suite $n: exit $rc ($(grep -c -- '--- FAIL' "$O/suite-$n.log") failures); memcheck exit $mrc, $(grep -c 'ERROR SUMMARY: 0 errors' "$O/memcheck-$n.log") clean of $(grep -c 'ERROR SUMMARY' "$O/memcheck-$n.log")"
  done
fi
