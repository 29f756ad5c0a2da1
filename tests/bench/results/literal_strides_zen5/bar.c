#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
int mb_xt = 1, mb_extra = 0;
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
    sl_model *m; sl_model_ctx *c; if(sl_model_open(argv[1],&m)||sl_model_ctx_alloc(m,256,&c)) return 2;
    int R=atoi(argv[2]), n=atoi(argv[3]), E=atoi(argv[4]); size_t V=m->cfg.vocab_size; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(c,tok,64,lg); sl_model_truncate(c,64);
    static double t[2][4000], pr[4000];
    for(int r=0;r<R;r++) for(int k=0;k<2;k++){ int v=(r&1)?1-k:k; mb_extra = v ? E : 0;
        double t0=sl_now_s(); sl_model_forward(c,tok+64,n,lg); t[v][r]=sl_now_s()-t0; sl_model_truncate(c,64);}
    for(int r=0;r<R;r++) pr[r]=t[1][r]-t[0][r]; qsort(pr,R,sizeof(double),cmpd); qsort(t[0],R,8,cmpd); qsort(t[1],R,8,cmpd);
    printf("threads %d n=%d: base %.3f ms, +%d barriers/layer %.3f ms; per barrier (median pair difference / %d): %.2f us [q1 %.2f, q3 %.2f]\n",omp_get_max_threads(),n,t[0][R/2]*1e3,E,t[1][R/2]*1e3,E*(int)m->cfg.n_layer,
      pr[R/2]*1e6/(E*m->cfg.n_layer),pr[R/4]*1e6/(E*m->cfg.n_layer),pr[3*R/4]*1e6/(E*m->cfg.n_layer));
    return 0;}
