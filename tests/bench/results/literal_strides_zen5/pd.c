#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
size_t mb_dist = 16384;
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
    sl_model *m; sl_model_ctx *c; if(argc<4||sl_model_open(argv[1],&m)||sl_model_ctx_alloc(m,256,&c)) return 2;
    int R=atoi(argv[2]); size_t V=m->cfg.vocab_size; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(c,tok,64,lg); sl_model_truncate(c,64);
    for(int ai=3;ai<argc;ai++){ size_t d=(size_t)atol(argv[ai]); static double t[2][4000], pr[4000];
        for(int r=0;r<R;r++) for(int k=0;k<2;k++){ int v=(r&1)?1-k:k; mb_dist = v ? d : 16384;
            double t0=sl_now_s(); sl_model_forward(c,tok+64,1,lg); t[v][r]=sl_now_s()-t0; sl_model_truncate(c,64);}
        for(int r=0;r<R;r++) pr[r]=t[1][r]/t[0][r]; qsort(pr,R,8,cmpd); qsort(t[0],R,8,cmpd); qsort(t[1],R,8,cmpd);
        printf("%s threads %d t(1): 16 KiB %.3f ms, %zu B %.3f ms; ratio median %.3f [q1 %.3f, q3 %.3f]\n",argv[1],omp_get_max_threads(),t[0][R/2]*1e3,d,t[1][R/2]*1e3,pr[R/2],pr[R/4],pr[3*R/4]); fflush(stdout);}
    return 0;}
