#!/usr/bin/env bash
# b1b_variants.sh: renorm and sample (top-k 50, top-p 0.9) at B=1, second
# attempt (issue 30 part 3: at most 12 us), in one call on the GPU machine
# after the gpu-bundle unpack. Each variant is a copy of csrc/ edited here
# by text (the product carries no switches; csrc/dev/variants_lib.sh):
# only the units an edit touches are compiled from the copy and linked with
# the product's other objects into a library of its own; then `sampviz
# bench --quick --ops renorm,sample --match 'k50 p0.9'` (renorm B=1 and
# 128, sample B=1 and 512) runs on each, argmax on base beside them.
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
# copies (build/variants/b1b-NAME/csrc), a check without a GPU. SUITE=1 also
# runs the fast-path GPU tests and compute-sanitizer memcheck on the
# libraries in SUITE_VARIANTS (default "base c32 grp grp32m"; only base and the
# candidates are meant to be correct). Logs go to $OUT (else gpu-out); summary.txt has the table.
EDITED="fast_layout.cuh fast_row.cuh renorm.cuh fast_scan.cuh fast_top.cuh"
source csrc/dev/variants_lib.sh
names=(${VARIANTS:-base plain16 c32 c24 grp grp32 grp32m emptyc emptyp empty32 scanonly scanonlyp scanonly32 scanonlyg scanonlyg32 loadonly loadonly32 nofinish nofinishp nofinish32})
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
    base) return ;;
    plain16 | c32 | c24) echo renorm.cu sample.cu; return ;;
    grp) echo instances/renorm_fast_bf16.cu instances/sample_fast_bf16.cu; return ;;
    grp32 | grp32m) echo renorm.cu sample.cu instances/renorm_fast_bf16.cu instances/sample_fast_bf16.cu; return ;;
  esac
  case $e in *" S "*) echo renorm.cu ;; esac
  echo instances/renorm_fast_bf16.cu
}
# rep A B: python that replaces text A of s with B, which must be there.
rep() { printf 'assert %s in s, "text not found: " + %s[:60]; s = s.replace(%s, %s); ' "$1" "$1" "$1" "$2"; }
key_file() { # key_file KEY: the file edit key KEY changes
  case $1 in
    S | P | M | N) echo fast_layout.cuh ;;
    W | L) echo fast_scan.cuh ;;
    R) echo fast_top.cuh ;;
    E) echo renorm.cuh ;;
    O | F | G) echo fast_row.cuh ;;
  esac
}
key_edit() { # key_edit KEY: the python that applies KEY to its file's text s
  case $1 in
    S) rep '"\ninline "' '"\nstatic inline "'; rep '"template <typename K>\nbool fast_cluster("' '"template <typename K>\nstatic bool fast_cluster("' ;;
    P) rep '"  if (a.chunks < 8 || a.chunks > kMaxCluster ||"' '"  if (a.chunks > 0 || a.chunks > kMaxCluster ||"' ;;
    M) rep '"constexpr int kFastMinChunk = 8192;"' '"constexpr int kFastMinChunk = 4096;"' ;;
    N) rep '"constexpr int kFastMinChunk = 8192;"' '"constexpr int kFastMinChunk = 5400;"' ;;
    W) printf 'import sys; sys.path.insert(0, "csrc/dev/b1b"); from grouptheta import group_theta; s = group_theta(s); ' ;;
    R) rep '"for (int j0 = 0; j0 < n; j0 += 128) {"' '"for (int j0 = 0; j0 < n; j0 += 256) {"'
       rep '"          unsigned key[4];\n          int id[4];"' '"          unsigned key[8];\n          int id[8];"'
       rep '"          for (int q = 0; q < 4; q++) {\n            const int j = j0 + q * 32"' '"          for (int q = 0; q < 8; q++) {\n            const int j = j0 + q * 32"'
       rep '"          for (int q = 0; q < 4; q++) {\n            const bool keep"' '"          for (int q = 0; q < 8; q++) {\n            const bool keep"' ;;
    E) rep '"    pdl_trigger();  // renorm_kernel may launch now; it waits for this kernel\n"' '"    pdl_trigger();  // renorm_kernel may launch now; it waits for this kernel\n    if (a.vocab > 0) return;\n"' ;;
    O) rep '"  if constexpr (CLUSTER) return fast_cluster_row<T>(a, slot, fp, nan, zeros, begin, end, s, top);\n"' '"  if (a.vocab > 0) return nan == 2 ? kFastFlagged : kFastDone;\n  if constexpr (CLUSTER) return fast_cluster_row<T>(a, slot, fp, nan, zeros, begin, end, s, top);\n"' ;;
    L) rep '"    const unsigned t0 = kth_key<PASSES>(s.keys + head_count, BLOCK * UNROLL, k, s);"' '"    const unsigned t0 = order_key(kInf);"' ;;
    F) rep '"  if (c != 0) return kFastDone;\n  const bool ok = fast_top<T, true>"' '"  if (c >= 0) return kFastDone;\n  const bool ok = fast_top<T, true>"' ;;
    G) rep '"  if (!fast_arrive(a, slot, nan, s)) return kFastDone;\n"' '"  if (!fast_arrive(a, slot, nan, s) || a.vocab > 0) return kFastDone;\n"' ;;
  esac
}
edit() { # edit NAME FILE: NAME's keys that change FILE, or pass
  local k e=""
  for k in $(edits "$1"); do [ "$(key_file "$k")" = "$2" ] && e="$e$(key_edit "$k")"; done
  e=${e%; }  # each statement ends in "; "
  echo "${e:-pass}"
}
variants_build b1b
# The candidates on renorm and sample, base with argmax beside (it reads
# the same rows: the reference); the diagnostics on renorm B=1 alone.
all=("${names[@]}")
pick() { local n; for n in "${all[@]}"; do case " $* " in *" $n "*) echo "$n" ;; esac; done; }
candidates="base plain16 c32 c24 grp grp32 grp32m"
names=($(pick $candidates))
variants_bench b1b 'renorm k50 p0.9 bf16|sample k50 p0.9 bf16' renorm,sample
names=($(pick base))
variants_bench b1b 'argmax bf16' argmax
names=($(for n in "${all[@]}"; do case " $candidates " in *" $n "*) ;; *) echo "$n" ;; esac; done))
variants_bench b1b 'renorm k50 p0.9 bf16 B=1 V' renorm
if [ "${SUITE:-0}" = 1 ]; then
  for n in $(pick ${SUITE_VARIANTS:-base c32 grp grp32m}); do
    SUITE_TIMEOUT=100 variant_tests b1b "$n" 'TestGPURenorm|TestGPUSample$|TestGPUSampleDraws|TestGPUFastSmallBatches|TestGPUFastOneRow|TestGPUVariants' \
      'TestGPUFastOneRow|TestGPUFastSmallBatches'
  done
fi
note "total $(($(date +%s) - started)) s"
