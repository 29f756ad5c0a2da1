#include <stdio.h>
#include <stdlib.h>
#include "sl_model.h"
#include "sl_common.h"
extern size_t sl_kern_pf_multi; extern int sl_kern_pf_hint;
static int cmpd(const void *a, const void *b){double x=*(const double*)a,y=*(const double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  sl_model *mt; if(sl_model_open(argv[1],&mt)){puts(sl_errmsg());return 1;}
  int R=atoi(argv[2]); int n=atoi(argv[3]); int K=argc-4; size_t ds[8]; for(int k=0;k<K;k++) ds[k]=atol(argv[4+k]);
  sl_model_ctx *ct; sl_model_ctx_alloc(mt,256,&ct);
  size_t V=mt->cfg.vocab_size; float *lg=malloc(sizeof(float)*V*128);
  int32_t tok[128]; for(int i=0;i<128;i++) tok[i]=(i*37+11)%V;
  const size_t P=100; sl_model_forward(ct,tok,P,lg);
  double t[8][400], t1[400];
  for(int r=0;r<R;r++){
    double t0=sl_now_s(); sl_model_forward(ct,tok,1,lg); t1[r]=sl_now_s()-t0; sl_model_truncate(ct,P);
    for(int kk=0;kk<K;kk++){ int k = r%2? K-1-kk: kk; sl_kern_pf_multi=ds[k] % 1000000; sl_kern_pf_hint = ds[k] / 1000000;
      t0=sl_now_s(); sl_model_forward(ct,tok,n,lg); t[k][r]=sl_now_s()-t0; sl_model_truncate(ct,P);}
  }
  qsort(t1,R,8,cmpd); printf("t1 median %.3f ms; t(%d) median (ratio to the first) per distance:", t1[R/2]*1e3, n);
  double base=0; for(int k=0;k<K;k++){ /* per-pair ratios */
    double rr[400]; for(int r=0;r<R;r++) rr[r]=t[k][r]/t[0][r]; qsort(rr,R,8,cmpd); qsort(t[k],R,8,cmpd);
    printf("  %zu: %.3f (%.3f)", ds[k], t[k][R/2]*1e3, rr[R/2]); }
  printf("\n");
}
