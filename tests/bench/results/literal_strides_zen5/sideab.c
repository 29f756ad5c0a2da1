#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sl_common.h"
#include "sl_model.h"
int mb_side = 0;
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
    sl_model *m; sl_model_ctx *c; if(argc<5||sl_model_open(argv[1],&m)||sl_model_ctx_alloc(m,256,&c)) return 2;
    int R=atoi(argv[2]), n=atoi(argv[3]), P=atoi(argv[4]); size_t V=m->cfg.vocab_size; float *lg=malloc(256*V*4), *l2=malloc(256*V*4); int32_t tok[256]; for(int i=0;i<256;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(c,tok,P,lg); sl_model_truncate(c,P);
    static double t[2][20000], pr[20000]; int same=1;
    for(int r=0;r<R;r++) for(int k=0;k<2;k++){ int v=(r&1)?1-k:k; mb_side = v;
        double t0=sl_now_s(); sl_model_forward(c,tok+P,n,v?l2:lg); t[v][r]=sl_now_s()-t0; sl_model_truncate(c,P); if(k==1) same &= !memcmp(lg,l2,n*V*4);}
    for(int r=0;r<R;r++) pr[r]=t[1][r]/t[0][r]; qsort(pr,R,8,cmpd); qsort(t[0],R,8,cmpd); qsort(t[1],R,8,cmpd);
    printf("%s threads %d n=%d ctx %d: off %.1f us, on %.1f us; on/off median of %d pair ratios %.3f [q1 %.3f, q3 %.3f]; %s\n",argv[1],omp_get_max_threads(),n,P,t[0][R/2]*1e6,t[1][R/2]*1e6,R,pr[R/2],pr[R/4],pr[3*R/4],same?"same bits":"DIFFER");
    return 0;}
