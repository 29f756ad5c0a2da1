/* imb.c: per matmul call of the shipped target's t(N) at two threads, each thread's work time
 * (its units, before the closing barrier): the imbalance |w0 - w1| and the start skew, summed per
 * call size. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
int mb_on; long mb_n[2]; double mb_w[2][100000], mb_s[2][100000]; long mb_u[2][100000];
int main(int argc,char**argv){
    int n=argc>1?atoi(argv[1]):5, R=argc>2?atoi(argv[2]):200;
    sl_model *m; sl_model_ctx *c;
    if(sl_model_open("models/family/target.safetensors",&m)||sl_model_ctx_alloc(m,256,&c)) return 1;
    size_t V=m->cfg.vocab_size; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(c,tok,64,lg); sl_model_truncate(c,64);
    double tt=0;
    for(int r=0;r<R;r++){ mb_on=1; double t0=sl_now_s(); sl_model_forward(c,tok+64,n,lg); tt+=sl_now_s()-t0; mb_on=0; sl_model_truncate(c,64);}
    long N=mb_n[0]<mb_n[1]?mb_n[0]:mb_n[1];
    /* group by units count */
    long keys[16]; int nk=0; double sg[16]={0}; long s1[16]={0}; double imb[16]={0}, skew[16]={0}, work[16]={0}, late[16]={0}; long cnt[16]={0};
    for(long i=0;i<N;i++){ int k; for(k=0;k<nk&&keys[k]!=mb_u[0][i];k++); if(k==nk) keys[nk++]=mb_u[0][i];
        double e0=mb_s[0][i]+mb_w[0][i], e1=mb_s[1][i]+mb_w[1][i];
        imb[k]+=fabs(mb_w[0][i]-mb_w[1][i]); sg[k]+=mb_w[1][i]-mb_w[0][i]; s1[k]+=mb_w[1][i]>mb_w[0][i]; skew[k]+=fabs(mb_s[0][i]-mb_s[1][i]); work[k]+=(mb_w[0][i]+mb_w[1][i])/2; late[k]+=fabs(e0-e1); cnt[k]++; }
    printf("t(%d) mean %.3f ms over %d rounds; %ld calls per thread\n",n,tt/R*1e3,R,N);
    printf("units  calls/pass  work us  |w0-w1| us  start skew us  end gap us (per call, means)\n");
    double tot_gap=0;
    for(int k=0;k<nk;k++){ printf("%5ld  %10.1f  %7.2f  %10.2f  %13.2f  %10.2f   w1-w0 %+.2f us, thread 1 slower in %.0f%%\n",keys[k],(double)cnt[k]/R,work[k]/cnt[k]*1e6,imb[k]/cnt[k]*1e6,skew[k]/cnt[k]*1e6,late[k]/cnt[k]*1e6,sg[k]/cnt[k]*1e6,100.0*s1[k]/cnt[k]); tot_gap+=late[k]; }
    printf("end gaps summed per pass: %.1f us (%.1f%% of t(%d))\n",tot_gap/R*1e6,100*tot_gap/tt,n);
    return 0;
}
