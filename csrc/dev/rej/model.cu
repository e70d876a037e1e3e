// model.cu: a host model of rejection's first compaction on pattern sources
// (patterns.cuh: pattern_cut's thresholds and KeyCut::take8, the device
// code itself) against sample_row's predicate, weight(v) > 0 and (v > w_c or,
// under lowest_index, v == w_c and i < c), on 20000 random bf16 and f16
// rows (ties of weight across values, +0/-0, -inf, weights that round to
// 0, odd n). Written with rejection's compaction (2026-11-28, run 175); no
// GPU: `nvcc -O2 -std=c++17 -arch=sm_80 -o /tmp/model model.cu && /tmp/model`
// prints ok and the count of tokens checked (45692480).
#include "../../patterns.cuh"
#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>
using namespace sv;
static unsigned key16h(unsigned b){ return (b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u); }
static unsigned long long weighth(float p){ float q = fminf(fmaxf(p, 0.0f), 1.0f); return (unsigned long long)(q * 1099511627776.0f); }
int main(){
  std::mt19937_64 rng(12345);
  long long checks = 0, general = 0, straddle = 0;
  for (int iter = 0; iter < 20000; iter++) {
    const bool f16 = iter & 1;
    const unsigned ninf = f16 ? 0xfc00u : 0xff80u;
    const unsigned maxmag = f16 ? 0x7bffu : 0x7f7fu;
    int n = 1 + rng() % (iter % 10 == 0 ? 5000 : 700);
    int ndist = 1 + rng() % std::min(n, 300);
    std::vector<unsigned> pats;
    while ((int)pats.size() < ndist) {
      unsigned b;
      int r = rng() % 10;
      if (r == 0) b = 0x0000; else if (r == 1) b = 0x8000;
      else { b = rng() % (maxmag + 1); if (rng() & 1) b |= 0x8000; }
      if (std::find(pats.begin(), pats.end(), b) == pats.end()) pats.push_back(b);
    }
    std::vector<unsigned> x(n);
    const bool someinf = rng() % 3 == 0;
    for (int i = 0; i < n; i++) x[i] = (someinf && rng() % 5 == 0) ? ninf : pats[rng() % ndist];
    // present finite keys, descending
    std::vector<unsigned> keys;
    for (int i = 0; i < n; i++) if (x[i] != ninf) keys.push_back(key16h(x[i]));
    std::sort(keys.begin(), keys.end()); keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::reverse(keys.begin(), keys.end());
    const int nd = keys.size();
    if (nd == 0) continue;
    std::vector<unsigned short> pos(65536, 0xffff);
    for (int j = 0; j < nd; j++) pos[keys[j]] = j;
    pos[key16h(ninf)] = nd;
    std::vector<float> w(nd + 1);
    float cur = 1.0f;
    for (int j = 0; j < nd; j++) {
      if (j > 0) {
        int r = rng() % 10;
        if (r < 3) {} // tie
        else if (r < 4) cur = cur * 1e-12f;  // positive float, may have weight 0
        else cur = cur * (float)(0.3 + 0.7 * (rng() % 1000) / 1000.0);
      }
      w[j] = cur;
    }
    w[nd] = 0.0f;
    auto wt = [&](int i) { return w[pos[key16h(x[i])]]; };
    // drawn token: any with weight(w) > 0 (also try weight-0 tokens sometimes: the rule must still match)
    std::vector<int> cands;
    for (int i = 0; i < n; i++) if (weighth(wt(i)) > 0 || rng() % 50 == 0) cands.push_back(i);
    if (cands.empty()) continue;
    for (int t = 0; t < 4; t++) {
      const int c = cands[rng() % cands.size()];
      const bool lowest = rng() & 1;
      // pattern_cut, host copy
      const unsigned kc = key16h(x[c]);
      const int jc = pos[kc];
      const float wc = w[jc];
      auto end = [&](bool or_equal) {
        int lo = -1, hi = nd;
        while (hi - lo > 1) {
          const int mid = (lo + hi) >> 1;
          const float v = w[mid];
          if (weighth(v) > 0 && (v > wc || (or_equal && v == wc))) lo = mid; else hi = mid;
        }
        return hi;
      };
      const int e_above = end(false), e_tied = lowest ? end(true) : e_above;
      auto near = [&](int e) { return e == 0 || (jc < nd && (e == jc || e == jc + 1)); };
      auto least_key = [&](int e) -> unsigned { return e == 0 ? 0x10000u : e == jc ? kc + 1 : kc; };
      unsigned k_above, k_tied;
      if (near(e_above) && near(e_tied)) { k_above = least_key(e_above); k_tied = least_key(e_tied); }
      else {
        general++;
        unsigned ka = 0x10000u, kt = 0x10000u;
        for (unsigned j = 0; j < 32768; j++) {
          const unsigned v = pos[2 * j] | ((unsigned)pos[2 * j + 1] << 16);
          for (int h = 0; h < 2; h++) {
            const int at = (int)((v >> (16 * h)) & 0xffffu);
            if (at < e_above) ka = std::min(ka, 2u * j + h);
            if (at < e_tied) kt = std::min(kt, 2u * j + h);
          }
        }
        k_above = ka; k_tied = kt;
      }
      const KeyCut cut{(k_above - 1u) * 0x10001u, (k_tied - 1u) * 0x10001u, lowest ? c : 0};
      const int bi = c; const float bw = wt(c);
      for (int i0 = 0; i0 < n; i0 += 8) {
        unsigned h[8];
        for (int e = 0; e < 8; e++) h[e] = i0 + e < n ? x[i0 + e] : 0xffffu;
        uint4 u; u.x = h[0] | h[1] << 16; u.y = h[2] | h[3] << 16; u.z = h[4] | h[5] << 16; u.w = h[6] | h[7] << 16;
        const unsigned m = cut.take8(u, i0);
        if (i0 < cut.tie_end && cut.tie_end < i0 + 8) straddle++;
        for (int e = 0; e < 8; e++) {
          const int i = i0 + e;
          bool want = false;
          if (i < n) { const float v = wt(i); want = weighth(v) > 0 && (v > bw || (lowest && v == bw && i < bi)); }
          const bool got = (m >> e) & 1;
          checks++;
          if (got != want) { printf("MISMATCH iter %d n %d c %d lowest %d i %d x %04x got %d want %d (wc %g v %g)\n", iter, n, c, lowest, i, i < n ? x[i] : 0, got, want, wc, i < n ? wt(i) : 0.f); return 1; }
        }
      }
    }
  }
  printf("ok: %lld checks, %lld general passes, %lld straddling groups\n", checks, general, straddle);
}
