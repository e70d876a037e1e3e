#!/usr/bin/env bash
# sm1_variants.sh: softmax at B=1 (bf16 V=128256, 12.0 us in run 155, the
# issue's 12 us bound) and where its time goes, in one call on the GPU
# machine after `make gpu-bundle`: csrc/softmax.cu is compiled as-is and as
# edited copies, each linked with the product's other objects into its own
# library, and `sampviz bench --quick --ops softmax` (every softmax shape,
# so B=128 and B=512 show too) runs on each. Variants:
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
set -uo pipefail
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
archs=sm_90
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 -gencode arch=compute_90,code=sm_90"
first() { # first NAME: the python that makes s, csrc/softmax.cu's text, the copy NAME's edit starts from
  case $1 in
    regs* | d_nowrite) echo 'sys.path.insert(0, "csrc/dev/sm1"); from regs import regs; s = regs(s)' ;;
    *) echo 'pass' ;;
  esac
}
SMALL='      if (st < 0)\n        st = softmax_cluster<T, kClusterBlock'
edit() { # edit NAME: the python that turns src NAME into NAME's copy
  case $1 in
    base | regs) echo 'pass' ;;
    regs512s) echo "s = s.replace('$SMALL', '      if (st < 0 && rows < 4) st = softmax_cluster<T, 512, 3, kClusterUnroll>(static_cast<const T *>(logits), rows, vocab, temperature, probs);\n$SMALL', 1)" ;;
    regs1024s) echo "s = s.replace('$SMALL', '      if (st < 0 && rows < 4) st = softmax_cluster<T, 1024, 1, kClusterUnroll>(static_cast<const T *>(logits), rows, vocab, temperature, probs);\n$SMALL', 1)" ;;
    regs512u2s) echo "s = s.replace('$SMALL', '      if (st < 0 && rows < 4) st = softmax_cluster<T, 512, 3, 2>(static_cast<const T *>(logits), rows, vocab, temperature, probs);\n$SMALL', 1)" ;;
    regs1024u1s) echo "s = s.replace('$SMALL', '      if (st < 0 && rows < 4) st = softmax_cluster<T, 1024, 1, 1>(static_cast<const T *>(logits), rows, vocab, temperature, probs);\n$SMALL', 1)" ;;
    bulk16) echo 's = s.replace("if ((long long)want * rows < device_sms()) return -1;", "if ((long long)want * rows < device_sms()) want = kMaxCluster;")' ;;
    d_nowrite) echo 's = s.replace("          write_out<N>(ch.out, tot, start + j * N, v, N);", "          if (v[0] == -12345.0f) write_out<N>(ch.out, tot, start + j * N, v, N);")' ;;
    d_reread) echo 's = s.replace("{ write_out<N>(ch.out, tot, i0, v, n); });", "{ if (v[0] == -12345.0f) write_out<N>(ch.out, tot, i0, v, n); });")' ;;
  esac
}
names=(${VARIANTS:-base regs regs512s regs1024s regs512u2s regs1024u1s bulk16 d_nowrite d_reread})
s=$(date +%s)
pids=""
for n in "${names[@]}"; do
  d=build/variants/sm1-$n; mkdir -p "$d"
  e=$(edit "$n"); [ -n "$e" ] || { note "$n: no such variant"; continue; }
  python3 -c "import sys; s = open('csrc/softmax.cu').read(); $(first "$n"); t = s; $e; assert '$n' in ('base', 'regs') or s != t, 'edit of $n did not apply'; open('$d/softmax.cu', 'w').write(s)" || { note "$n: edit failed"; continue; }
  (timeout 100 nvcc $FL -Icsrc -c -o "$d/softmax.o" "$d/softmax.cu" >"$d/log" 2>&1) &
  pids="$pids $!"
done
echo "sm1: building the product and ${#names[@]} variants"
make -j"$(nproc)" kernels SAMPVIZ_ARCHS=$archs >"$O/build.log" 2>&1 || { note "build FAILED"; grep error "$O/build.log" | head; exit 1; }
wait $pids
objs=$(find build/obj/$archs -name '*.o' ! -name 'softmax.o' | sort)
note "build $(($(date +%s) - s)) s"
for n in "${names[@]}"; do
  d=build/variants/sm1-$n
  [ -f "$d/softmax.o" ] || { note "$n does not compile:"; grep -m5 error "$d/log" | tee -a "$S"; continue; }
  if ! nvcc $FL -shared -o "$d/libsampviz_kernels.so" $objs "$d/softmax.o" >>"$d/log" 2>&1; then
    note "$n does not link:"; grep -m5 error "$d/log" | tee -a "$S"; continue
  fi
  timeout 60 ./gpu-bundle/sampviz bench --kernels "$PWD/$d/libsampviz_kernels.so" --quick --ops softmax \
    >"$O/bench-$n.txt" 2>&1
  note "== $n (exit $?)"
  grep -E "^ *softmax.*[0-9]" "$O/bench-$n.txt" | grep -v " us$" | head -12 | awk '{print "   ", $0}' | tee -a "$S"
done
if [ "${SUITE:-0}" = 1 ]; then
  for n in "${names[@]}"; do
    lib=$PWD/build/variants/sm1-$n/libsampviz_kernels.so
    [ -f "$lib" ] || continue
    case $n in d_*) continue ;; esac  # the diagnostics' outputs are wrong by design
    echo "sm1: suite $n"
    tests='TestGPUSoftmaxOneRow'  # the one-row variants change only launches of under 4 rows
    case $n in base | regs | bulk16) tests='TestGPUSoftmax' ;; esac
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 timeout 60 ./gpu-bundle/cuda.test -test.count=1 \
      -test.run "$tests" >"$O/suite-$n.log" 2>&1
    rc=$?
    mrc=-; mem="(memcheck on base and regs only)"
    case $n in base | regs)
      SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
        SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3" \
        timeout 90 ./gpu-bundle/cuda.test -test.count=1 -test.run 'TestGPUSoftmax' >"$O/memcheck-$n.log" 2>&1
      mrc=$?
      mem="$(grep -c 'ERROR SUMMARY: 0 errors' "$O/memcheck-$n.log") clean of $(grep -c 'ERROR SUMMARY' "$O/memcheck-$n.log")" ;;
    esac
    note "suite $n: exit $rc ($(grep -c -- '--- FAIL' "$O/suite-$n.log") failures); memcheck exit $mrc, $mem"
  done
fi
note "total $(($(date +%s) - s)) s"
