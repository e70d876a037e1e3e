// eps_check.cpp: host check (g++ -O2) of the error bound behind tuned_kernel's eps, see NOTES.md.
// Host check of tuned_score's error bound (log2 units), MUFU.LG2 modelled as
// exact log2 perturbed by max(2^-22 abs, 2^-21 rel), against the true
// -log2(-log2 u) in long double.
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
int main(){
  const float L2E=1.44269504088896341f;
  double worst=0; double wu=0;
  std::mt19937_64 r(1);
  for(long n=0;n<(1<<23)+(1<<22);n++){
    uint32_t k = n < (1<<22) ? (uint32_t)((1u<<23)-1-n) : (uint32_t)(r()>>41);
    float u=std::fmaf((float)k,0x1p-23f,0x1p-24f);
    float d=1.0f-u;
    float ser=d*std::fmaf(d,std::fmaf(d,L2E/3.0f,L2E/2.0f),L2E);
    long double tru=-log2l(-log2l((long double)u));
    for(int p=-1;p<=1;p+=2){
      double lu=std::log2((double)u); lu+=p*std::fmax(0x1p-22,std::fabs(lu)*0x1p-21);
      float t2 = d<0x1p-6f ? ser : (float)(-lu);
      for(int q=-1;q<=1;q+=2){
        double lt=std::log2((double)t2); lt+=q*std::fmax(0x1p-22,std::fabs(lt)*0x1p-21);
        double e=std::fabs((double)(-(float)lt) - (double)tru);
        if(e>worst){worst=e;wu=u;}
      }
    }
  }
  printf("max |score - true| = 2^%.2f (at u=%.9g); eps 2^-10\n", std::log2(worst), wu);
}
