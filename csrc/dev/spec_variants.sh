#!/usr/bin/env bash
# spec_variants.sh: unfiltered spec_verify (issue 30 part 3) in one call on
# the GPU machine, after the lead has unpacked gpu-bundle/ and run
# `make kernels SAMPVIZ_ARCHS=sm_90`. Each variant is a pair of units,
# csrc/spec_verify.cu (the launcher) and csrc/instances/spec_full_bf16.cu
# (the bf16 prepare and chain) over its own spec_verify.cuh, compiled and
# linked with the product's other objects from build/obj/sm_90 into its own
# library; `sampviz bench --quick --ops spec_verify` then runs the six
# spec_verify cases (unfiltered B=1, B=128 and q at B=128; k50 p0.9 B=1,
# B=128 and q) on each, twice, the variants interleaved. The copies are
# made here (text edits of the product, or the verbatim copies under
# csrc/dev/spec/), so the product carries no switches:
#   base    the product: the lean prepare's second read of a bf16 row
#           through per-warp staging tiles (cp.async, a 512-byte run a
#           copy), the row walked from its end (staged_sum), where two
#           blocks with the tiles share an SM (staged_ready); the chain
#           loads every position's statistics beside its tests
#   old     the product before (csrc/dev/spec/: one chunk a thread,
#           16-byte loads at 512-byte strides, tree_sum; the stop's
#           statistics loaded after the tests)
#   c8      base with the split prepare (B=1, unfiltered) in clusters of
#           8 in place of 16: its 9 clusters of 16 (66 registers a thread:
#           one 512-thread block an SM) do not fit the 8 GPCs at once, so
#           the ninth runs in a second wave; 9 clusters of 8 (chunks of
#           16128 tokens) do
#   lb2     base with the split prepare at two blocks an SM
#           (__launch_bounds__(512, 2), <= 64 registers): the 9 clusters
#           of 16 fit at once
#   fwd     base with the staging walk from the row's start (what the walk
#           from the end gains in L2 hits)
#   stab    base with the split prepare taking its bf16 weights from a
#           table of patterns (ptable.cuh): one exact exp a pattern of the
#           window instead of one a token of its chunk
#   c8stab, lb2stab  both
#   nopsf   base with the chain reading the stop's statistics from global
#           memory after the tests, as old: what the prefetch saves at B=1
# VARIANTS picks them (default "base old c8 lb2 fwd c8stab stab nopsf", in
# the order the bench runs them: a repeat the budget leaves out is the
# last ones'). With SUITE=1 (and then, say, VARIANTS="base c8stab lb2stab
# fwd") the bench runs once a variant, then compute-sanitizer memcheck on
# the quick spec tests of base, then the spec tests against engine/cpu on
# each variant but old (which cases, below; and TestGPUVariants' spec
# cases, quick). Logs go to $OUT (else gpu-out); summary.txt has the
# table. BUDGET (seconds, default 140) bounds the whole: each step is
# stopped at what is left of it.
set -uo pipefail
t0=$(date +%s); budget=${BUDGET:-140}
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
left() { echo $((budget - ($(date +%s) - t0))); }
cap() { local l; l=$(left); echo $((l > 10 ? l : 10)); }  # a step's timeout
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
archs=sm_90
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 -gencode arch=compute_90,code=sm_90"
edit() { # edit NAME: the python that turns the product's spec_verify.cuh (s) and spec_verify.cu (u) into NAME's
  case $1 in
    base | old) echo 'pass' ;;
    nopsf) echo 's = s.replace("const PosStat ps = k < 32 ? stat_sh[j] : a.stats[(size_t)row * steps + j];", "const PosStat ps = a.stats[(size_t)row * steps + j];")' ;;
    c8) echo 'u = u.replace("csize = min(kMaxCluster, leaves);", "csize = min(8, leaves);")' ;;
    lb2) echo 's = s.replace("__launch_bounds__(BLOCK, 1)\n    spec_split_kernel", "__launch_bounds__(BLOCK, 2)\n    spec_split_kernel")' ;;
    c8stab) edit c8; edit stab ;;
    lb2stab) edit lb2; edit stab ;;
    stab) cat <<'PY'
s = s.replace("""    for_each_vec<T, BLOCK, 4>(x, begin, end, [&](int i, float v) { w[i - begin] = weight_of(v, m, temp); });
    __syncthreads();
    const int c0 = begin / 256""", """    if constexpr (tabled<T>()) {
      const PatternTable<float> tab{tree + 2 * L, table_window(m, temp)};
      fill_table<BLOCK>(tab, [&](float v) { return weight_of(v, m, temp); });
      const TableWeight tw{tab};
      for_each_vec<T, BLOCK, 4>(x, begin, end, [&](int i, float v) { w[i - begin] = tw(v, m, temp); });
    } else {
      for_each_vec<T, BLOCK, 4>(x, begin, end, [&](int i, float v) { w[i - begin] = weight_of(v, m, temp); });
    }
    __syncthreads();
    const int c0 = begin / 256""")
u = u.replace("const size_t smem = sizeof(float) * ((size_t)chunk + 2 * leaves);", "const size_t smem = sizeof(float) * ((size_t)chunk + 2 * leaves + (tabled<T>() ? kTableEntries : 0));")
PY
    ;;
    fwd) echo 's = s.replace("for (int g = groups - 1 - warp; g >= 0; g -= kWarps)", "for (int g = warp; g < groups; g += kWarps)")' ;;
    *) echo 'raise SystemExit("unknown variant")' ;;
  esac
}
names=(${VARIANTS:-base old c8 lb2 fwd c8stab stab nopsf})
pids=""
for n in "${names[@]}"; do
  d=build/variants/spec-$n; mkdir -p "$d"
  src=csrc; [ "$n" = old ] && src=csrc/dev/spec
  python3 -c "
s = open('$src/spec_verify.cuh').read(); t = s
u = open('$src/spec_verify.cu').read(); v = u
$(edit "$n")
assert '$n' in ('base', 'old', 'c8') or s != t, 'edit of $n did not apply'
assert '$n' not in ('stab', 'c8', 'c8stab', 'lb2stab') or u != v, 'edit of $n (launcher) did not apply'
open('$d/spec_verify.cuh', 'w').write(s)
open('$d/spec_verify.cu', 'w').write(u)
open('$d/spec_full_bf16.cu', 'w').write(open('csrc/instances/spec_full_bf16.cu').read().replace('\"../spec_verify.cuh\"', '\"spec_verify.cuh\"'))
" || { note "$n: edit failed"; continue; }
  (nvcc $FL -Icsrc -c -o "$d/spec_verify.o" "$d/spec_verify.cu" >"$d/log" 2>&1 &&
    nvcc $FL -Icsrc -c -o "$d/spec_full_bf16.o" "$d/spec_full_bf16.cu" >>"$d/log" 2>&1) &
  pids="$pids $!"
done
make -j"$(nproc)" kernels SAMPVIZ_ARCHS=$archs >"$O/build.log" 2>&1 || { note "build FAILED"; grep error "$O/build.log" | head; exit 1; }
wait $pids
objs=$(find build/obj/$archs -name '*.o' ! -name 'spec_verify.o' ! -name 'spec_full_bf16.o' | sort)
note "build $(($(date +%s) - t0)) s"
built=()
for n in "${names[@]}"; do
  d=build/variants/spec-$n
  if ! nvcc $FL -shared -o "$d/libsampviz_kernels.so" $objs "$d/spec_verify.o" "$d/spec_full_bf16.o" >>"$d/log" 2>&1; then
    note "$n does not build:"; grep error "$d/log" | head -5 | tee -a "$S"; continue
  fi
  built+=("$n")
done
reps="1 2"; [ "${SUITE:-0}" = 1 ] && reps=1
for rep in $reps; do
  for n in "${built[@]}"; do
    [ "$(left)" -gt 20 ] || { note "(budget: no repeat $rep of $n)"; continue; }
    timeout "$(($(left) < 60 ? $(left) : 60))" ./gpu-bundle/sampviz bench --kernels "$PWD/build/variants/spec-$n/libsampviz_kernels.so" --quick \
      --ops spec_verify --match 'spec_verify bf16|spec_verify q bf16|spec_verify k50 p0.9 bf16|spec_verify k50 p0.9 q' \
      >"$O/bench-$n-$rep.txt" 2>&1
    note "== $n, run $rep (exit $?, $(left) s left)"
    grep -E "^  spec_verify.* us$" "$O/bench-$n-$rep.txt" | tee -a "$S"
  done
done
# The table: a case a line, a variant a column, the lower of its runs' medians.
python3 - "$O" "${built[@]}" <<'PY' | tee -a "$S"
import glob, re, sys
out, names = sys.argv[1], sys.argv[2:]
best = {}
for n in names:
    for f in glob.glob(f"{out}/bench-{n}-*.txt"):
        for line in open(f):
            m = re.match(r"^  (spec_verify.*?)\s+([0-9.]+) us$", line)
            if m:
                key = " ".join(m.group(1).split())
                best.setdefault(key, {})[n] = min(float(m.group(2)), best.get(key, {}).get(n, 1e30))
print("%-44s" % "case (us, lower of the runs)" + "".join("%9s" % n for n in names))
for key, row in best.items():
    print("%-44s" % key + "".join("%9s" % ("%.1f" % row[n] if n in row else "-") for n in names))
PY
if [ "${SUITE:-0}" = 1 ]; then
  for n in base; do
    lib=$PWD/build/variants/spec-$n/libsampviz_kernels.so
    [ -f "$lib" ] || continue
    # TestGPUVariants' spec cases take every spec kernel (the staged lean
    # prepare and the split prepare included) in the quick mode.
    for run in 'TestGPUSpecUnfiltered' 'TestGPUVariants/spec_verify'; do
      SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
        SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3" \
        timeout "$(cap)" ./gpu-bundle/cuda.test -test.count=1 -test.run "$run" >>"$O/memcheck-$n.log" 2>&1
      mrc=$?
      [ $mrc = 0 ] || break
    done
    note "memcheck $n: exit $mrc, $(grep -c 'ERROR SUMMARY: 0 errors' "$O/memcheck-$n.log") clean of $(grep -c 'ERROR SUMMARY' "$O/memcheck-$n.log")"
  done
  # base: both spec tests in full; the split variants: the unfiltered
  # test in full (its small launches take the split prepare; the quick
  # cases do not); the others: both in the quick mode.
  for n in "${built[@]}"; do
    [ "$n" != old ] || continue
    lib=$PWD/build/variants/spec-$n/libsampviz_kernels.so
    case $n in
      base) quick=0 tests='TestGPUSpecUnfiltered|TestGPUSpecVerify' ;;
      c8 | lb2 | stab | c8stab | lb2stab) quick=0 tests='TestGPUSpecUnfiltered' ;;
      *) quick=1 tests='TestGPUSpecUnfiltered|TestGPUSpecVerify' ;;
    esac
    [ "$(left)" -gt 15 ] || { note "suite $n: no budget left"; continue; }
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=$quick timeout "$(cap)" ./gpu-bundle/cuda.test -test.count=1 \
      -test.run "$tests" >"$O/suite-$n.log" 2>&1
    rc=$?
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 timeout "$(cap)" ./gpu-bundle/cuda.test -test.count=1 \
      -test.run 'TestGPUVariants/spec_verify' >>"$O/suite-$n.log" 2>&1
    note "suite $n (quick $quick, $tests; TestGPUVariants/spec_verify): exit $rc, $? ($(grep -c -- '--- FAIL' "$O/suite-$n.log") failures, $(left) s left)"
  done
fi
note "done in $(($(date +%s) - t0)) s"
