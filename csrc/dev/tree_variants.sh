#!/usr/bin/env bash
# tree_variants.sh: variants of csrc/spec_tree_verify.cu built beside the
# product and compared in one call on the GPU machine. Runs 137-140 of
# docs/perf-log.md were made with one-off copies of these steps; this
# script gathers them and has not itself run there yet. Usage, from the
# repository root,
# with gpu-bundle/ from `make gpu-bundle` (gunzipped or xz-ed: both are
# unpacked):
#   VARIANTS="old=path/a.cu c2=path/b.cu" bash csrc/dev/tree_variants.sh
# Each variant is a whole spec_tree_verify.cu, compiled in place of the
# product's unit and linked with the product's other objects into its own
# library; one that does not build is reported and left out. Stages
# (STAGES, default "bench suite memcheck"):
#   bench     `sampviz bench --ops spec_tree_verify` for the product and
#             each variant, in that order (the product's own run is left
#             out when a variant is csrc/spec_tree_verify.cu itself, e.g.
#             old=csrc/spec_tree_verify.cu), then a table of the medians,
#             a column a library ($BENCH_FLAGS adds flags, e.g.
#             --match "B=64")
#   suite     the tree tests and TestGPUVariants against engine/cpu on each
#             variant (the product's are make gpu-tree's) in the quick
#             mode, then TestGPUTreeOneHotLean (the launches the cluster
#             prepare of csrc/dev/tree/split.cu and held.cu takes) in the
#             full mode but on the variants named in QUICK_SUITE;
#             FULL_SUITE=1 runs every test in the full mode (minutes a
#             variant)
#   memcheck  compute-sanitizer memcheck on the quick tree tests, each
#             variant but one that is the product's own file (memcheck
#             clean in run 141)
#   ncu       the product's kernels timed one by one (gpu__time_duration)
#             on the bench cases NCU_CASES names (';' between them): ncu
#             must wrap the worker
#             (SAMPVIZ_WORKER_WRAPPER), which it does not follow itself
# Logs go to $OUT (else gpu-out): summary.txt bench.txt suite.log
# memcheck.log ncu.txt build.log. BUDGET (seconds, default 500) bounds it.
set -uo pipefail
t0=$(date +%s); budget=${BUDGET:-500}
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
stages=${STAGES:-bench suite memcheck}
has() { [[ " $stages " == *" $1 "* ]]; }
note() { echo "$*" | tee -a "$S"; }
left() { local l=$((t0 + budget - $(date +%s) - 10)); ((l > $1)) && l=$1; ((l < 5)) && l=5; echo $l; }
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$S"
archs=${SAMPVIZ_ARCHS:-sm_90}
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 $(for a in $archs; do echo -n "-gencode arch=compute_${a#sm_},code=$a "; done)"
names=() libs=()
pids=""
bench_product=1 is_product=" "
for v in ${VARIANTS:-}; do
  name=${v%%=*} src=${v#*=}
  [ "$src" -ef csrc/spec_tree_verify.cu ] && bench_product=0 is_product="$is_product$name "
  mkdir -p "build/variants/$name"
  cp "$src" "build/variants/$name/spec_tree_verify.cu"
  (nvcc $FL -Icsrc -c -o "build/variants/$name/spec_tree_verify.o" "build/variants/$name/spec_tree_verify.cu" \
    >"build/variants/$name/log" 2>&1) &
  pids="$pids $!"
  names+=("$name")
done
s=$(date +%s)
make -j"$(nproc)" kernels SAMPVIZ_ARCHS="$archs" >"$O/build.log" 2>&1 || { note "build FAILED"; grep error "$O/build.log" | head -20; exit 1; }
wait $pids
objs=$(find "build/obj/${archs// /-}" -name '*.o' ! -path '*/spec_tree_verify.o' | sort)
product=$PWD/build/libsampviz_kernels.so
built=()
for name in "${names[@]}"; do
  d=build/variants/$name
  if nvcc $FL -shared -o "$d/libsampviz_kernels.so" $objs "$d/spec_tree_verify.o" >>"$d/log" 2>&1; then
    built+=("$name")
    libs+=("$PWD/$d/libsampviz_kernels.so")
  else
    note "variant $name does not build (left out):"
    grep error "$d/log" | head -10 | tee -a "$S"
  fi
done
names=("${built[@]}")
note "build $(($(date +%s) - s)) s (product and ${#names[@]} variants)"
if has bench; then
  : >"$O/bench.txt"
  all_names=("${names[@]}") all_libs=("${libs[@]}")
  ((bench_product)) && all_names=(product "${all_names[@]}") all_libs=("$product" "${all_libs[@]}")
  for i in "${!all_names[@]}"; do
    echo "### ${all_names[$i]}" >>"$O/bench.txt"
    timeout "$(left 120)" ./gpu-bundle/sampviz bench --kernels "${all_libs[$i]}" --ops spec_tree_verify ${BENCH_FLAGS:-} \
      >>"$O/bench.txt" 2>&1
    note "bench ${all_names[$i]} exit $?"
  done
  # The table's rows are right-aligned (the longest case name has no
  # leading space); the progress lines on stderr end in " us".
  python3 - "$O/bench.txt" <<'PY' | tee -a "$S"
import re, sys
cols, rows, name = [], {}, None
for line in open(sys.argv[1]):
    if line.startswith("### "):
        name = line[4:].strip(); cols.append(name); continue
    f = re.split(r"\s{2,}", line.strip())
    if name and len(f) >= 3 and f[0].startswith("spec_tree") and not line.rstrip().endswith(" us"):
        rows.setdefault(f[0] + " " + f[1], {})[name] = f[2]
print("median us | " + " | ".join(cols))
for case, got in rows.items():
    print(case + " | " + " | ".join(got.get(c, "-") for c in cols))
PY
fi
: >"$O/suite.log"; : >"$O/memcheck.log"
for i in "${!names[@]}"; do
  lib=${libs[$i]}
  if has suite; then
    echo "### ${names[$i]}" >>"$O/suite.log"
    s=$(left 120)
    q=1 mode=full; [ "${FULL_SUITE:-}" = 1 ] && q= || mode=quick
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_REQUIRE_TREE=1 SAMPVIZ_GPU_QUICK=$q timeout $((s + 5)) \
      ./gpu-bundle/cuda.test -test.v -test.count=1 -test.timeout=${s}s -test.run 'TestGPUTree|TestGPUVariants|TestTree' \
      >>"$O/suite.log" 2>&1
    rc=$?
    if [ -n "$q" ] && [[ " ${QUICK_SUITE:-} " != *" ${names[$i]} "* ]]; then
      s=$(left 90)
      SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_REQUIRE_TREE=1 timeout $((s + 5)) ./gpu-bundle/cuda.test -test.v \
        -test.count=1 -test.timeout=${s}s -test.run 'TestGPUTreeOneHotLean' >>"$O/suite.log" 2>&1
      r2=$?
      ((rc == 0)) && rc=$r2
      mode="quick, TestGPUTreeOneHotLean full"
    fi
    sec=$(sed -n "/^### ${names[$i]}\$/,\$p" "$O/suite.log")
    note "suite ${names[$i]} ($mode) exit $rc: $(grep -c -- '--- PASS' <<<"$sec") passes, failed: $(grep -E -- '--- FAIL' <<<"$sec" | head -5 | tr -s ' ' | tr '\n' ' ')"
  fi
  if has memcheck && [[ "$is_product" != *" ${names[$i]} "* ]]; then
    echo "### ${names[$i]}" >>"$O/memcheck.log"
    s=$(left 90)
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
      SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3 --print-limit 50" \
      timeout $((s + 5)) ./gpu-bundle/cuda.test -test.count=1 -test.timeout=${s}s \
      -test.run 'TestGPUTree|TestGPUVariants/spec_tree' >>"$O/memcheck.log" 2>&1
    rc=$?
    note "memcheck ${names[$i]} exit $rc: $(sed -n "/^### ${names[$i]}\$/,\$p" "$O/memcheck.log" | grep -o 'ERROR SUMMARY: [0-9]* errors*' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
  fi
done
if has ncu; then
  : >"$O/ncu.txt"
  IFS=';' read -ra cases <<<"${NCU_CASES:-topk2 bf16 B=1 V;topk2 bf16 B=64 V}"
  for m in "${cases[@]}"; do
    f=$(mktemp)
    SAMPVIZ_WORKER_WRAPPER="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:tree_|spec_prepare --launch-count 12 --print-summary per-kernel --log-file $f" \
      timeout "$(left 60)" ./gpu-bundle/sampviz bench --kernels "$product" --ops spec_tree_verify --quick --match "$m" >/dev/null 2>&1
    echo "### $m exit $?" >>"$O/ncu.txt"
    cat "$f" >>"$O/ncu.txt"
  done
  grep -E '^###|spec_prepare|tree_|gpu__time_duration' "$O/ncu.txt" | tee -a "$S"
fi
note "tree_variants: $(($(date +%s) - t0)) s"
