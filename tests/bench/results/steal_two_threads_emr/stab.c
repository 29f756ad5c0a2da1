#include <stdio.h>
#include <stdlib.h>
#include "sl_model.h"
#include "sl_common.h"
extern int sl_kern_steal_from;
static int cmpd(const void *a, const void *b){double x=*(const double*)a,y=*(const double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  sl_model *mt; if(sl_model_open(argv[1],&mt)){puts(sl_errmsg());return 1;}
  int R=atoi(argv[2]); int n=atoi(argv[3]); size_t A=atol(argv[4]), B=atol(argv[5]);
  sl_model_ctx *ct; sl_model_ctx_alloc(mt,256,&ct);
  size_t V=mt->cfg.vocab_size; float *lg=malloc(sizeof(float)*V*128);
  int32_t tok[128]; for(int i=0;i<128;i++) tok[i]=(i*37+11)%V;
  const size_t P=100; sl_model_forward(ct,tok,P,lg);
  double *ta=malloc(8*R), *tb=malloc(8*R), *rr=malloc(8*R);
  for(int r=0;r<R;r++){
    for(int k=0;k<2;k++){ int w = (r%2)^k; sl_kern_steal_from = (int)(w? B: A);
      double t0=sl_now_s(); sl_model_forward(ct,tok,n,lg); double dt=sl_now_s()-t0; sl_model_truncate(ct,P);
      if(w) tb[r]=dt; else ta[r]=dt; }
    rr[r]=tb[r]/ta[r];
  }
  qsort(ta,R,8,cmpd); qsort(tb,R,8,cmpd); qsort(rr,R,8,cmpd);
  printf("n=%d  A(%zu) median %.3f min %.3f ms; B(%zu) median %.3f min %.3f; B/A pair-ratio median %.3f [q25 %.3f q75 %.3f]\n", n, A, ta[R/2]*1e3, ta[0]*1e3, B, tb[R/2]*1e3, tb[0]*1e3, rr[R/2], rr[R/4], rr[3*R/4]);
}
