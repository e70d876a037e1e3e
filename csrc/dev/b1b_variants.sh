#!/usr/bin/env bash
# b1b_variants.sh: renorm and sample (top-k 50, top-p 0.9) at B=1, second
# attempt (issue 30 part 3: at most 12 us), in one call on the GPU machine
# after `make -j16 kernels SAMPVIZ_ARCHS=sm_90`. Each variant is a copy of
# csrc/ edited here by text (the product carries no switches); only the
# units an edit touches are compiled from the copy and linked with the
# product's other objects into a library of its own; then `sampviz bench
# --quick --ops renorm,sample --match 'k50 p0.9'` (renorm B=1 and 128,
# sample B=1 and 512) runs on each.
#
# The product is unchanged by this branch, so there is no "old" copy:
# base is today's code. Host edits (the layout, whether a row runs as a
# cluster) make fast_layout.cuh's inline functions static in the copy, so
# that the recompiled launchers (renorm.cu, sample.cu) keep their own
# layout and the linker cannot mix them with spec_verify.cu's, which is
# not recompiled (spec_verify keeps today's layout in every variant).
#
# Candidates (exact: the fast path's non-cluster hand-over, already the
# product for rows of 17 to 32 chunks, e.g. V=151936 at B=1; suite-tested):
#   plain16  B=1 keeps 16 chunks of 8k tokens but runs them as 16 plain
#            blocks: each publishes its candidates through global memory,
#            and the last to arrive (threadfence + atomic ticket,
#            fast_arrive) finishes the row. Cluster launch and DSMEM
#            push vs the global hand-over, on the same chunks.
#   c32      kFastMinChunk 4096: B=1 runs 32 chunks of ~4k tokens (a
#            thread's one load round is half used) as 32 plain blocks with
#            the global hand-over: twice the SMs on the scan and the zeros,
#            half the bytes a block waits for; the last block merges 32
#            chunks' candidates out of L2. Only rows*chunks below ~3 a SM
#            change: B=128 keeps 4 chunks, B=512 whole rows.
#   c24      kFastMinChunk 5400: B=1 runs 24 chunks of ~5.3k tokens the
#            same way (between the two: fewer chunks to merge than c32).
#   grp, grp32  a chunk of at most one tile (B=1's; B=128's and B=512's
#            are larger) takes its first theta from group maxima (the
#            smallest of G >= k groups' largest vector maxima, two shuffles
#            and a warp min) in place of the radix select
#            (csrc/dev/b1b/grouptheta.py edits fast_scan.cuh); grp on
#            today's 16-chunk cluster layout, grp32 on c32's. More
#            candidates pass (~3-7% of a tile against ~1.3%), so the
#            hand-over carries ~5x more.
#   grp32m   grp32 with the plain path's merge (fast_top, C > 1) reading a
#            chunk's candidates from L2 256 at a time a warp (8 loads in
#            flight a lane) in place of 128: half the dependent rounds for
#            grp's ~300 candidates a chunk.
# Diagnostics (wrong or no output; renorm only, benched on renorm B=1 alone):
#   emptyc, emptyp, empty32   the renorm fast kernel returns at once: the
#            launch alone, as a 16-block cluster / 16 plain blocks / 32
#            plain blocks (46 KB dynamic shared memory each)
#   scanonly, scanonlyp, scanonly32   every block stops after its scan:
#            launch + scan, for the three layouts
#   scanonlyg, scanonlyg32   scanonly with grp's first theta
#   loadonly, loadonly32   scanonly with the first tile's threshold
#            selection (kth_key, the radix select over 1024 vector maxima)
#            replaced by theta = +inf: launch + loads only; scanonly minus
#            loadonly is the per-chunk selection
#   nofinish, nofinishp, nofinish32   the finishing block stops once the
#            candidates are in (no fast_top, no Sum, no writes): launch,
#            scan, zeros and hand-over
# VARIANTS picks them (default: all); PREP_ONLY=1 only makes the edited
# copies (build/variants/b1b-NAME), a check without a GPU. SUITE=1 also
# runs the fast-path GPU tests and compute-sanitizer memcheck on the
# libraries in SUITE_VARIANTS (default "base c32 grp grp32m"; only base and the
# candidates are meant to be correct). Logs go to $OUT (else gpu-out); summary.txt has the table.
set -uo pipefail
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
archs=sm_90
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 -gencode arch=compute_90,code=sm_90"
edits() { # edits NAME: the edit keys NAME applies
  case $1 in
    plain16) echo P S ;;
    c32) echo M S ;;
    c24) echo N S ;;
    grp) echo W ;;
    grp32) echo W M S ;;
    grp32m) echo W M S R ;;
    scanonlyg) echo O W ;;
    scanonlyg32) echo O W M S ;;
    emptyc) echo E ;;
    emptyp) echo E P S ;;
    empty32) echo E M S ;;
    scanonly) echo O ;;
    scanonlyp) echo O P S ;;
    scanonly32) echo O M S ;;
    loadonly) echo O L ;;
    loadonly32) echo O L M S ;;
    nofinish) echo F ;;
    nofinishp) echo G P S ;;
    nofinish32) echo G M S ;;
  esac
}
units() { # units NAME: the units (under csrc/) NAME compiles from its copy
  local e; e=" $(edits "$1") "
  case $1 in
    plain16 | c32 | c24) echo renorm sample; return ;;
    grp) echo instances/renorm_fast_bf16 instances/sample_fast_bf16; return ;;
    grp32 | grp32m) echo renorm sample instances/renorm_fast_bf16 instances/sample_fast_bf16; return ;;
  esac
  case $e in *" S "*) echo renorm ;; esac
  echo instances/renorm_fast_bf16
}
edit() { # edit KEY: python editing f[path] (paths under csrc/)
  case $1 in
    S) echo 'f["fast_layout.cuh"] = sub(sub(f["fast_layout.cuh"], "\ninline ", "\nstatic inline "), "template <typename K>\nbool fast_cluster(", "template <typename K>\nstatic bool fast_cluster(")' ;;
    P) echo 'f["fast_layout.cuh"] = sub(f["fast_layout.cuh"], "  if (a.chunks < 8 || a.chunks > kMaxCluster ||", "  if (a.chunks > 0 || a.chunks > kMaxCluster ||")' ;;
    M) echo 'f["fast_layout.cuh"] = sub(f["fast_layout.cuh"], "constexpr int kFastMinChunk = 8192;", "constexpr int kFastMinChunk = 4096;")' ;;
    N) echo 'f["fast_layout.cuh"] = sub(f["fast_layout.cuh"], "constexpr int kFastMinChunk = 8192;", "constexpr int kFastMinChunk = 5400;")' ;;
    W) echo 'import subprocess; subprocess.run(["python3", "csrc/dev/b1b/grouptheta.py", d + "/fast_scan.cuh"], check=True); f["fast_scan.cuh"] = open(d + "/fast_scan.cuh").read()' ;;
    R) echo 'f["fast_top.cuh"] = sub(sub(sub(sub(f["fast_top.cuh"], "for (int j0 = 0; j0 < n; j0 += 128) {", "for (int j0 = 0; j0 < n; j0 += 256) {"), "          unsigned key[4];\n          int id[4];", "          unsigned key[8];\n          int id[8];"), "          for (int q = 0; q < 4; q++) {\n            const int j = j0 + q * 32", "          for (int q = 0; q < 8; q++) {\n            const int j = j0 + q * 32"), "          for (int q = 0; q < 4; q++) {\n            const bool keep", "          for (int q = 0; q < 8; q++) {\n            const bool keep")' ;;
    E) echo 'f["renorm.cuh"] = sub(f["renorm.cuh"], "    pdl_trigger();  // renorm_kernel may launch now; it waits for this kernel\n", "    pdl_trigger();  // renorm_kernel may launch now; it waits for this kernel\n    if (a.vocab > 0) return;\n")' ;;
    O) echo 'f["fast_row.cuh"] = sub(f["fast_row.cuh"], "  if constexpr (CLUSTER) return fast_cluster_row<T>(a, slot, fp, nan, zeros, begin, end, s, top);\n", "  if (a.vocab > 0) return nan == 2 ? kFastFlagged : kFastDone;\n  if constexpr (CLUSTER) return fast_cluster_row<T>(a, slot, fp, nan, zeros, begin, end, s, top);\n")' ;;
    L) echo 'f["fast_scan.cuh"] = sub(f["fast_scan.cuh"], "    const unsigned t0 = kth_key<PASSES>(s.keys + head_count, BLOCK * UNROLL, k, s);", "    const unsigned t0 = order_key(kInf);")' ;;
    F) echo 'f["fast_row.cuh"] = sub(f["fast_row.cuh"], "  if (c != 0) return kFastDone;\n  const bool ok = fast_top<T, true>", "  if (c >= 0) return kFastDone;\n  const bool ok = fast_top<T, true>")' ;;
    G) echo 'f["fast_row.cuh"] = sub(f["fast_row.cuh"], "  if (!fast_arrive(a, slot, nan, s)) return kFastDone;\n", "  if (!fast_arrive(a, slot, nan, s) || a.vocab > 0) return kFastDone;\n")' ;;
  esac
}
names=(${VARIANTS:-base plain16 c32 c24 grp grp32 grp32m emptyc emptyp empty32 scanonly scanonlyp scanonly32 scanonlyg scanonlyg32 loadonly loadonly32 nofinish nofinishp nofinish32})
s=$(date +%s)
pids=""
for n in "${names[@]}"; do
  [ "$n" = base ] && continue
  [ -n "$(edits "$n")" ] || { note "$n: no such variant"; continue; }
  d=build/variants/b1b-$n; rm -rf "$d"; mkdir -p "$d/instances"
  cp csrc/*.cuh csrc/*.h csrc/*.cu "$d/" && cp csrc/instances/*.cu "$d/instances/"
  py="import os
d = '$d'
def sub(s, a, b):
    assert a in s, 'edit of $n: text not found: ' + a[:60]
    return s.replace(a, b)
f = {p: open(os.path.join(d, p)).read() for p in ['fast_layout.cuh', 'fast_row.cuh', 'renorm.cuh', 'fast_scan.cuh', 'fast_top.cuh']}
g = dict(f)"
  for e in $(edits "$n"); do py="$py
$(edit "$e")"; done
  py="$py
assert f != g, 'edit of $n changed nothing'
for p in f: open(os.path.join(d, p), 'w').write(f[p])"
  python3 -c "$py" || { note "$n: edit failed"; continue; }
  [ "${PREP_ONLY:-0}" = 1 ] && { note "$n: edited ($(edits "$n"); units $(units "$n" | tr '\n' ' '))"; continue; }
  for u in $(units "$n"); do
    (timeout 110 nvcc $FL -I"$d" -c -o "$d/$(basename $u).o" "$d/$u.cu" >"$d/log-$(basename $u)" 2>&1; echo $? >"$d/rc-$(basename $u)") &
    pids="$pids $!"
  done
done
[ "${PREP_ONLY:-0}" = 1 ] && exit 0  # a check of the edits, here without a GPU
echo "compiling variants; make kernels for the product objects" >&2
make -j"$(nproc)" kernels SAMPVIZ_ARCHS=$archs >"$O/build.log" 2>&1 || { note "build FAILED"; grep error "$O/build.log" | head; exit 1; }
wait $pids
note "build $(($(date +%s) - s)) s"
for n in "${names[@]}"; do
  d=build/variants/b1b-$n
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
  ops=renorm,sample; m='renorm k50 p0.9 bf16|sample k50 p0.9 bf16'
  [ "$n" = base ] && { ops=renorm,sample,argmax; m="$m|argmax bf16"; }  # argmax reads the same rows: the reference
  case $n in base | plain16 | c32 | c24 | grp | grp32 | grp32m) ;; *) ops=renorm; m='renorm k50 p0.9 bf16 B=1 V' ;; esac  # diagnostics: renorm B=1 alone
  timeout 40 ./gpu-bundle/sampviz bench --kernels "$lib" --quick --ops $ops --match "$m" >"$O/bench-$n.txt" 2>&1
  note "== $n (exit $?)"
  grep -E "^ *((renorm|sample) k50 p0\.9|argmax) .*[0-9]" "$O/bench-$n.txt" | grep -v -E "rejection|counts| q | us$" | awk '{print "   ", $0}' | tee -a "$S"
done
if [ "${SUITE:-0}" = 1 ]; then
  for n in "${names[@]}"; do
    case " ${SUITE_VARIANTS:-base c32 grp grp32m} " in *" $n "*) ;; *) continue ;; esac
    lib=$PWD/build/variants/b1b-$n/libsampviz_kernels.so
    [ "$n" = base ] && lib=$PWD/build/libsampviz_kernels.so
    [ -f "$lib" ] || continue
    tests='TestGPURenorm|TestGPUSample$|TestGPUSampleDraws|TestGPUFastSmallBatches|TestGPUFastOneRow|TestGPUVariants'
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 timeout 100 ./gpu-bundle/cuda.test -test.count=1 -test.run "$tests" \
      >"$O/suite-$n.log" 2>&1
    rc=$?
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
      SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3" \
      timeout 100 ./gpu-bundle/cuda.test -test.count=1 -test.run 'TestGPUFastOneRow|TestGPUFastSmallBatches' >"$O/memcheck-$n.log" 2>&1
    mrc=$?
    note "suite $n: exit $rc ($(grep -c -- '--- FAIL' "$O/suite-$n.log") failures); memcheck exit $mrc, $(grep -c 'ERROR SUMMARY: 0 errors' "$O/memcheck-$n.log") clean of $(grep -c 'ERROR SUMMARY' "$O/memcheck-$n.log")"
  done
fi
note "total $(($(date +%s) - s)) s"
