// swar.cu: rowops.cuh's key16x2 and above16x2 (two 16-bit keys and
// comparisons in one word) checked against key16 and plain 16-bit
// comparisons, every 16-bit half against a spread of partners; `nvcc -O2
// -std=c++17 -arch=sm_80 -o /tmp/swar swar.cu && /tmp/swar` prints bad 0.
#include "../../rowops.cuh"
#include <cstdio>
using namespace sv;
static unsigned key16h(unsigned b){ return (b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u); }
int main(){
  // key16x2 exhaustive over halves (pairs with a spread of partners)
  for (unsigned a = 0; a < 65536; a++) for (unsigned b = 0; b < 65536; b += 251) {
    unsigned w = a | (b << 16);
    unsigned k = key16x2(w);
    if ((k & 0xffff) != key16h(a) || (k >> 16) != key16h(b)) { printf("key fail %x\n", w); return 1; }
    w = b | (a << 16); k = key16x2(w);
    if ((k & 0xffff) != key16h(b) || (k >> 16) != key16h(a)) { printf("key fail2 %x\n", w); return 1; }
  }
  // above16x2: every (k, t) pair in the low half, with the high half a different pair
  unsigned long long bad = 0;
  for (unsigned t = 0; t < 65536; t++) {
    const unsigned th = (t * 40503u + 7) & 0xffffu;
    for (unsigned k = 0; k < 65536; k++) {
      const unsigned kh = (k * 2654435761u >> 7) & 0xffffu;
      const unsigned r = above16x2(k | (kh << 16), t | (th << 16));
      const unsigned want = (k > t ? 0x8000u : 0u) | (kh > th ? 0x80000000u : 0u);
      if (r != want) { if (bad++ < 5) printf("above fail k %x t %x kh %x th %x r %x\n", k, t, kh, th, r); }
      // swap halves' roles
      const unsigned r2 = above16x2(kh | (k << 16), th | (t << 16));
      const unsigned want2 = (kh > th ? 0x8000u : 0u) | (k > t ? 0x80000000u : 0u);
      if (r2 != want2) { if (bad++ < 5) printf("above fail2\n"); }
    }
  }
  printf("bad %llu\n", bad);
  return bad != 0;
}
