/* hp5.c (session 40): one model opened twice in one process, its packed copy in 4 KiB pages (SL_PACK_HUGE=0) and
 * in 2 MiB pages (the default since session 40), t(1) and t(n) at context 100 alternated call by call; prints
 * the medians and the median of the pairs ratios 2 MiB / 4 KiB. Build: see session40.md. */
#include <stdio.h>
#include <stdlib.h>
#include "sl_model.h"
#include "sl_common.h"
static int cmpd(const void *a, const void *b){double x=*(const double*)a,y=*(const double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  sl_model *m[2]; setenv("SL_PACK_HUGE","0",1); if(sl_model_open(argv[1],&m[0])) return 1;
  unsetenv("SL_PACK_HUGE"); if(sl_model_open(argv[1],&m[1])) return 1;
  int R=atoi(argv[2]); int n=atoi(argv[3]);
  sl_model_ctx *c[2]; sl_model_ctx_alloc(m[0],256,&c[0]); sl_model_ctx_alloc(m[1],256,&c[1]);
  size_t V=m[0]->cfg.vocab_size; float *lg=malloc(sizeof(float)*V*128);
  int32_t tok[128]; for(int i=0;i<128;i++) tok[i]=(i*37+11)%V;
  const size_t P=100; sl_model_forward(c[0],tok,P,lg); sl_model_forward(c[1],tok,P,lg);
  double t[2][400], t1[2][400];
  for(int r=0;r<R;r++) for(int kk=0;kk<2;kk++){ int k= r%2? 1-kk: kk;
      double t0=sl_now_s(); sl_model_forward(c[k],tok,1,lg); t1[k][r]=sl_now_s()-t0; sl_model_truncate(c[k],P);
      t0=sl_now_s(); sl_model_forward(c[k],tok,n,lg); t[k][r]=sl_now_s()-t0; sl_model_truncate(c[k],P);}
  double r5[400], r1[400]; for(int r=0;r<R;r++){ r5[r]=t[1][r]/t[0][r]; r1[r]=t1[1][r]/t1[0][r]; }
  qsort(r5,R,8,cmpd); qsort(r1,R,8,cmpd); for(int k=0;k<2;k++){qsort(t[k],R,8,cmpd);qsort(t1[k],R,8,cmpd);}
  printf("4K: t1 %.3f t%d %.3f | 2M: t1 %.3f t%d %.3f | median pair ratio huge/4K: t1 %.3f t%d %.3f\n", t1[0][R/2]*1e3,n,t[0][R/2]*1e3,t1[1][R/2]*1e3,n,t[1][R/2]*1e3,r1[R/2],n,r5[R/2]);
}
