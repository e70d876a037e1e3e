#!/usr/bin/env bash
# table_variants.sh: sample's unfiltered bf16 inverse CDF (single draws)
# before and after table_kernel (issue 30 part 3, "sample plain" at B=512),
# in one call on the GPU machine after the gpu-bundle unpack (this script
# runs `make kernels SAMPVIZ_ARCHS=sm_90` too). Each variant is a library of
# its own: the product's objects, with the units a variant changes compiled
# from an edited copy of csrc/; `sampviz bench --quick --ops sample --match
# plain` runs on each. Variants (VARIANTS picks them, default all):
#   base      the product: table_kernel, 512 threads, two blocks an SM, a
#             float table of w * 2^40 (W its truncation)
#   old       the launcher without the table branch: the lean pattern kernel
#             (the row's 65536-pattern count, one block an SM)
#   ftab      a float table of w, W = weight(w) after each lookup (run 158)
#   b256      256 threads, four blocks an SM (more rows in flight, so one
#             block's lookups overlap other blocks' reads; run 159: slower)
#   one       one block an SM (110 KB of unused dynamic shared memory): 132
#             rows in flight, 34 MB, so the second read finds the row in L2
#   one256    the same at 256 threads (two blocks an SM, 264 rows: 34 MB)
#   statonly  diagnostic (wrong tokens): table_kernel stops after row_stat,
#             the first read of the row and its maximum
#   fillonly  diagnostic (wrong tokens): stops after the table's fill
# Measured and dropped (docs/perf-log.md, runs 157-160): a table of the
# fixed-point W (u64, 32 KB of dynamic shared memory), three blocks an SM
# (spills), 1024 threads (the launch fails: too many registers).
# base - fillonly is the second read's sums and the ordered search.
# With SUITE=1 base, one and one256 run the sample GPU tests against engine/cpu
# and base runs the table tests under compute-sanitizer memcheck.
# Logs go to $OUT (else gpu-out); summary.txt has the table.
set -uo pipefail
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
archs=sm_90
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 -gencode arch=compute_90,code=sm_90"
names=(${VARIANTS:-base old one one256 ftab statonly fillonly})
units() {
  case $1 in
    base) ;;
    old) echo sample.cu ;;
    b256 | one256) echo sample.cu instances/sample_tokens_bf16.cu ;;
    one) echo sample.cu ;;
    *) echo instances/sample_tokens_bf16.cu ;;
  esac
}
# edit NAME: python edits of s (the file's text) for file F of NAME's copy.
edit() {
  case $1:$2 in
    old:sample.cu) echo 's = s.replace("!a.cdf && tk.table)", "!a.cdf && false && tk.table)")' ;;
    b256:sample.cu) echo 's = s.replace("tk.table, dim3(n_sampled), kSampleBlock, 0,", "tk.table, dim3(n_sampled), 256, 0,")' ;;
    b256:sample.cuh) echo 's = s.replace("__launch_bounds__(BLOCK, 2) table_kernel", "__launch_bounds__(BLOCK, 4) table_kernel").replace("table = table_kernel<kSampleBlock>;", "table = table_kernel<256>;")' ;;
    one:sample.cu) echo 's = s.replace("kSampleBlock, 0, \"sample\", x, a);", "kSampleBlock, smem_ready((const void *)tk.table, 110 * 1024) ? 110 * 1024 : 0, \"sample\", x, a);")' ;;
    one256:sample.cu) echo 's = s.replace("tk.table, dim3(n_sampled), kSampleBlock, 0, \"sample\", x, a);", "tk.table, dim3(n_sampled), 256, smem_ready((const void *)tk.table, 64 * 1024) ? 64 * 1024 : 0, \"sample\", x, a);")' ;;
    one256:sample.cuh) echo 's = s.replace("__launch_bounds__(BLOCK, 2) table_kernel", "__launch_bounds__(BLOCK, 2) table_kernel").replace("table = table_kernel<kSampleBlock>;", "table = table_kernel<256>;")' ;;
    ftab:sample.cuh) echo 's = s.replace("return __fmul_rn(weight_of(v, m, temp), 1099511627776.0f); };", "return weight_of(v, m, temp); };").replace("{ return __float2ull_rz(e); };", "{ return weight(e); };")' ;;
    statonly:sample.cuh) echo 's = s.replace("  const float m = st.m;\n", "  if (threadIdx.x == 0) a.tokens[row] = st.arg;\n  if (temp > -1.0f) return;\n  const float m = st.m;\n")' ;;
    fillonly:sample.cuh) echo 's = s.replace("  fill_table<BLOCK>(tab, w_of);\n  auto sums", "  fill_table<BLOCK>(tab, w_of);\n  if (threadIdx.x == 0) a.tokens[row] = tab.v[threadIdx.x] > 0.0f;\n  if (temp > -1.0f) return;\n  auto sums")' ;;
    *) echo pass ;;
  esac
}
s=$(date +%s)
pids=""
for n in "${names[@]}"; do
  [ "$n" = base ] && continue
  d=build/variants/table-$n; rm -rf "$d"; mkdir -p "$d"; cp -r csrc "$d/csrc"
  for f in sample.cu sample.cuh; do
    e=$(edit "$n" "$f")
    [ "$e" = pass ] && continue
    python3 -c "s = open('csrc/$f').read(); t = s; $e; assert s != t, 'edit of $n $f did not apply'; open('$d/csrc/$f', 'w').write(s)" ||
      { note "$n: edit of $f failed"; continue 2; }
  done
  for u in $(units "$n"); do
    o=$d/obj/${u%.cu}.o; mkdir -p "$(dirname "$o")"
    (timeout 240 nvcc $FL -c -o "$o" "$d/csrc/$u" >"$o.log" 2>&1) &
    pids="$pids $!"
  done
done
make -j"$(nproc)" kernels SAMPVIZ_ARCHS=$archs >"$O/build.log" 2>&1 || { note "build FAILED"; grep error "$O/build.log" | head; exit 1; }
wait $pids
note "build $(($(date +%s) - s)) s"
lib_of() { [ "$1" = base ] && echo "$PWD/build/libsampviz_kernels.so" || echo "$PWD/build/variants/table-$1/libsampviz_kernels.so"; }
for n in "${names[@]}"; do
  if [ "$n" != base ]; then
    d=build/variants/table-$n
    [ -d "$d/obj" ] || continue
    skip=""
    for u in $(units "$n"); do skip="$skip ! -path build/obj/$archs/${u%.cu}.o"; done
    objs="$(find build/obj/$archs -name '*.o' $skip | sort) $(find "$d/obj" -name '*.o' | sort)"
    if ! nvcc $FL -shared -o "$d/libsampviz_kernels.so" $objs >"$d/link.log" 2>&1; then
      note "$n does not build:"; cat "$d"/obj/*.log "$d"/obj/*/*.log "$d/link.log" 2>/dev/null | grep -m5 error | tee -a "$S"; continue
    fi
  fi
  timeout 120 ./gpu-bundle/sampviz bench --kernels "$(lib_of "$n")" --quick --ops sample --match 'plain|gumbel' \
    >"$O/bench-$n.txt" 2>&1
  note "== $n (exit $?)"
  grep -E "sample (plain|gumbel)" "$O/bench-$n.txt" | awk '{print "   ", $0}' | tee -a "$S"
done
if [ "${SUITE:-0}" = 1 ]; then
  for n in base one one256; do
    lib=$(lib_of "$n")
    [ -f "$lib" ] || continue
    case " ${names[*]} " in *" $n "*) ;; *) continue ;; esac
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 timeout 150 ./gpu-bundle/cuda.test -test.count=1 \
      -test.run 'TestGPUSample|TestGPUVariants' >"$O/suite-$n.log" 2>&1
    rc=$?
    line="suite $n: exit $rc ($(grep -c -- '--- FAIL' "$O/suite-$n.log") failures)"
    if [ "$n" = base ]; then
      SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
        SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3" \
        timeout 150 ./gpu-bundle/cuda.test -test.count=1 -test.run 'TestGPUSampleTable|TestGPUVariants' \
        >"$O/memcheck-$n.log" 2>&1
      mrc=$?
      line="$line; memcheck exit $mrc, $(grep -c 'ERROR SUMMARY: 0 errors' "$O/memcheck-$n.log") clean of $(grep -c 'ERROR SUMMARY' "$O/memcheck-$n.log")"
    fi
    note "$line"
    grep -E -- '--- FAIL' "$O/suite-$n.log" | head -8 | tee -a "$S"
  done
fi
note "total $(($(date +%s) - s)) s"
