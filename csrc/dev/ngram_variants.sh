#!/usr/bin/env bash
# ngram_variants.sh: ngram_match under sampviz's rule at B=1 and B=128
# (issue 30 part 3), in one call on the GPU machine after `make gpu-bundle`:
# csrc/ngram.cu is compiled as-is and as edited copies (or the old kernel's
# verbatim copy), each linked with the product's other objects into its own
# library, and `sampviz bench --ops ngram_match --match 'ngram_match B='
# --quick` runs on each (the two sampviz-rule cases, B=1 and B=128 at
# L=4096 M=512; FastDeploy's cases are labelled "ngram_match fastdeploy"
# and are not selected). The product file carries no switches:
#   base   the product: one pass gives every candidate end its backward
#          common length with the pattern, one block-wide max over the key
#          (length, prompt first, leftmost) picks the match; the budget is
#          a block-wide exclusive sum; 512 threads a row, 16 ends a thread
#          loaded before comparing; one row skips the last-block counter
#   old    the kernel before (csrc/dev/ngram/old_ngram.cu): up to
#          2 * max_ngram block-wide leftmost searches, 256 threads, the
#          budget spent row by row by one thread
#   b256   the product with 256 threads a row and 32 ends a thread
#   b1024  the product with 1024 threads a row and 8 ends a thread
#   per4   the product with 4 ends a thread per round (several dependent
#          rounds of loads: what loading everything first buys)
#   scan1  the product running the budget's block-wide scan at one row too
#          (what skipping it there buys)
# VARIANTS picks them (default all six).
# With SUITE=1 the libraries of SUITE_VARIANTS (default "base old"; all
# six are meant to be exact) also run the ngram tests of the GPU suite
# against engine/cpu and compute-sanitizer memcheck on their quick mode
# (old passing the new tests checks the tests; base is also make
# gpu-test's).
# Logs go to $OUT (else gpu-out); summary.txt has the table.
set -uo pipefail
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
archs=sm_90
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 -gencode arch=compute_90,code=sm_90"
edit() { # edit NAME: the python that turns the product's ngram.cu into NAME's
  case $1 in
    base) echo 'pass' ;;
    old) echo 's = open("csrc/dev/ngram/old_ngram.cu").read()' ;;
    b256) echo 's = s.replace("kNgramBlock = 512;", "kNgramBlock = 256;").replace("kNgramPer = 16;", "kNgramPer = 32;")' ;;
    b1024) echo 's = s.replace("kNgramBlock = 512;", "kNgramBlock = 1024;").replace("kNgramPer = 16;", "kNgramPer = 8;")' ;;
    per4) echo 's = s.replace("kNgramPer = 16;", "kNgramPer = 4;")' ;;
    scan1) echo 's = s.replace("    if (rows > 1) cub::BlockScan", "    cub::BlockScan")' ;;
  esac
}
names=(${VARIANTS:-base old b256 b1024 per4 scan1})
s=$(date +%s)
pids=""
for n in "${names[@]}"; do
  d=build/variants/ngram-$n; mkdir -p "$d"
  python3 -c "import sys; s = open('csrc/ngram.cu').read(); t = s; $(edit "$n"); assert '$n' == 'base' or s != t, 'edit of $n did not apply'; open('$d/ngram.cu', 'w').write(s)" || { note "$n: edit failed"; continue; }
  (timeout 90 nvcc $FL -Icsrc -c -o "$d/ngram.o" "$d/ngram.cu" >"$d/log" 2>&1) &
  pids="$pids $!"
done
timeout 140 make -j"$(nproc)" kernels SAMPVIZ_ARCHS=$archs >"$O/build.log" 2>&1 || { note "build FAILED"; grep error "$O/build.log" | head; exit 1; }
wait $pids
objs=$(find build/obj/$archs -name '*.o' ! -name 'ngram.o' | sort)
note "build $(($(date +%s) - s)) s"
for n in "${names[@]}"; do
  d=build/variants/ngram-$n
  if ! nvcc $FL -shared -o "$d/libsampviz_kernels.so" $objs "$d/ngram.o" >>"$d/log" 2>&1; then
    note "$n does not build:"; grep error "$d/log" | head -5 | tee -a "$S"; continue
  fi
  timeout 30 ./gpu-bundle/sampviz bench --kernels "$PWD/$d/libsampviz_kernels.so" --quick --ops ngram_match \
    --match 'ngram_match B=' >"$O/bench-$n.txt" 2>&1
  note "== $n (exit $?)"
  grep -E "^ *ngram_match +B=" "$O/bench-$n.txt" | grep "%" | awk '{print "   ", $0}' | tee -a "$S"
done
if [ "${SUITE:-0}" = 1 ]; then
  tests='TestGPUNgramMatch$|TestGPUNgramMatchEdges|TestGPUNgramMatchShapes'
  for n in ${SUITE_VARIANTS:-base old}; do
    lib=$PWD/build/variants/ngram-$n/libsampviz_kernels.so
    [ -f "$lib" ] || continue
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 timeout 45 ./gpu-bundle/cuda.test -test.count=1 \
      -test.run "$tests" >"$O/suite-$n.log" 2>&1
    rc=$?
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
      SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3" \
      timeout 60 ./gpu-bundle/cuda.test -test.count=1 -test.run "$tests" >"$O/memcheck-$n.log" 2>&1
    mrc=$?
    note "suite $n: exit $rc ($(grep -c -- '--- FAIL' "$O/suite-$n.log") failures); memcheck exit $mrc, $(grep -c 'ERROR SUMMARY: 0 errors' "$O/memcheck-$n.log") clean of $(grep -c 'ERROR SUMMARY' "$O/memcheck-$n.log")"
  done
fi
note "total $(($(date +%s) - s)) s"
