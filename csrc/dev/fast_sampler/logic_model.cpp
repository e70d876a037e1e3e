// logic_model.cpp: host check (g++ -O2) of tuned_kernel's candidate logic, see NOTES.md.
// Host model of tuned_kernel<BLOCK, EXACT>'s selection logic: approximate
// scores = float log2 model (+ bounded perturbation), "exact" scores = the
// true Gumbel score rounded to float; checks the recheck picks the exact argmax.
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <vector>
static uint32_t hsh(uint64_t x){x^=x>>33;x*=0xff51afd7ed558ccdULL;x^=x>>33;x*=0xc4ceb9fe1a85ec53ULL;x^=x>>33;return (uint32_t)x;}
int main(){
  const float L2E=1.44269504088896341f, inf=INFINITY;
  std::mt19937 rng(5);
  int bad=0, rows=0; long rescans=0;
  for(int trial=0;trial<3000;trial++){
    int V=8*(1+rng()%600), BLOCK= (trial%3==0)?32:(trial%3==1?64:256);
    int kind=trial%6;
    std::vector<float> x(V);
    for(int i=0;i<V;i++){
      float v = kind==0? std::normal_distribution<float>(0,2)(rng) : kind==1? 0.0f : kind==2? (float)(rng()%3)/8 : kind==3? 3000.0f+(rng()%2)*16 : kind==5? 1.0f : std::normal_distribution<float>(0,0.01f)(rng);
      x[i]=v;
    }
    std::vector<uint32_t> w(V); for(int i=0;i<V;i++) w[i]=hsh(trial*1000003ull+(kind==5? i%13 : i));  // kind 5: exact ties
    float m=-inf; for(float v:x) m=std::fmax(m,v);
    auto exact=[&](int i){ double u=((w[i]>>9)+0.5)/8388608.0; return (float)((float)(x[i]-m) + (float)(-std::log(-std::log(u)))); };
    auto approx=[&](int i){ double u=((w[i]>>9)+0.5)/8388608.0; double s=x[i]*1.4426950408889634 - std::log2(-std::log2(u)); s+= ((int)(hsh(w[i])%2001)-1000)*1e-3*0x1p-15; return (float)s; };
    // true answer
    int best=-1; float bs=-inf; for(int i=0;i<V;i++){float s=exact(i); if(best<0||s>bs){best=i;bs=s;}}
    // kernel logic
    int nvec=V/8; std::vector<float> a1(BLOCK,-inf),a2(BLOCK,-inf); std::vector<int> v1(BLOCK,-1);
    for(int t=0;t<BLOCK;t++) for(int v=t;v<nvec;v+=BLOCK){ float m8=-inf; for(int e=0;e<8;e++) m8=std::fmax(m8,approx(8*v+e));
        a2[t]=std::fmax(a2[t],std::fmin(a1[t],m8)); if(m8>a1[t]) v1[t]=v; a1[t]=std::fmax(a1[t],m8);}
    float amax=-inf; for(int t=0;t<BLOCK;t++) amax=std::fmax(amax,a1[t]);
    float eps=0x1p-10f+(std::fabs(m)+std::fabs(amax))*0x1p-18f, thr=amax-2*eps;
    int got=-1; float gs=-inf;
    auto take=[&](int i){ float s=exact(i); if(got<0||s>gs||(s==gs&&i<got)){got=i;gs=s;} };
    for(int t=0;t<BLOCK;t++){
      if(!(a2[t]<thr)){ rescans++; for(int v=t;v<nvec;v+=BLOCK) for(int e=0;e<8;e++) take(8*v+e); }
      else if(!(a1[t]<thr)){ for(int e=0;e<8;e++) if(!(approx(8*v1[t]+e)<thr)) take(8*v1[t]+e); }
    }
    rows++; if(got!=best){bad++; if(bad<5) printf("mismatch trial %d kind %d V %d: %d vs %d\n",trial,kind,V,got,best);}
  }
  printf("%d/%d rows match, %ld rescans\n", rows-bad, rows, rescans);
}
