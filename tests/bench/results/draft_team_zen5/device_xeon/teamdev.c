/* teamdev.c: single-token decode of MODEL at position 64 with the context's team on (1) and off
 * (0), alternated call by call; medians and the median of the pair ratios t(off)/t(on). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(void){
    sl_model *m; sl_model_ctx *c;
    if(sl_model_open(getenv("MODEL"),&m)||sl_model_ctx_alloc(m,256,&c)){fprintf(stderr,"%s\n",sl_errmsg());return 1;}
    size_t V=m->cfg.vocab_size; float *lg=malloc(64*V*4); int32_t tok[65]; for(int i=0;i<65;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(c,tok,64,lg); sl_model_truncate(c,64);
    int R=getenv("R")?atoi(getenv("R")):20; double t[2][400], pr[400];
    for(int r=0;r<R;r++) for(int v=0;v<2;v++){ c->team=!v; double t0=sl_now_s(); sl_model_forward(c,tok+64,1,lg); t[v][r]=sl_now_s()-t0; sl_model_truncate(c,64); }
    for(int r=0;r<R;r++) pr[r]=t[1][r]/t[0][r];
    qsort(pr,R,sizeof(double),cmpd); qsort(t[0],R,sizeof(double),cmpd); qsort(t[1],R,sizeof(double),cmpd);
    printf("T=%d: t(1) team %.2f ms, no team %.2f ms (medians); pair ratio no team / team %.3f [q1 %.3f, q3 %.3f]\n",omp_get_max_threads(),t[0][R/2]*1e3,t[1][R/2]*1e3,pr[R/2],pr[R/4],pr[3*R/4]);
    return 0;
}
