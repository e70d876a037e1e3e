#!/usr/bin/env bash
# held_variants.sh: topp_held_kernel (top-p alone, bf16, the row held in a
# cluster's shared memory; issue 30's second session on top-p alone) beside
# topp_kernel, in one call on the GPU machine after the gpu-bundle unpack
# (this script runs `make kernels SAMPVIZ_ARCHS=sm_90` too):
#   base  the product: clusters of kHeldCluster = 4 blocks where the
#         launch is one wave of them (B=1, B=64), else topp_kernel
#   off   held_fits answers no: topp_kernel at every B
#   all   held at every B (more than one wave of clusters too)
#   read3 topp_kernel without topp_one_read (its three reads on every row)
#   t1pass  diagnostic: topp_one_read stops after its pass
#   t1    topp_kernel at one block an SM (120 KB of unused dynamic shared
#         memory), so that the rows in flight stay in the L2 for the reread
#   c2    clusters of 2 (a 128 KB chunk, one block an SM)
#   c8    clusters of 8
#   c16   clusters of 16 (non-portable; for few rows)
# and diagnostics (wrong tokens) that stop a row after a phase:
#   hmax    the copy, the maximum and its exchange
#   hcount  + the table, the count and the counts' exchange
#   hcut    + block 0's sum of the counts and the cut
# The kernel takes its cluster's size at run time, so every variant but
# base recompiles the launcher alone. `sampviz bench --quick` on "sample
# p0.9 (no top-k)" (B=512, 64 and 1), then with SUITE=1 the top-p and variant
# tests and memcheck on base. Logs go to $OUT (else gpu-out); summary.txt
# has the table.
source csrc/dev/variants_lib.sh
names=(${VARIANTS:-base off c8})
units() {
  case $1 in
    base) ;;
    h* | read3 | t1pass) echo instances/sample_tokens_bf16.cu ;;
    *) echo sample.cu ;;
  esac
}
# stop AFTER: python that makes the kernel end a row after the line AFTER.
stop() { echo "s = s.replace($1, $1 + '  if (temp > -1.0f) { if (r == 0 && threadIdx.x == 0) { a.tokens[row] = 0; todo[slot] = 0; } return; }\\n')"; }
edit() {
  case $1:$2 in
    hmax:sample.cuh) stop '"  // 2. The table and the count.\n"' ;;
    hcount:sample.cuh) stop '"    cluster_sync();  // every block\x27s counts and lump in place\n"' ;;
    hcut:sample.cuh) stop '"    const float cut = sh.cut;\n"' ;;
    off:sample.cu) echo 's = s.replace("if (!kern || !cluster_path()", "if (kern || !kern || !cluster_path()")' ;;
    all:sample.cu) echo 's = s.replace("slots <= max_clusters(", "0 < max_clusters(")' ;;
    t1pass:sample.cuh) echo 's = s.replace("  const int listed = nlump;\n", "  const int listed = nlump;\n  if (temp > -1.0f) { if (threadIdx.x == 0) { a.tokens[row] = listed; todo[slot] = 0; } return true; }\n")' ;;
    t1:sample.cu) echo 's = s.replace("tk.topp, dim3(n_sampled), kSampleBlock, 0,\n", "tk.topp, dim3(n_sampled), kSampleBlock, smem_ready((const void *)tk.topp, 120000) ? 120000 : 0,\n")' ;;
    read3:sample.cuh) echo 's = s.replace("top_p < 1.0f &&\n        topp_one_read", "top_p < 1.0f && false &&\n        topp_one_read")' ;;
    c2:sample.cuh | c8:sample.cuh | c16:sample.cuh)
      echo "s = s.replace('constexpr int kHeldCluster = 4;', 'constexpr int kHeldCluster = ${1#c};')" ;;
    *) echo pass ;;
  esac
}
variants_build held
variants_bench held 'p0.9 (no top-k)'
[ "${SUITE:-0}" = 1 ] && variant_tests held base 'TestGPUSampleTopP|TestGPUSampleTable|TestGPUVariants'
note "total $(($(date +%s) - started)) s"
