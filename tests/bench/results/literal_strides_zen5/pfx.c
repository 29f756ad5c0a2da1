/* t(n) of the shipped target at position 64: baseline (mode 0) against settings "mode:dist:near",
 * alternated call by call (order flipped each round); median of pair ratios setting/baseline. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
int mb_xt = 0;
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
    sl_model *m; sl_model_ctx *c; if(argc<5||sl_model_open(argv[1],&m)||sl_model_ctx_alloc(m,256,&c)){fprintf(stderr,"usage: pf MODEL ROUNDS N SETTING...\n");return 2;}
    int R=atoi(argv[2]), n=atoi(argv[3]); size_t V=m->cfg.vocab_size; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(c,tok,64,lg); sl_model_truncate(c,64);
    for(int ai=4;ai<argc;ai++){ int md=atoi(argv[ai]);
        static double t[2][4000], pr[4000];
        for(int r=0;r<R;r++) for(int k=0;k<2;k++){ int v=(r&1)?1-k:k; mb_xt = v ? md : 0;
            double t0=sl_now_s(); sl_model_forward(c,tok+64,n,lg); t[v][r]=sl_now_s()-t0; sl_model_truncate(c,64);}
        for(int r=0;r<R;r++) pr[r]=t[1][r]/t[0][r]; qsort(pr,R,sizeof(double),cmpd); qsort(t[0],R,sizeof(double),cmpd); qsort(t[1],R,sizeof(double),cmpd);
        printf("threads %d n=%d %s: base %.3f ms, setting %.3f ms; ratio median %.3f [q1 %.3f, q3 %.3f]\n",omp_get_max_threads(),n,argv[ai],t[0][R/2]*1e3,t[1][R/2]*1e3,pr[R/2],pr[R/4],pr[3*R/4]); fflush(stdout);}
    return 0;
}
