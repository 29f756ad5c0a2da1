/* dec3_ctx.c: ../f16_decode_prefetch_zen3/dec3.c with the context set by CTX (default 64). */
/* t(n) of a model's forward pass at position 64, two settings of mb_prologue alternated call by
 * call (the order flipped every round); prints the median of the pair ratios t(1)/t(0) per n.
 * usage: OMP_NUM_THREADS=T dec3 MODEL ROUNDS N... */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
int mb_prologue = 0;
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
    sl_model *m; sl_model_ctx *c; if(argc<4||sl_model_open(argv[1],&m)||sl_model_ctx_alloc(m,256,&c)){fprintf(stderr,"usage/open failed\n");return 2;}
    int R=atoi(argv[2]); size_t V=m->cfg.vocab_size; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    int CTX=getenv("CTX")?atoi(getenv("CTX")):64; int32_t *tk=malloc(300*4); for(int i=0;i<300;i++) tk[i]=(i*7919)%(int)V; sl_model_forward(c,tk,CTX,lg); sl_model_truncate(c,CTX);
    for(int ai=3;ai<argc;ai++){ int n=atoi(argv[ai]); double t[2][1000], pr[1000];
        for(int r=0;r<R;r++) for(int k=0;k<2;k++){ int v=(r&1)?1-k:k; mb_prologue=v;
            double t0=sl_now_s(); sl_model_forward(c,tk+CTX,n,lg); t[v][r]=sl_now_s()-t0; sl_model_truncate(c,CTX);}
        for(int r=0;r<R;r++) pr[r]=t[1][r]/t[0][r]; qsort(pr,R,sizeof(double),cmpd); qsort(t[0],R,sizeof(double),cmpd); qsort(t[1],R,sizeof(double),cmpd);
        printf("T=%d n=%d: off median %.3f ms, on median %.3f ms; pair ratio on/off median %.3f [q1 %.3f, q3 %.3f]\n",omp_get_max_threads(),n,t[0][R/2]*1e3,t[1][R/2]*1e3,pr[R/2],pr[R/4],pr[3*R/4]);}
    return 0;
}
