#!/usr/bin/env bash
# rej_variants.sh: where sort-free rejection sampling's time goes (issue 30
# part 3, "sample k50 p0.9 rejection" at B=512: 1165 us, 26x the floor), in
# one call on the GPU machine after the gpu-bundle unpack (this script runs
# `make kernels SAMPVIZ_ARCHS=sm_90` too). Every variant but base is a
# diagnostic (wrong tokens): a copy of the bf16 pattern kernels
# (instances/sample_pattern_bf16.cu) that stops after one phase of a row,
# `sampviz bench --quick --ops sample --match rejection` on each:
#   base     the product (since run 163 round 0 on a pattern source is
#            pattern_pick: 1173 -> 763 us)
#   ready    stops once pattern_ready has counted the row's 65536 patterns
#   filter   stops after pattern_filter (top-k and top-p decided)
#   round0   stops after round 0's draw over every token (run 162, before
#            pattern_pick: seg_total and seg_find)
#   list     stops after the first compaction of the candidates into the
#            global lists (the tokens ordered before round 0's draw)
# The rounds themselves are few: engine/lesson's rejection rounds on 48 rows
# of the bench's shape (normal logits sd 2, T 0.7, top-k 50, top-p 0.9)
# took 1-5 rounds a row (median 2), with 114 to 46991 candidates (median
# ~900) after round 0 (docs/perf-log.md, run 162).
# Logs go to $OUT (else gpu-out); summary.txt has the table.
set -uo pipefail
O=${OUT:-gpu-out}; mkdir -p "$O"; S=$O/summary.txt; : >"$S"
note() { echo "$*" | tee -a "$S"; }
python3 -c "import lzma,glob,os; [ (open(f[:-3],'wb').write(lzma.open(f).read()), os.chmod(f[:-3],0o755), os.remove(f)) for f in glob.glob('gpu-bundle/*.xz')]"
archs=sm_90
FL="-O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 -gencode arch=compute_90,code=sm_90"
names=(${VARIANTS:-base ready filter round0 list})
units() {
  case $1 in
    base) ;;
    *) echo instances/sample_pattern_bf16.cu ;;
  esac
}
edit() {
  case $1:$2 in
    ready:sample.cuh) echo 's = s.replace("      if (got == kPatternReady) {\n", "      if (got == kPatternReady) {\n        if (threadIdx.x == 0) a.tokens[row] = (int)pat->m;\n        if (temp > -1.0f) return;\n")' ;;
    filter:sample.cuh) echo 's = s.replace("    const Filter f = pattern_filter<T, BLOCK>(ps, n, a.rp, row, a.flags, p);\n", "    const Filter f = pattern_filter<T, BLOCK>(ps, n, a.rp, row, a.flags, p);\n    if (threadIdx.x == 0) a.tokens[row] = f.tie_cut + (int)f.cut_p;\n    if (temp > -1.0f) return;\n")' ;;
    round0:sample.cuh) echo 's = s.replace("mine, kept_weight_all(w), sh) : -1;\n    }\n", "mine, kept_weight_all(w), sh) : -1;\n    }\n    if (threadIdx.x == 0) a.tokens[row] = c;\n    if (temp > -1.0f) return;\n")' ;;
    list:sample.cuh) echo 's = s.replace("[&](int i, int &id, float &v) { id = i, v = w(i); }, lidx, lw, sh);\n", "[&](int i, int &id, float &v) { id = i, v = w(i); }, lidx, lw, sh);\n      if (threadIdx.x == 0) a.tokens[row] = len;\n      if (temp > -1.0f) return;\n")' ;;
    *) echo pass ;;
  esac
}
s=$(date +%s)
pids=""
for n in "${names[@]}"; do
  [ "$n" = base ] && continue
  d=build/variants/rej-$n; rm -rf "$d"; mkdir -p "$d"; cp -r csrc "$d/csrc"
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
lib_of() { [ "$1" = base ] && echo "$PWD/build/libsampviz_kernels.so" || echo "$PWD/build/variants/rej-$1/libsampviz_kernels.so"; }
for n in "${names[@]}"; do
  if [ "$n" != base ]; then
    d=build/variants/rej-$n
    [ -d "$d/obj" ] || continue
    skip=""
    for u in $(units "$n"); do skip="$skip ! -path build/obj/$archs/${u%.cu}.o"; done
    objs="$(find build/obj/$archs -name '*.o' $skip | sort) $(find "$d/obj" -name '*.o' | sort)"
    if ! nvcc $FL -shared -o "$d/libsampviz_kernels.so" $objs >"$d/link.log" 2>&1; then
      note "$n does not build:"; cat "$d"/obj/*.log "$d"/obj/*/*.log "$d/link.log" 2>/dev/null | grep -m5 error | tee -a "$S"; continue
    fi
  fi
  timeout 120 ./gpu-bundle/sampviz bench --kernels "$(lib_of "$n")" --quick --ops sample --match 'rejection' \
    >"$O/bench-$n.txt" 2>&1
  note "== $n (exit $?)"
  grep -E "rejection" "$O/bench-$n.txt" | awk '{print "   ", $0}' | tee -a "$S"
done
note "total $(($(date +%s) - s)) s"
