#include <stdio.h>
#include <stdlib.h>
#include "sl_model.h"
#include "sl_common.h"
static int cmpd(const void *a, const void *b){double x=*(const double*)a,y=*(const double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  sl_model *mt; if(sl_model_open(argv[1],&mt)){puts(sl_errmsg());return 1;}
  int R=atoi(argv[2]); int n=atoi(argv[3]);
  sl_model_ctx *ct; sl_model_ctx_alloc(mt,256,&ct);
  size_t V=mt->cfg.vocab_size; float *lg=malloc(sizeof(float)*V*128);
  int32_t tok[128]; for(int i=0;i<128;i++) tok[i]=(i*37+11)%V;
  const size_t P=100; sl_model_forward(ct,tok,P,lg);
  double *t1=malloc(8*R), *tn=malloc(8*R), *rr=malloc(8*R);
  for(int r=0;r<R;r++){
    double t0=sl_now_s(); if(!getenv("SKIP1")){sl_model_forward(ct,tok,1,lg);} t1[r]=sl_now_s()-t0; sl_model_truncate(ct,P);
    t0=sl_now_s(); sl_model_forward(ct,tok,n,lg); tn[r]=sl_now_s()-t0; sl_model_truncate(ct,P);
    rr[r]=tn[r]/t1[r];
  }
  qsort(t1,R,8,cmpd); qsort(tn,R,8,cmpd); qsort(rr,R,8,cmpd);
  printf("t1 median %.3f min %.3f ms; t(%d) median %.3f min %.3f; ratio median %.3f\n", t1[R/2]*1e3, t1[0]*1e3, n, tn[R/2]*1e3, tn[0]*1e3, rr[R/2]);
}
