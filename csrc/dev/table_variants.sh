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
source csrc/dev/variants_lib.sh
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
variants_build table
variants_bench table 'plain|gumbel'
if [ "${SUITE:-0}" = 1 ]; then
  for n in base one one256; do
    lib=$(lib_of table "$n")
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
note "total $(($(date +%s) - started)) s"
