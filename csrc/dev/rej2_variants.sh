#!/usr/bin/env bash
# rej2_variants.sh: rejection's first compaction on pattern sources by
# pattern_candidates (patterns.cuh: the candidates as a threshold on the
# patterns' keys, two passes over the row, two barriers) against compact<>
# over the pattern source (a table lookup a token, 32 tiles of a block scan
# and two barriers each), issue 30's second session on rejection; one call
# on the GPU machine after the gpu-bundle unpack (this script runs `make
# kernels SAMPVIZ_ARCHS=sm_90` too):
#   base     the product (pattern_candidates)
#   compact  compact<> as before it
# `sampviz bench --quick` on "sample k50 p0.9 rejection" (and, where the
# flagged kernel's registers moved, "sample k50 p0.9"), then with SUITE=1
# the sample tests and memcheck on base. Logs go to $OUT (else gpu-out).
source csrc/dev/variants_lib.sh
names=(${VARIANTS:-base compact})
units() { [ "$1" = base ] || printf 'instances/sample_pattern_bf16.cu\n'; }
edit() {
  case $1:$2 in
    compact:sample.cuh) cat <<'PY'
s = s.replace("""      int len;
      if constexpr (IsPatternSource<Src>::value) {
        // w is x's unfiltered pattern source (sample_patterns narrows it
        // for the other methods only), whose candidates are a rule on the
        // patterns alone (pattern_cut).
        len = pattern_candidates<T, BLOCK>(x, n, c, lowest, lidx, lw, *pat);
      } else {
        len = compact<BLOCK, 8>(
            n, [&](int i) { const float v = w(i); return weight(v) > 0 && (v > bw || (lowest && v == bw && i < bi)); },
            [&](int i, int &id, float &v) { id = i, v = w(i); }, lidx, lw, sh);
      }
""", """      int len = compact<BLOCK, 8>(
          n, [&](int i) { const float v = w(i); return weight(v) > 0 && (v > bw || (lowest && v == bw && i < bi)); },
          [&](int i, int &id, float &v) { id = i, v = w(i); }, lidx, lw, sh);
""")
PY
    ;;
    *) echo pass ;;
  esac
}
variants_build rej2
variants_bench rej2 'k50 p0.9'
[ "${SUITE:-0}" = 1 ] && variant_tests rej2 base 'TestGPUSample|TestGPUVariants' 'TestGPUSample'
note "total $(($(date +%s) - started)) s"
