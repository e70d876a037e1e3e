#!/usr/bin/env bash
# counts_variants.sh: where the time of sample's counted draws goes (issue
# 30 part 1), in one call on the GPU machine after `make gpu-bundle`:
# csrc/sample.cu (the counts kernel's launcher unit) is compiled as-is and
# as edited copies, each linked with the product's other objects into its
# own library, and `sampviz bench --ops sample --match counts --quick` runs
# on each. The copies are made here by text edits, so the product file
# carries no switches:
#   base      the product (since run 152: g15sc, its bucket counts packed
#             two to a 32-bit word, 63 draws a thread, 130 KB)
# First session (text edits of prev, the product of runs 147-151: a guide
# of 2^13 buckets, halving down to 8 tokens and counting those, 16 draws a
# thread under 2^20 draws a row):
#   old       the first counts kernel (run 145): a guide of 2^12 buckets,
#             a binary search to the end, 64 draws a thread
#   guide12   prev with the first kernel's guide
#   bsearch   prev with a binary search to the end (no scan)
#   per64     prev with 64 draws a thread whatever the draws
#   scan16    prev counting the last 16 tokens (a bucket of 2^13
#             averages 16 at V=128256: one round of loads, most draws)
#   scan32    the same with 32
#   g12scan32 a guide of 2^12 buckets (16 KB, more blocks an SM) and 32
#   noatomic  diagnostic (wrong counts): a thread sums its draws' counts
#             in a register and adds once at the end: the atomics' cost
#   nosearch  diagnostic (wrong counts): the token is the guide's first
#             token of the bucket, no search: the fine search's cost
#   nophilox  diagnostic (wrong counts): the uniform is a multiplicative
#             hash of the draw index instead of Philox4x32-10: Philox's
#             cost
# Second session (whole copies of sample.cu under csrc/dev/counts/, each
# with a header saying what it changes):
#   prev      csrc/dev/counts/prev_sample.cu, the product of runs 147-151
#             verbatim
#   g15       a guide of 2^15 buckets in dynamic shared memory, uint16
#             offsets from an int32 base every 64 buckets (66 KB), 512
#             threads (g15_sample.cu)
#   g14       g15 with 2^14 buckets
#   g16       g15 with 2^16 buckets (130 KB), 1024 threads
#   g15sc     g15 plus a shared count a bucket for the draws in a bucket
#             of one token (no search, no global atomic), added a token
#             per 32 buckets at the block's end; 1024 threads, 194 KB
#   g16sc     g15sc with 2^16 buckets, uint8 offsets every 16 buckets,
#             uint16 counts, 32 draws a thread; 208 KB
#   g16sc63   g16sc with 63 draws a thread (64512 a block, still under a
#             uint16 count): half the flush's atomics a draw
#   g16nosearch  diagnostic (wrong counts): g16sc63 counting a draw of a
#             bucket of several tokens on the bucket's first token, no
#             CDF load: the search's cost in g16sc63
#   g16noatomic  diagnostic (wrong counts): g16sc63 without the draws'
#             global atomics (the flush's stay): their cost
# VARIANTS picks them (default "base prev"); run 146 ran the diagnostics on
# the first kernel (docs/perf-log.md).
# With SUITE=1 each variant's library also runs the counts tests of the
# GPU suite against engine/cpu and compute-sanitizer memcheck on their
# quick mode (diagnostic variants, names with "no", are skipped: their
# counts are wrong by design; base, the product,
# is make gpu-test's).
# Logs go to $OUT (else gpu-out); summary.txt has the table.
set -uo pipefail
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
for f in gpu-bundle/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
archs=sm_90
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 -gencode arch=compute_90,code=sm_90"
src() { # src NAME: the file NAME's copy is made from
  case $1 in
    prev) echo csrc/dev/counts/prev_sample.cu ;;
    g14 | g15 | g16) echo csrc/dev/counts/g15_sample.cu ;;
    g15sc | g16sc) echo csrc/dev/counts/$1_sample.cu ;;
    g16sc63 | g16nosearch | g16noatomic) echo csrc/dev/counts/g16sc_sample.cu ;;
    base) echo csrc/sample.cu ;;
    *) echo csrc/dev/counts/prev_sample.cu ;;  # the first session's edits apply to the kernel they were made on
  esac
}
edit() { # edit NAME: the python that turns src NAME into NAME's copy
  case $1 in
    base | prev | g15 | g15sc | g16sc) echo 'pass' ;;
    g16sc63) echo 's = s.replace("kCountsPerThread = 32;", "kCountsPerThread = 63;")' ;;
    g16nosearch) echo 's = s.replace("kCountsPerThread = 32;", "kCountsPerThread = 63;").replace("      } else {\n        while", "      } else if (hi < 0) {\n        while").replace("        tok = lo + below;\n      }\n    }", "        tok = lo + below;\n      } else {\n        tok = lo;\n      }\n    }")' ;;
    g16noatomic) echo 's = s.replace("kCountsPerThread = 32;", "kCountsPerThread = 63;").replace("const int lane = threadIdx.x & 31;", "const int lane = threadIdx.x & 31;\n  unsigned acc = 0;").replace("lane == __ffs(peers) - 1) atomicAdd(out + tok, (unsigned)__popc(peers));", "lane == __ffs(peers) - 1) acc += (unsigned)__popc(peers) ^ (unsigned)tok;").replace("  // Each warp adds its 32", "  if (acc == 0xffffffffu) atomicAdd(out, acc);\n  // Each warp adds its 32")' ;;
    g14) echo 's = s.replace("kGuideBits = 15;", "kGuideBits = 14;")' ;;
    g16) echo 's = s.replace("kGuideBits = 15;", "kGuideBits = 16;").replace("kCountsBlock = 512;", "kCountsBlock = 1024;")' ;;
    old) echo 's = s.replace("kGuideBits = 13;", "kGuideBits = 12;").replace("kCountsScan = 8;", "kCountsScan = 0;").replace("kFewDraws = 1 << 20;", "kFewDraws = 0;")' ;;
    guide12) echo 's = s.replace("kGuideBits = 13;", "kGuideBits = 12;")' ;;
    bsearch) echo 's = s.replace("kCountsScan = 8;", "kCountsScan = 0;")' ;;
    scan16) echo 's = s.replace("kCountsScan = 8;", "kCountsScan = 16;")' ;;
    scan32) echo 's = s.replace("kCountsScan = 8;", "kCountsScan = 32;")' ;;
    g12scan32) echo 's = s.replace("kCountsScan = 8;", "kCountsScan = 32;").replace("kGuideBits = 13;", "kGuideBits = 12;")' ;;
    per64) echo 's = s.replace("kFewDraws = 1 << 20;", "kFewDraws = 0;")' ;;
    noatomic) echo 's = s.replace("const int lane = threadIdx.x & 31;", "const int lane = threadIdx.x & 31;\n  unsigned acc = 0;").replace("atomicAdd(out + tok, (unsigned)__popc(peers));\n  }\n}", "acc += (unsigned)__popc(peers) ^ (unsigned)tok;\n  }\n  if (acc == 0xffffffffu) atomicAdd(out, acc);\n}")' ;;
    nosearch) echo 's = s.replace("int lo = table[g], hi = table[g + 1];", "int lo = table[g], hi = lo;")' ;;
    nophilox) echo 's = s.replace("const unsigned long long u = Stream(seed, offset, row, d).u64(0);", "const unsigned long long u = ((unsigned long long)d * 0x9E3779B97F4A7C15ull) ^ (seed + offset);")' ;;
  esac
}
names=(${VARIANTS:-base prev})
s=$(date +%s)
pids=""
for n in "${names[@]}"; do
  d=build/variants/counts-$n; mkdir -p "$d"
  e=$(edit "$n"); [ -n "$e" ] || { note "$n: no such variant"; continue; }
  python3 -c "import sys; s = open('$(src "$n")').read(); t = s; $e; assert '$e' == 'pass' or s != t, 'edit of $n did not apply'; open('$d/sample.cu', 'w').write(s)" || { note "$n: edit failed"; continue; }
  (nvcc $FL -Icsrc -c -o "$d/sample.o" "$d/sample.cu" >"$d/log" 2>&1) &
  pids="$pids $!"
done
make -j"$(nproc)" kernels SAMPVIZ_ARCHS=$archs >"$O/build.log" 2>&1 || { note "build FAILED"; grep error "$O/build.log" | head; exit 1; }
wait $pids
objs=$(find build/obj/$archs -name '*.o' ! -name 'sample.o' | sort)
note "build $(($(date +%s) - s)) s"
for n in "${names[@]}"; do
  d=build/variants/counts-$n
  if ! nvcc $FL -shared -o "$d/libsampviz_kernels.so" $objs "$d/sample.o" >>"$d/log" 2>&1; then
    note "$n does not build:"; grep error "$d/log" | head -5 | tee -a "$S"; continue
  fi
  timeout 120 ./gpu-bundle/sampviz bench --kernels "$PWD/$d/libsampviz_kernels.so" --quick --ops sample --match counts \
    >"$O/bench-$n.txt" 2>&1
  note "== $n (exit $?)"
  grep -E "^ *sample counts.*draws=10\^[57] +[0-9]" "$O/bench-$n.txt" | grep -v " us$" | awk '{print "   ", $0}' | tee -a "$S"
done
if [ "${SUITE:-0}" = 1 ]; then
  for n in "${names[@]}"; do
    lib=$PWD/build/variants/counts-$n/libsampviz_kernels.so
    [ -f "$lib" ] && [ "$n" != base ] || continue
    case $n in *no*) continue ;; esac  # the diagnostics' counts are wrong by design
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 timeout 150 ./gpu-bundle/cuda.test -test.count=1 \
      -test.run 'TestGPUSampleCounts|TestGPUSampleDraws|TestGPUCheckTenMillionDraws' >"$O/suite-$n.log" 2>&1
    rc=$?
    SAMPVIZ_KERNELS=$lib SAMPVIZ_REQUIRE_GPU=1 SAMPVIZ_GPU_QUICK=1 \
      SAMPVIZ_WORKER_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 3" \
      timeout 150 ./gpu-bundle/cuda.test -test.count=1 -test.run 'TestGPUSampleCounts|TestGPUSampleDraws' >"$O/memcheck-$n.log" 2>&1
    mrc=$?
    note "suite $n: exit $rc ($(grep -c -- '--- FAIL' "$O/suite-$n.log") failures); memcheck exit $mrc, $(grep -c 'ERROR SUMMARY: 0 errors' "$O/memcheck-$n.log") clean of $(grep -c 'ERROR SUMMARY' "$O/memcheck-$n.log")"
  done
fi
note "total $(($(date +%s) - s)) s"
