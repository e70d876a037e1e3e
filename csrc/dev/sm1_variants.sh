#!/usr/bin/env bash
# sm1_variants.sh: softmax at B=1 (bf16 V=128256, 12.0 us in run 155, the
# issue's 12 us bound) and where its time goes, in one call on the GPU
# machine after `make gpu-bundle` (csrc/dev/variants_lib.sh: csrc/softmax.cu
# as edited copies, each linked with the product's other objects into its
# own library), and `sampviz bench --quick --ops softmax` (every softmax
# shape, so B=128 and B=512 show too) on each. Variants:
#   base      the product
#   regs      csrc/dev/sm1/regs.py's edit: the cluster kernel keeps a
#             chunk of at most one round of loads a thread (256 threads x
#             4 x 16 B: bf16 V=128256 at B=1, chunks of 8016 tokens) in
#             registers between the statistics and the write: no L2 reread
#   regs512s  regs, and launches of fewer than 4 rows use 512-thread
#             blocks (chunks up to 16384 bf16 tokens stay in registers:
#             V=151936 too); other rows keep 256
#   regs1024s the same with 1024-thread blocks
#   regs512u2s  regs512s with two loads a thread (512 x 2 x 16 B: bf16
#             V=128256's chunk; fewer registers live across the exchange)
#   regs1024u1s 1024-thread blocks, one load a thread (the same 16 KB)
#   bulk16    the product with the bulk kernel (TMA load and bulk stores)
#             at B=1 too, as clusters of 16
# Diagnostics (names d_*; their outputs are wrong by design, no suite):
#   d_nowrite regs without the vector stores: launch + read + statistics
#             + DSMEM exchange; regs - d_nowrite = the write drain
#   d_reread  base without the stores: d_reread - d_nowrite = the reread
# VARIANTS picks them (default: all). With SUITE=1 each correct variant's
# library runs the softmax GPU tests against engine/cpu (TestGPUSoftmax*
# for base, regs, bulk16; TestGPUSoftmaxOneRow for the one-row
# variants), and base and regs compute-sanitizer memcheck on the quick
# mode. Logs go to $OUT (else gpu-out); summary.txt
# has the table.
EDITED=softmax.cu
source csrc/dev/variants_lib.sh
names=(${VARIANTS:-base regs regs512s regs1024s regs512u2s regs1024u1s bulk16 d_nowrite d_reread})
units() { [ "$1" = base ] || echo softmax.cu; }
REGS='import sys; sys.path.insert(0, "csrc/dev/sm1"); from regs import regs; s = regs(s)'
SMALL='      if (st < 0)\n        st = softmax_cluster<T, kClusterBlock'
# small BLOCK WAYS UNROLL: the python that puts a cluster launch of
# BLOCK-thread blocks before the product's for launches of under 4 rows.
small() { echo "s = s.replace('$SMALL', '      if (st < 0 && rows < 4) st = softmax_cluster<T, $1, $2, $3>(static_cast<const T *>(logits), rows, vocab, temperature, probs);\n$SMALL', 1)"; }
edit() { # edit NAME FILE: the python that turns softmax.cu's text s into NAME's
  case $1 in
    base) echo pass ;;
    regs) echo "$REGS" ;;
    regs512s) echo "$REGS; $(small 512 3 kClusterUnroll)" ;;
    regs1024s) echo "$REGS; $(small 1024 1 kClusterUnroll)" ;;
    regs512u2s) echo "$REGS; $(small 512 3 2)" ;;
    regs1024u1s) echo "$REGS; $(small 1024 1 1)" ;;
    bulk16) echo 's = s.replace("if ((long long)want * rows < device_sms()) return -1;", "if ((long long)want * rows < device_sms()) want = kMaxCluster;")' ;;
    d_nowrite) echo "$REGS; "'s = s.replace("          write_out<N>(ch.out, tot, start + j * N, v, N);", "          if (v[0] == -12345.0f) write_out<N>(ch.out, tot, start + j * N, v, N);")' ;;
    d_reread) echo 's = s.replace("{ write_out<N>(ch.out, tot, i0, v, n); });", "{ if (v[0] == -12345.0f) write_out<N>(ch.out, tot, i0, v, n); });")' ;;
    *) echo 'raise SystemExit("no such variant")' ;;
  esac
}
variants_build sm1
variants_bench sm1 softmax softmax
if [ "${SUITE:-0}" = 1 ]; then
  for n in "${names[@]}"; do
    case $n in d_*) continue ;; esac  # the diagnostics' outputs are wrong by design
    tests=TestGPUSoftmaxOneRow  # the one-row variants change only launches of under 4 rows
    case $n in base | regs | bulk16) tests=TestGPUSoftmax ;; esac
    mem=-
    case $n in base | regs) mem=TestGPUSoftmax ;; esac
    SUITE_TIMEOUT=90 variant_tests sm1 "$n" "$tests" "$mem"
  done
fi
note "total $(($(date +%s) - started)) s"
