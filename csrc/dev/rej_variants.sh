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
#            global lists (the tokens ordered before round 0's draw; since
#            run 175 pattern_candidates, before it compact<>)
# The rounds themselves are few: engine/lesson's rejection rounds on 48 rows
# of the bench's shape (normal logits sd 2, T 0.7, top-k 50, top-p 0.9)
# took 1-5 rounds a row (median 2), with 114 to 46991 candidates (median
# ~900) after round 0 (docs/perf-log.md, run 162).
# Logs go to $OUT (else gpu-out); summary.txt has the table.
source csrc/dev/variants_lib.sh
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
    list:sample.cuh) echo 's = s.replace("        len = pattern_candidates<T, BLOCK>(x, n, c, lowest, lidx, lw, *pat);\n", "        len = pattern_candidates<T, BLOCK>(x, n, c, lowest, lidx, lw, *pat);\n        if (threadIdx.x == 0) a.tokens[row] = len;\n        if (temp > -1.0f) return;\n")' ;;
    *) echo pass ;;
  esac
}
variants_build rej
variants_bench rej 'rejection'
note "total $(($(date +%s) - started)) s"
