#!/usr/bin/env bash
# phase_variants.sh: where top-p alone and unfiltered spec_verify spend
# their time (issue 30 part 3: "sample p0.9 (no top-k)" B=512 464 us, 10.4x
# the floor, and B=1 100 us; spec_verify B=1 25.7 us, B=128 2.66x), in one
# call on the GPU machine after the gpu-bundle unpack (this script runs
# `make kernels SAMPVIZ_ARCHS=sm_90` too). Every variant but base and
# old is a diagnostic (wrong tokens): a copy that stops after one phase.
# Top-p alone (since this script's first run, topp_kernel: row_stat, a
# count of the window's patterns, the cut, the draw; three reads):
#   base     the product
#   old      without the SV_TOP_P_ONLY dispatch: the top-k fast path flags
#            every row, then sample_flagged_kernel's pattern path (the same
#            tokens)
#   strided  the draws whose weights read q (draw_bits with w alone,
#            ptable.cuh) summing each thread's own segment, not by
#            segment_sums (run 166: base took segment_sums for every draw,
#            strided none)
#   t1       topp_kernel at one block an SM (120 KB of dynamic shared
#            memory it does not use), so that the 132 rows in flight (33
#            MB) stay in the L2 between its three reads
#   tstat    topp_kernel stopping after row_stat (the first read)
#   tcount   stopping after the count (the second read)
#   tcut     stopping once the cut is known
# spec_verify, unfiltered (B=1: the split prepare, a cluster a position;
# B=128: the lean prepare, a block a position; then the chain):
#   nochain  the chain returns at once (the prepare and two launches)
#   nodraw   the chain runs the acceptance tests, not the draw
#   maxonly  nochain, the split prepare stopping after the cluster's max
#   nototal  nochain, the split prepare stopping before the span totals
#   qstaged  launches with draft distributions take the staged second read
#            in the lean prepare too (kept off when their chain read each
#            row strided, run 152; since run 166 that chain reads coalesced).
#            Adopted after run 170: the product does it, so the edit no
#            longer applies and qstaged is not in the default list
#   cfloat   the lean chain's table of fixed-point weights (bf16, one-hot)
#            as floats, p * 2^40, W their truncation (table_kernel's), in
#            place of 64-bit W: half the shared-memory traffic a lookup
# VARIANTS picks them; logs go to $OUT (else gpu-out), summary.txt.
EDITED="sample.cu sample.cuh spec_verify.cuh ptable.cuh spec_verify.cu"
source csrc/dev/variants_lib.sh
names=(${VARIANTS:-base old strided tstat tcount tcut nochain nodraw maxonly nototal cfloat})
units() {
  case $1 in
    base) ;;
    old | t1) echo sample.cu ;;
    strided) echo instances/sample_tokens_bf16.cu instances/spec_full_bf16.cu ;;
    tstat | tcount | tcut) echo instances/sample_tokens_bf16.cu ;;
    qstaged) echo spec_verify.cu ;;
    *) echo instances/spec_full_bf16.cu ;;
  esac
}
stop() { # stop MARK WHAT: python that inserts, after MARK, a write of WHAT (todo cleared) and a return that the compiler keeps
  printf 's = s.replace(%s, %s + "if (threadIdx.x == 0) { a.tokens[row] = (int)(%s); todo[slot] = 0; }\\n if (temp > -1.0f) return;\\n")' "$1" "$1" "$2"
}
edit() {
  case $1:$2 in
    old:sample.cu) echo 's = s.replace("const bool topp = single && (flags & SV_TOP_P_ONLY)", "const bool topp = false && single && (flags & SV_TOP_P_ONLY)")' ;;
    qstaged:spec_verify.cu) echo 's = s.replace("!qprobs && tabled<T>() && staged_ready", "tabled<T>() && staged_ready")' ;;
    t1:sample.cu) echo 's = s.replace("tk.topp, dim3(n_sampled), kSampleBlock, 0, \"sample (top-p)\"", "tk.topp, dim3(n_sampled), kSampleBlock, smem_ready((const void *)tk.topp, 120000) ? 120000 : 0, \"sample (top-p)\"")' ;;
    strided:ptable.cuh) echo 's = s.replace("return draw_bits<BLOCK, true>(x, n, residual_first, u, sums, w, sh);", "return draw_bits<BLOCK>(x, n, residual_first, u, sums, w, sh);")' ;;
    tstat:sample.cuh) stop '"  const float m = st.m;\n  // w_of is w * 2^40 (exact: a power of two), whose truncation is W = Weight(w).\n"' 'st.m' ;;
    tcount:sample.cuh) stop '"    lump = Reduce<BLOCK>::sum(sh.red, lump);  // and waits for the counts\n"' 'lump' ;;
    tcut:sample.cuh) stop '"    cut = tab.v[entry(oc)];\n"' 'cut' ;;
    nochain:spec_verify.cuh | maxonly:spec_verify.cuh | nototal:spec_verify.cuh)
      echo 's = s.replace("  pdl_wait();  // launched behind the prepare kernel: its statistics first\n", "  pdl_wait();  // launched behind the prepare kernel: its statistics first\n  if (a.rows > 0) return;\n")'
      case $1 in
        maxonly) echo 's = s.replace("  const float m = best.v, temp = rp.temperature[row];\n", "  const float m = best.v, temp = rp.temperature[row];\n  if (rank == 0 && threadIdx.x == 0) stats[slot].m = m;\n  if (temp > -1.0f) return;\n")' ;;
        nototal) echo 's = s.replace("  if (!valid) return;\n  // The chain", "  if (temp > -1.0f) return;\n  // The chain")' ;;
      esac ;;
    cfloat:spec_verify.cuh) cat <<'PY'
s = (s.replace("auto w_of = [&](float v) { return weight(p_of(v)); };",
               "auto w_of = [&](float v) { return __fmul_rn(fminf(fmaxf(p_of(v), 0.0f), 1.0f), 1099511627776.0f); };\n"
               "        auto fixed = [](float e) -> unsigned long long { return __float2ull_rz(e); };")
      .replace("const PatternTable<unsigned long long> tab{wtab,", "const PatternTable<float> tab{reinterpret_cast<float *>(wtab),")
      .replace("table_sum(tab, xb, lo, hi, w_of);", "table_sum(tab, xb, lo, hi, w_of, fixed);")
      .replace("own ? tab.value(__bfloat16_as_ushort(xb[xd]), w_of) : 0ull", "own ? fixed(tab.value(__bfloat16_as_ushort(xb[xd]), w_of)) : 0ull")
      .replace("const unsigned long long w = tab.value(b, w_of);", "const unsigned long long w = fixed(tab.value(b, w_of));"))
PY
    ;;
    nodraw:spec_verify.cuh) echo 's = s.replace("  int token = -1;\n  if (ps.valid) {", "  int token = -1;\n  if (ps.valid && a.rows < 0) {")' ;;
    *) echo pass ;;
  esac
}
variants_build phase
variants_bench phase 'p0.9 (no top-k)|plain'
variants_bench phase "spec_verify bf16|spec_verify q bf16" spec_verify
note "total $(($(date +%s) - started)) s"
