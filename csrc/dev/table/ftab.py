# ftab.py: the edit behind table_variants.sh's ftab: table_kernel with a
# table of the float weights w (4 bytes an entry, in RowShared's radix
# mass counters, table_room) instead of the fixed-point W (8 bytes, dynamic
# shared memory), each token's W = weight(w) computed after the lookup: half
# the shared-memory wavefronts a lookup, a few more instructions a token.
import sys
p = sys.argv[1]
s = open(p).read()
old = """  auto w_of = [&](float v) { return weight(weight_of(v, m, temp)); };
  const PatternTable<unsigned long long> tab{table_smem, table_window(m, temp)};
  fill_table<BLOCK>(tab, w_of);
  auto sums = [&](int lo, int hi) { return DrawWeights{0ull, table_sum(tab, x, lo, hi, w_of)}; };
  auto w = [&](int, unsigned b) { return DrawWeights{0ull, tab.value(b, w_of)}; };"""
new = """  auto f_of = [&](float v) { return weight_of(v, m, temp); };
  const PatternTable<float> tab{table_room(sh), table_window(m, temp)};
  fill_table<BLOCK>(tab, f_of);
  auto sums = [&](int lo, int hi) {
    return DrawWeights{0ull, table_sum(tab, x, lo, hi, f_of, [](float v) { return weight(v); })};
  };
  auto w = [&](int, unsigned b) { return DrawWeights{0ull, weight(tab.value(b, f_of))}; };"""
assert old in s, "ftab: kernel text not found"
s = s.replace(old, new)
open(p, "w").write(s)
